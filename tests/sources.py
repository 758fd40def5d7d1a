"""The trace a test's candidates come from, recorded as ingest records it before it enqueues a
turn: persist commits a candidate only while its source trace exists (an erased user's turn
still in flight writes nothing)."""

from __future__ import annotations

from datetime import UTC, datetime

from memwrite.ports import TraceRecord, TurnLedger


def record_trace(ledger: TurnLedger, tenant: str, user_id: str, trace_id: str) -> None:
    ledger.put_trace(
        TraceRecord(
            trace_id=trace_id,
            tenant=tenant,
            user_id=user_id,
            session_id="s1",
            agent_id=None,
            source="user_explicit",
            created_at=datetime(2026, 1, 5, 9, tzinfo=UTC).isoformat(),
            turn_ids=(),
        )
    )
