"""`GET /v1/traces/{trace_id}`: what is known so far about one request's turns."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel

from memwrite.models import SpanResult, StageSpan
from memwrite.ports import SpanStore, TurnLedger
from memwrite.stages import stage_names

__all__ = ["TraceOutcome", "TraceStatus", "TraceView", "get_trace"]


class TraceStatus(StrEnum):
    IN_PROGRESS = "in_progress"  # some turn has not reached a final verdict yet
    COMPLETE = "complete"
    FAILED = "failed"  # some turn ended in an error span


class TraceOutcome(BaseModel):
    stored: int
    merged: int
    discarded: int
    memory_ids: list[str]


class TraceView(BaseModel):
    trace_id: str
    user_id: str
    session_id: str
    created_at: str
    status: TraceStatus
    turn_ids: list[str]
    spans: list[StageSpan]
    outcome: TraceOutcome
    llm_calls: int
    cost_usd: float


def _status(turn_ids: tuple[str, ...], spans: list[StageSpan]) -> TraceStatus:
    last_stage = stage_names()[-1]
    latest: dict[str, StageSpan] = {}
    for span in spans:
        if span.kind == "turn":
            latest[span.item_id] = span
    if any(span.result is SpanResult.ERROR for span in latest.values()):
        return TraceStatus.FAILED
    for tid in turn_ids:
        last = latest.get(tid)
        finished = last is not None and (
            last.result is SpanResult.REJECT or last.stage == last_stage
        )
        if not finished:
            return TraceStatus.IN_PROGRESS
    return TraceStatus.COMPLETE


def get_trace(tenant: str, trace_id: str, ledger: TurnLedger, spans: SpanStore) -> TraceView | None:
    """The trace of `tenant`, or None when it does not exist for that tenant."""
    record = ledger.get_trace(tenant, trace_id)
    if record is None:
        return None
    found = spans.spans_of(tenant, trace_id)
    return TraceView(
        trace_id=trace_id,
        user_id=record.user_id,
        session_id=record.session_id,
        created_at=record.created_at,
        status=_status(record.turn_ids, found),
        turn_ids=list(record.turn_ids),
        spans=found,
        outcome=TraceOutcome(
            stored=0,
            merged=0,
            discarded=sum(1 for span in found if span.result is SpanResult.REJECT),
            memory_ids=[],
        ),
        llm_calls=sum(span.llm.calls for span in found if span.llm),
        cost_usd=round(sum(span.llm.cost_usd for span in found if span.llm), 6),
    )
