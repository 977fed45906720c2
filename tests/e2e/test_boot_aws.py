"""End to end, AWS-flavoured: plan a llama.cpp workload whose weights are an s3:// object, render its user-data
with the real templates, boot it on this machine (tests/e2e/node.py) against moto in server mode and an
instance-metadata stub, build llama.cpp for real, and talk to it: the key is enforced, nothing leaks, and a
reboot skips the download and the build. Minutes (the build); `pytest -m e2e`, .ci/run runs it.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from infragen.plan import Plan
from infragen.render import render_user_data
from tests.e2e.boot import API_KEY, HF_TOKEN, HOST_PATHS, EngineBuild, chat_checks, make_node, plan_workload
from tests.e2e.cloud import ACCESS_KEY_ID, ROLE, Metadata, metadata_service, moto_server
from tests.e2e.conftest import LlamaRepo, need
from tests.e2e.llama_source import WORKLOAD
from tests.e2e.node import SERVICE_PATH
from tests.e2e.tiny_gguf import write_tiny_gguf

pytestmark = pytest.mark.e2e


@pytest.fixture
def emulators() -> Iterator[tuple[str, Metadata]]:
    with moto_server() as aws, metadata_service() as imds:
        yield aws, imds


def _seed(endpoint: str, plan: Plan, gguf: Path) -> None:
    """Upload the weights and put both secrets, as an operator (or the Pulumi program) would."""
    kw = {"endpoint_url": endpoint, "region_name": plan.deployment.region, "aws_access_key_id": "operator",
          "aws_secret_access_key": "operator"}
    bucket, _, key = plan.model.weights_uri.removeprefix("s3://").partition("/")
    s3 = boto3.client("s3", **kw)
    s3.create_bucket(Bucket=bucket)
    s3.upload_file(str(gguf), bucket, key)
    sm = boto3.client("secretsmanager", **kw)
    sm.create_secret(Name=plan.secrets.api_key_name, SecretString=API_KEY)
    sm.create_secret(Name=plan.secrets.hf_token_name, SecretString=HF_TOKEN)


def test_a_rendered_llama_cpp_node_boots_answers_and_reboots(tmp_path: Path, llama_repo: LlamaRepo,
                                                             emulators: tuple[str, Metadata],
                                                             engine_build: EngineBuild) -> None:
    for tool in ("git", "cmake", "c++", "curl", "python3"):
        need(shutil.which(tool, path=SERVICE_PATH) is not None, f"{tool} is not installed (.ci/run installs it)")
    for module in ("gguf", "moto.server", "flask"):
        need(importlib.util.find_spec(module.split(".")[0]) is not None,
             f"{module} is not installed (pip install -e '.[e2e]'; .ci/run does)")
    host_before = {p: os.path.lexists(p) for p in HOST_PATHS}
    aws, imds = emulators
    plan = plan_workload(tmp_path, WORKLOAD.name)
    assert plan.engine.name == "llama.cpp" and plan.deployment.cloud == "aws" and plan.deployment.gpus_per_node == 0
    assert plan.model.weights_source == "s3" and plan.engine.version == llama_repo.tag
    _seed(aws, plan, write_tiny_gguf(tmp_path / plan.model.weights_file))
    user_data = render_user_data(plan, "replica", llama_cpp_repo=llama_repo.url)
    # The redirects: AWS APIs to moto, the instance metadata to the stub (the CLI's own settings).
    node = make_node(tmp_path, {"AWS_ENDPOINT_URL": aws, "AWS_EC2_METADATA_SERVICE_ENDPOINT": imds.url})
    node.write_user_data(user_data, plan.storage.mount_path)
    try:
        # First boot: storage, install (pip, git clone of the tag, cmake build), secrets, download, engine, ready.
        node.boot()
        journal = node.journal()
        assert "READY: e2e-tiny" in journal
        assert f"installed llama.cpp {plan.engine.version}" in journal and "weights complete" in journal
        assert (node.path(plan.storage.mount_path) / plan.model.weights_file).stat().st_size > 1_000_000
        assert (node.path("/run/infragen") / "ready").exists()
        # The CLI got the role's credentials from the metadata service, IMDSv2 style (token first).
        assert imds.requests[0] == "PUT /latest/api/token"
        assert f"GET /latest/meta-data/iam/security-credentials/{ROLE}" in imds.requests
        assert ACCESS_KEY_ID.startswith("ASIA")

        chat_checks(plan, node, (API_KEY, HF_TOKEN))
        # The installed server is self-contained (static libraries): nothing it loads lives in the source tree.
        ldd = subprocess.run(["ldd", str(node.path("/opt/infragen/llama.cpp/bin/llama-server"))],
                             capture_output=True, text=True)  # a fully static binary: "not a dynamic executable"
        linked = ldd.stdout + ldd.stderr
        assert str(node.root) not in linked and "libllama" not in linked and "libggml" not in linked, linked
        engine_build.keep(node, f".installed-llamacpp-{plan.engine.version}")

        # Reboot: /run is a tmpfs (gone), the root disk and the volume stay; the markers skip install and download.
        binary = node.path("/opt/infragen/llama.cpp/bin/llama-server")
        built_at = binary.stat().st_mtime_ns
        node.shutdown()
        node.boot()
        journal = "\n".join(v for k, v in node.logs.items() if k.startswith("2/"))
        assert f"llama.cpp {plan.engine.version} already installed" in journal and "boot tools already" in journal
        assert "weights already on" in journal and "downloading" not in journal
        assert "READY: e2e-tiny" in journal
        assert binary.stat().st_mtime_ns == built_at
        chat_checks(plan, node, (API_KEY, HF_TOKEN))
    finally:
        node.shutdown()
        print(f"\ne2e: llama.cpp {llama_repo.tag} = {llama_repo.commit} ({llama_repo.note})")
        print("e2e: harness adjustments: " + "; ".join(node.adjustments))
        print(f"e2e: boots took {', '.join(f'{s:.0f} s' for s in node.boot_seconds)} (the first with the build)")
    assert {p: os.path.lexists(p) for p in HOST_PATHS} == host_before
    assert node.boot_seconds[1] < 120, "the second boot rebuilt or re-downloaded something"
