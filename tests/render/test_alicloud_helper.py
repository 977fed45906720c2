"""The Alibaba helper rendered into alicloud nodes, run against a fake metadata server and KMS endpoint:
hardened-mode token first, the RAM role's STS credentials, a signed GetSecretValue, the value on stdout only.

Needs the KMS SDK the node installs (alibabacloud_kms20160120); skipped where it is not importable.
"""

from __future__ import annotations

import http.server
import json
import socket
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
import yaml

from infragen.render import render_user_data
from tests.plan_factory import SENTINEL_SECRET, make_plan

TOKEN = "metadata-token-123"


class _Cloud(http.server.BaseHTTPRequestHandler):
    """Metadata server (100.100.100.200) and KMS in one: refuses metadata reads without the token."""

    seen: ClassVar[list[tuple[str, ...]]] = []

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, code: int, body: str) -> None:
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_PUT(self) -> None:
        self.seen.append(("token", self.headers.get("X-aliyun-ecs-metadata-token-ttl-seconds") or ""))
        self._send(200, TOKEN)

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self._answer()

    def _answer(self) -> None:
        url = urllib.parse.urlparse(self.path)
        if url.path.startswith("/latest/meta-data/ram/security-credentials/"):
            if self.headers.get("X-aliyun-ecs-metadata-token") != TOKEN:
                return self._send(401, "")
            role = url.path.rsplit("/", 1)[1]
            self.seen.append(("credentials", role))
            if not role:
                return self._send(200, "node-role")
            return self._send(200, json.dumps({"AccessKeyId": "STS.id", "AccessKeySecret": "key", "Code": "Success",
                                               "SecurityToken": "sts-token", "Expiration": "2099-01-01T00:00:00Z"}))
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode()
        params = dict(urllib.parse.parse_qsl(url.query)) | dict(urllib.parse.parse_qsl(body))
        self.seen.append(("kms", params.get("Action") or self.headers.get("x-acs-action") or "",
                          params.get("SecretName") or "", self.headers.get("x-acs-security-token") or "",
                          (self.headers.get("Authorization") or "").split(" ")[0]))
        self._send(200, json.dumps({"SecretData": SENTINEL_SECRET, "RequestId": "r"}))


@pytest.fixture
def cloud() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    _Cloud.seen = []
    server = http.server.HTTPServer(("127.0.0.1", port), _Cloud)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield port
    server.shutdown()


def test_secret_read_with_the_ram_role_in_hardened_mode(cloud: int, tmp_path: Path) -> None:
    pytest.importorskip("alibabacloud_kms20160120", reason="the node's KMS SDK is not installed here")
    text = render_user_data(make_plan("single", "alicloud"), "replica")
    helper = next(f["content"] for f in yaml.safe_load(text)["write_files"] if f["path"].endswith("alicloud.py"))
    endpoint = 'endpoint=f"kms-vpc.{region}.aliyuncs.com"'
    assert endpoint in helper
    # Test seams: the metadata host and the KMS endpoint point at the fake; nothing else changes.
    seam = ("import alibabacloud_credentials.provider.ecs_ram_role as ecs\n"
            "_init = ecs.EcsRamRoleCredentialsProvider.__init__\n"
            "def _local(self, *a, **k):\n"
            "    _init(self, *a, **k)\n"
            f"    self._EcsRamRoleCredentialsProvider__metadata_service_host = '127.0.0.1:{cloud}'\n"
            "ecs.EcsRamRoleCredentialsProvider.__init__ = _local\n")
    script = tmp_path / "alicloud.py"
    script.write_text(seam + helper.replace(endpoint, f'endpoint="127.0.0.1:{cloud}", protocol="http"'))
    result = subprocess.run([sys.executable, str(script), "secret", "infragen/x/api-key", "cn-hangzhou"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == SENTINEL_SECRET and SENTINEL_SECRET not in result.stderr
    assert _Cloud.seen[0][0] == "token"
    assert ("credentials", "node-role") in _Cloud.seen
    assert ("kms", "GetSecretValue", "infragen/x/api-key", "sts-token", "ACS3-HMAC-SHA256") in _Cloud.seen
