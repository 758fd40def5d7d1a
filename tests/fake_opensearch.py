"""A local fake OpenSearch that records every request (method, path, headers, body), for
testing what goes on the wire with the real opensearch-py client and signer."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: str


class FakeOpenSearch:
    """Answers like OpenSearch; `replies` maps (method, path prefix) to (status, JSON). A
    `_bulk` request without one is answered with every action done."""

    def __init__(self) -> None:
        self.requests: list[Seen] = []
        self.replies: dict[tuple[str, str], tuple[int, dict[str, Any]]] = {}
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode() if length else ""
                fake.requests.append(Seen(self.command, self.path, dict(self.headers), body))
                status, reply = 200, {"acknowledged": True, "errors": False, "items": []}
                if self.path.startswith("/_bulk"):
                    reply = {"errors": False, "items": bulk_items(body)}
                for (method, prefix), answer in fake.replies.items():
                    if method == self.command and self.path.startswith(prefix):
                        status, reply = answer
                payload = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _any  # noqa: N815

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


def bulk_items(body: str) -> list[dict[str, Any]]:
    """A `_bulk` reply's items: each action done, in the request's order."""
    items: list[dict[str, Any]] = []
    lines = [json.loads(line) for line in body.splitlines() if line.strip()]
    position = 0
    while position < len(lines):
        ((operation, meta),) = lines[position].items()
        items.append({operation: {"_id": meta.get("_id"), "status": 200}})
        position += 1 if operation == "delete" else 2  # a delete has no source line
    return items


@contextmanager
def serving(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenSearch]:
    """A running fake, with AWS credentials for the signer in the environment."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    server = FakeOpenSearch()
    thread = threading.Thread(
        target=server.server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
    )
    thread.start()
    try:
        yield server
    finally:
        server.server.shutdown()
        server.server.server_close()
