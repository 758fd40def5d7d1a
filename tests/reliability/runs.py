"""One run of the chaos suite: a conversation posted (a crashed request re-sent, as a client
does) and drained (a crashed stream batch delivered again, as the event source does), ending in
its final state."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memwrite_local.runtime.runner import DrainReport
from tests.integration.conftest import Local
from tests.reliability.final_state import FinalState, final_state

__all__ = ["CONVERSATION", "IDEMPOTENCY", "InjectedCrash", "drain", "ingest", "post_conversation"]

REPO_ROOT = Path(__file__).resolve().parents[2]
# Ten timestamped turns (a move, a changed taste, a new job): supersessions, merges, skips.
CONVERSATION: dict[str, Any] = json.loads(
    (REPO_ROOT / "events" / "conversations" / "moving.json").read_text(encoding="utf-8")
)
# One key: every run, clean or faulty, writes the same trace id (a client's retries reuse it).
IDEMPOTENCY = {"Idempotency-Key": "reliability-conversation"}


class InjectedCrash(RuntimeError):
    """A crash a test injects (never raised by memwrite itself)."""


def post_conversation(local: Local, body: dict[str, Any] = CONVERSATION) -> None:
    """POST the conversation; a crashed request is retried by the client (same key)."""
    for _ in range(2):
        try:
            response = local.post_turns(body, headers=IDEMPOTENCY)
        except InjectedCrash:
            continue
        assert response.status == 202, response.body
        return
    pytest.fail("the request crashed twice")


def drain(local: Local) -> DrainReport:
    """Drain the queue and the outbox; a crashed stream batch is delivered again (as the
    event source mapping retries a failed invocation)."""
    for _ in range(2):
        try:
            return local.runner.drain()
        except InjectedCrash:
            continue
    pytest.fail("the stream batch crashed twice")


def ingest(local: Local, body: dict[str, Any] = CONVERSATION) -> FinalState:
    """`body` in and drained, nothing reported lost: the final state."""
    post_conversation(local, body)
    report = drain(local)
    assert report.failed == {} and report.index_failed == {}
    return final_state(local)
