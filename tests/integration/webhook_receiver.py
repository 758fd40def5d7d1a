"""A real webhook receiver on 127.0.0.1 for the change-feed tests: answers 503 while `down`,
the first `fail_first` requests with a 500, then 200, and keeps every request it got."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Receiver"]


class Receiver(ThreadingHTTPServer):
    def __init__(self) -> None:
        self.fail_first = 0
        self.down = False  # a receiver that is down: every request answered 503
        self.requests: list[tuple[dict[str, str], bytes]] = []
        self.accepted: list[dict[str, Any]] = []
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}/hook"


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.requests.append((dict(self.headers), body))
        if self.server.down:
            self.send_response(503)
        elif len(self.server.requests) <= self.server.fail_first:
            self.send_response(500)
        else:
            self.server.accepted.append(json.loads(body))
            self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass
