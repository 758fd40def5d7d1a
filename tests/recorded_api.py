"""Recorded Messages API replies served to the real `anthropic` client (httpx2 MockTransport)."""

from __future__ import annotations

import json
from collections import deque
from pathlib import Path
from typing import Any

import httpx2

RECORDED = Path(__file__).parent / "recorded" / "anthropic"
HAIKU_IN, HAIKU_OUT = 1.00, 5.00  # USD per million tokens


def recorded(name: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads((RECORDED / f"{name}.json").read_text(encoding="utf-8"))
    return body


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
