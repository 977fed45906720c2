"""What both flavours of the end-to-end boot share: planning the tiny workload, a node with the harness's
environment, the chat calls, and the llama.cpp build that the AWS boot makes and the Alibaba boot is seeded with
(so CI builds llama.cpp once: the Alibaba boot does not exercise the build).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from infragen.plan import Plan
from infragen.sizing import plan_file
from tests.e2e.llama_source import FIXTURES
from tests.e2e.node import SERVICE_PATH, Node

#: Secret values put in the emulators; they must appear nowhere but /run/infragen (and the engine's memory).
API_KEY = "sk-e2e-KEY-4f1c9a7e-never-in-files"
HF_TOKEN = "hf_e2eTOKENb2d8c6never0in0files"
#: Host network settings a node would have its own of (CA bundles, proxies, pip's index), passed through.
_PASS = ("PIP_", "SSL_CERT_", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "AWS_CA_BUNDLE", "HTTP_PROXY", "HTTPS_PROXY",
         "http_proxy", "https_proxy")
#: Where a node writes; none may appear on the host because of the test.
HOST_PATHS = ("/opt/infragen", "/run/infragen", "/opt/models", "/usr/local/lib/infragen", "/etc/infragen",
              "/usr/local/sbin/infragen-install", "/etc/systemd/system/infragen.target")
#: What the engine step of infragen-install leaves on the root disk: the binary's directory (relative to
#: /opt/infragen) and its marker.
ENGINE_DIR = "/opt/infragen/llama.cpp"


def plan_workload(tmp_path: Path, workload: str) -> Plan:
    """Plan fixtures/<workload> next to the tiny model's config.json (a config.json model is named after its
    directory: e2e-tiny)."""
    directory = tmp_path / "e2e-tiny"
    directory.mkdir()
    for name in (workload, "config.json"):
        shutil.copy(FIXTURES / name, directory / name)
    plan: Plan = plan_file(directory / workload)
    return plan


def make_node(tmp_path: Path, redirects: dict[str, str]) -> Node:
    """A node under tmp_path/node whose units get systemd's minimal environment, this host's network settings and
    `redirects` (where the cloud's APIs and metadata are); the data volume counts as already mounted."""
    root = tmp_path / "node"
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    # The data volume is "already mounted" (storage's reuse branch): the harness makes no filesystem.
    mountpoint = fake_bin / "mountpoint"
    mountpoint.write_text(f'#!/bin/bash\n[ "${{!#}}" = {root}/opt/models ]\n')
    mountpoint.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k.startswith(_PASS)}
    env.update({"PATH": f"{fake_bin}:{SERVICE_PATH}", "LANG": "C.UTF-8", "HOME": str(root / "root"),
                "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1", **redirects})
    node = Node(root=root, env=env)
    node.adjustments.append("`mountpoint` answers yes for the model store (no disk is formatted or mounted)")
    return node


def post(url: str, body: dict[str, object], key: str | None) -> tuple[int, dict[str, object]]:
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, {}


def chat_checks(plan: Plan, node: Node, secrets: tuple[str, ...]) -> None:
    """The API key is enforced (200 with it, generated tokens; 401 without or wrong) and no secret leaked."""
    from tests.e2e.node import secret_leaks

    url = f"http://127.0.0.1:{plan.engine.port}/v1/chat/completions"
    chat = {"model": plan.model.served_model_name, "max_tokens": 8,
            "messages": [{"role": "user", "content": "Hello there"}]}
    status, answer = post(url, chat, API_KEY)
    assert status == 200, answer
    assert answer["usage"]["completion_tokens"] >= 1  # type: ignore[index]
    assert isinstance(answer["choices"][0]["message"]["content"], str)  # type: ignore[index]
    assert post(url, chat, None)[0] == 401
    assert post(url, chat, "sk-wrong-key")[0] == 401
    assert secret_leaks(node, secrets) == []


@dataclass
class EngineBuild:
    """The llama.cpp the first booted node built (its installed directory and marker), kept for the session."""

    store_dir: Path
    marker: str = ""
    sources: list[str] = field(default_factory=list)

    def keep(self, node: Node, marker: str) -> None:
        """Copy what the engine step installed on `node` (after a boot that built it)."""
        subprocess.run(["cp", "-a", str(node.path(ENGINE_DIR)), str(self.store_dir / "llama.cpp")], check=True)
        self.marker = marker
        self.sources.append(str(node.root))

    def seed(self, node: Node) -> bool:
        """Lay the kept build on `node`'s root disk as the engine step would have left it; False if none kept."""
        if not self.marker:
            return False
        target = node.path(ENGINE_DIR)
        target.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cp", "-a", str(self.store_dir / "llama.cpp"), str(target)], check=True)
        (target.parent / self.marker).touch()
        node.adjustments.append(f"{ENGINE_DIR} and its marker {self.marker} seeded from the node that built "
                                f"llama.cpp ({self.sources[-1]}): this boot does not build it")
        return True
