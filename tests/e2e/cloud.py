"""The cloud a node talks to, on 127.0.0.1: moto in server mode (a real AWS API emulator: S3, Secrets Manager)
and an instance-metadata stub that hands out the node role's credentials the IMDSv2 way (token first)."""

from __future__ import annotations

import http.server
import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import ClassVar

ROLE = "infragen-e2e-node"
#: Credentials the metadata stub hands out (moto accepts any); never a real key.
ACCESS_KEY_ID = "ASIAE2EINFRAGENTEST00"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def moto_server() -> Iterator[str]:
    """moto's ThreadedMotoServer on 127.0.0.1; yields its endpoint URL."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@dataclass
class Metadata:
    """What the node asked the metadata service (to show the CLI used IMDSv2 and the role)."""

    url: str
    requests: list[str] = field(default_factory=list)


#: The instance the metadata stub describes (instance id, primary interface) unless a test passes its own values.
INSTANCE_METADATA = {"instance-id": "i-0e2e0000000000001", "mac": "0a:00:00:00:00:01",
                     "network/interfaces/macs/0a:00:00:00:00:01/interface-id": "eni-0e2e0000000000001",
                     "network/interfaces/macs/0a:00:00:00:00:01/local-ipv4s": "10.40.0.57"}


class _Imds(http.server.BaseHTTPRequestHandler):
    token = "e2e-imds-token"
    record: ClassVar[list[str]] = []
    values: ClassVar[dict[str, str]] = {}

    def log_message(self, *args: object) -> None:
        pass

    def _reply(self, code: int, body: str, content_type: str = "text/plain") -> None:
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_PUT(self) -> None:
        self.record.append(f"PUT {self.path}")
        if self.path == "/latest/api/token" and self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
            self._reply(200, self.token)
        else:
            self._reply(400, "")

    def do_GET(self) -> None:
        self.record.append(f"GET {self.path}")
        if self.headers.get("X-aws-ec2-metadata-token") != self.token:
            self._reply(401, "")  # IMDSv2 required (the provisioner sets http_tokens=required)
            return
        base = "/latest/meta-data/iam/security-credentials/"
        if self.path == base:
            self._reply(200, ROLE)
        elif self.path == base + ROLE:
            now = datetime.now(UTC)
            self._reply(200, json.dumps({
                "Code": "Success", "Type": "AWS-HMAC", "AccessKeyId": ACCESS_KEY_ID,
                "SecretAccessKey": "e2e-not-a-secret-access-key", "Token": "e2e-session-token",
                "LastUpdated": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "Expiration": (now + timedelta(hours=6)).strftime("%Y-%m-%dT%H:%M:%SZ")}), "application/json")
        elif self.path.removeprefix("/latest/meta-data/") in self.values:
            self._reply(200, self.values[self.path.removeprefix("/latest/meta-data/")])
        else:
            self._reply(404, "")


@contextmanager
def metadata_service(values: dict[str, str] | None = None) -> Iterator[Metadata]:
    """The EC2 instance-metadata stub on 127.0.0.1 (IMDSv2 only): the role's credentials and `values` by path
    under /latest/meta-data/ (default INSTANCE_METADATA)."""
    handler = type("Imds", (_Imds,), {"record": [], "values": dict(INSTANCE_METADATA if values is None else values)})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    meta = Metadata(url=f"http://127.0.0.1:{server.server_address[1]}/", requests=handler.record)
    try:
        yield meta
    finally:
        server.shutdown()
        server.server_close()
