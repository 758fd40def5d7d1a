"""A local fake Anthropic Messages API over real HTTP, for runs of the whole pipeline.

The handlers build their model clients from the environment, so the pipeline reaches this
server through `ANTHROPIC_BASE_URL` with no patching: every adapter, the SDK's own HTTP client
and the recorder (`MEMWRITE_LLM_RECORD`) run as they do against the real API. `answer` maps a
request body to (status, JSON body); every request's headers and body are kept.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.recorded_api import recorded

Answer = Callable[[bytes], tuple[int, Any]]

# Which recorded answer fits a request, by the fields its answer's schema asks for.
_CANNED = {
    "candidates": "extract_valid",
    "questions": "hype_questions",
    "same": "dedupe_same",
    "outcome": "verify_pass",
    "decisions": "resolve_decision",
}


def canned_answer(body: bytes) -> tuple[int, Any]:
    """A recorded answer of the kind the request asks for (`tests/recorded/anthropic/`)."""
    schema = json.loads(body)["output_config"]["format"]["schema"]
    kind = next(name for name in _CANNED if name in schema.get("properties", {}))
    return 200, recorded(_CANNED[kind])


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class FakeAnthropic:
    url: str
    requests: list[Seen] = field(default_factory=list)


@contextmanager
def serving(answer: Answer) -> Iterator[FakeAnthropic]:
    """A running fake answering with `answer`; its `url` goes in `ANTHROPIC_BASE_URL`."""
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with lock:
                fake.requests.append(Seen(self.path, dict(self.headers), body))
            status, reply = answer(body)
            payload = json.dumps(reply).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    fake = FakeAnthropic(url=f"http://127.0.0.1:{server.server_address[1]}")
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
    )
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
