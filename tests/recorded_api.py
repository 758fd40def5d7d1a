"""Recorded Messages API replies served to the real `anthropic` client (httpx2 MockTransport)."""

from __future__ import annotations

import json
import threading
from collections import deque
from pathlib import Path
from typing import Any

import httpx2

RECORDED = Path(__file__).parent / "recorded" / "anthropic"
HAIKU_IN, HAIKU_OUT = 1.00, 5.00  # USD per million tokens


def recorded(name: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads((RECORDED / f"{name}.json").read_text(encoding="utf-8"))
    return body


def system_text(request: dict[str, Any]) -> str:
    """A request's system prompt as the model reads it: a string, or its blocks' text."""
    system = request["system"]
    if isinstance(system, str):
        return system
    return "\n\n".join(block["text"] for block in system)


def haiku_cost(name: str) -> float:
    usage = recorded(name)["usage"]
    input_tokens: int = usage["input_tokens"]
    output_tokens: int = usage["output_tokens"]
    return input_tokens * HAIKU_IN / 1e6 + output_tokens * HAIKU_OUT / 1e6


class RecordedApi:
    """Serves recorded replies, (name, status) pairs, in order; keeps every request body."""

    def __init__(self, *replies: str | tuple[str, int]) -> None:
        self._replies = deque(r if isinstance(r, tuple) else (r, 200) for r in replies)
        self.requests: list[dict[str, Any]] = []

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(json.loads(request.content))
        name, status = self._replies.popleft()
        return httpx2.Response(status, json=recorded(name))

    def client(self) -> httpx2.Client:
        return httpx2.Client(transport=httpx2.MockTransport(self.handle))


class RecordedExchanges:
    """A recording's exchanges (`memwrite.adapters.anthropic.recording`), served by request.

    Each request gets the recorded answer to the same body (by `request_key`), the answers to
    one body in the order they were recorded: neither the order of the calls nor their
    concurrency matters. A request with no answer left is kept in `unmatched` and refused with
    a 400, which the client does not retry.
    """

    def __init__(self, directory: Path) -> None:
        self._answers: dict[str, deque[tuple[int, Any]]] = {}
        files = sorted(directory.glob("*.json"), key=lambda p: _exchange_order(p.stem))
        for path in files:
            exchange = json.loads(path.read_text(encoding="utf-8"))
            response = exchange["response"]
            queue = self._answers.setdefault(exchange["key"], deque())
            queue.append((response["status"], response["body"]))
        self.unmatched: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def answer(self, body: bytes) -> tuple[int, Any]:
        from memwrite.adapters.anthropic.recording import request_key

        with self._lock:
            queue = self._answers.get(request_key(body))
            if queue:
                return queue.popleft()
            self.unmatched.append(json.loads(body))
        message = "no recorded answer to this request"
        return 400, {
            "type": "error",
            "error": {"type": "invalid_request_error", "message": message},
        }

    def unused(self) -> int:
        """Recorded answers no request asked for."""
        return sum(len(queue) for queue in self._answers.values())

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        status, body = self.answer(request.content)
        return httpx2.Response(status, json=body)


def _exchange_order(stem: str) -> tuple[str, int]:
    key, _, n = stem.rpartition("-")
    return key, int(n)
