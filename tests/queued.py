"""A turn as the ingest API queues it (`QueuedTurn`), for the dispatcher and pipeline tests."""

from __future__ import annotations

from datetime import UTC, datetime

from memwrite.models import QueuedTurn


def queued_turn(text: str, turn_id: str, session: str = "s-1") -> QueuedTurn:
    """A user turn of tenant acme's user dana, observed 2026-03-02 09:00 UTC."""
    return QueuedTurn(
        tenant="acme",
        user_id="dana",
        session_id=session,
        agent_id=None,
        trace_id="t-1",
        turn_id=turn_id,
        role="user",
        text=text,
        observed_at=datetime(2026, 3, 2, 9, tzinfo=UTC),
        source="user_explicit",
    )
