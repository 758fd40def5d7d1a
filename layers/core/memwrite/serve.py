"""`memwrite serve`: the HTTP API on 127.0.0.1, each request turned into an API Gateway event."""

from __future__ import annotations

import json
import logging
from http.server import BaseHTTPRequestHandler, HTTPServer

from memwrite.local_runner import LocalRunner

__all__ = ["make_server"]

logger = logging.getLogger(__name__)


def make_server(runner: LocalRunner, port: int, host: str = "127.0.0.1") -> HTTPServer:
    """A single-threaded server: moto's in-process state is not shared across threads safely."""

    class _Handler(BaseHTTPRequestHandler):
        def _dispatch(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length).decode("utf-8") if length else None
            headers = dict(self.headers.items())
            result = runner.call(self.command, self.path, body, headers=headers, api_key=None)
            payload = json.dumps(result.body).encode("utf-8")
            self.send_response(result.status)
            for name, value in result.headers.items():
                if name.lower() not in {"content-length", "content-type"}:
                    self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            runner.drain()  # the queue consumer runs after each request, as SQS would trigger it

        do_GET = _dispatch  # noqa: N815 (http.server's naming)
        do_POST = _dispatch  # noqa: N815
        do_DELETE = _dispatch  # noqa: N815

        def log_message(self, format: str, *args: object) -> None:
            logger.info("%s - %s", self.address_string(), format % args)

    return HTTPServer((host, port), _Handler)
