"""A PEP 503 simple index on 127.0.0.1 serving given files, standing in for a PyPI mirror (Alibaba's in-VPC one)
in the tests that fetch an engine's sdist the way a node does. Records every request path."""

from __future__ import annotations

import html
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


@dataclass
class LocalIndex:
    url: str
    """The index's base URL (`http://127.0.0.1:PORT/simple/`)."""
    requests: list[str] = field(default_factory=list)


@contextmanager
def local_index(project: str, files: list[Path]) -> Iterator[LocalIndex]:
    """Serve `files` as the distributions of `project`: its page links them by relative URL (as mirrors do)."""
    by_name = {f.name: f for f in files}
    links = "".join(f'<a href="../../packages/{html.escape(name)}#sha256=unused">{html.escape(name)}</a><br/>'
                    for name in by_name)
    page = f"<!DOCTYPE html><html><body><h1>Links for {html.escape(project)}</h1>{links}</body></html>".encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            index.requests.append(self.path)
            body: bytes | None = None
            if self.path == f"/simple/{project}/":
                body = page
            elif self.path.startswith("/packages/") and self.path[len("/packages/"):] in by_name:
                body = by_name[self.path[len("/packages/"):]].read_bytes()
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    index = LocalIndex(url=f"http://127.0.0.1:{server.server_address[1]}/simple/")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield index
    finally:
        server.shutdown()
        server.server_close()
