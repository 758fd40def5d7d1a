"""`memwrite serve`: the HTTP API on 127.0.0.1, each request turned into an API Gateway event."""

from __future__ import annotations

import json
import logging
from http.server import BaseHTTPRequestHandler, HTTPServer
from urllib.parse import urlsplit

from memwrite_local.runner import LocalRunner

__all__ = ["make_server"]

logger = logging.getLogger(__name__)


def make_server(runner: LocalRunner, port: int, host: str = "127.0.0.1") -> HTTPServer:
    """A single-threaded server: moto's in-process state is not shared across threads safely."""

    class _Handler(BaseHTTPRequestHandler):
        def _dispatch(self) -> None:
            declared = self.headers.get("Content-Length") or "0"
            # int() would crash on "abc" or "²"; "-1" would read until the client hangs up.
            if not (declared.isascii() and declared.isdigit()):
                self._refuse("Content-Length", "not a non-negative integer")
                return
            raw = self.rfile.read(int(declared))
            try:
                body = raw.decode("utf-8") if raw else None
            except UnicodeDecodeError:
                self._refuse("body", "the body is not valid UTF-8")
                return
            headers = dict(self.headers.items())
            # API Gateway routes on the path; the query string becomes its parameters.
            parts = urlsplit(self.path)
            path = f"{parts.path}?{parts.query}" if parts.query else parts.path
            result = runner.call(self.command, path, body, headers=headers, api_key=None)
            self._reply(result.status, result.body, result.headers)
            # The queue consumer, then the outbox's, run after each request as SQS and the
            # DynamoDB stream would trigger them.
            runner.drain()

        def _refuse(self, field: str, message: str) -> None:
            error = {"field": field, "message": message}
            self._reply(400, {"error": "invalid_request", "errors": [error]}, {})

        def _reply(self, status: int, body: dict[str, object], headers: dict[str, str]) -> None:
            payload = b"" if self.command == "HEAD" else json.dumps(body).encode("utf-8")
            self.send_response(status)
            for name, value in headers.items():
                if name.lower() not in {"content-length", "content-type"}:
                    self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        # Every method goes to the router: an unrouted one is the API's 404, not http.server's 501.
        do_GET = _dispatch  # noqa: N815 (http.server's naming)
        do_POST = _dispatch  # noqa: N815
        do_DELETE = _dispatch  # noqa: N815
        do_PUT = _dispatch  # noqa: N815
        do_PATCH = _dispatch  # noqa: N815
        do_OPTIONS = _dispatch  # noqa: N815
        do_HEAD = _dispatch  # noqa: N815

        def log_message(self, format: str, *args: object) -> None:
            logger.info("%s - %s", self.address_string(), format % args)

    return HTTPServer((host, port), _Handler)
