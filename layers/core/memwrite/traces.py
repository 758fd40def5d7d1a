"""`GET /v1/traces/{trace_id}`: what is known so far about one request's turns."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel

from memwrite.models import SpanResult, StageSpan
from memwrite.ports import SpanStore, TraceRollback, TurnLedger
from memwrite.stages import pipeline_stages
from memwrite.store import RollbackRecord

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
    rolled_back_at: datetime | None = None
    rollback: RollbackRecord | None = None  # the audit record, once rolled back


def _finished(turn_id: str, spans: list[StageSpan], last_stage: str) -> bool:
    """A turn is done when rejected whole, or when every candidate it produced is."""
    own = [span for span in spans if span.item_id == turn_id]
    if not own:
        return False
    if own[-1].result is SpanResult.REJECT or own[-1].stage == last_stage:
        return True
    candidates: dict[str, list[StageSpan]] = {}
    for span in spans:
        if span.kind == "candidate" and span.item_id.startswith(f"{turn_id}:"):
            candidates.setdefault(span.item_id, []).append(span)
    extracted = own[-1].stage == "extract" and own[-1].result is SpanResult.PASS
    return (
        extracted
        and bool(candidates)
        and all(
            any(s.result is SpanResult.REJECT or s.stage == last_stage for s in chain)
            for chain in candidates.values()
        )
    )


def _status(turn_ids: tuple[str, ...], spans: list[StageSpan]) -> TraceStatus:
    if any(span.result is SpanResult.ERROR for span in spans):
        return TraceStatus.FAILED
    # Complete once persisted (readable by id); indexing (stream stages) follows on its own.
    last_stage = pipeline_stages()[-1].name
    if all(_finished(tid, spans, last_stage) for tid in set(turn_ids)):
        return TraceStatus.COMPLETE
    return TraceStatus.IN_PROGRESS


def get_trace(
    tenant: str,
    trace_id: str,
    ledger: TurnLedger,
    spans: SpanStore,
    rollbacks: TraceRollback | None = None,
) -> TraceView | None:
    """The trace of `tenant`, or None when it does not exist for that tenant; with its
    rollback record when `rollbacks` is given and it was rolled back."""
    record = ledger.get_trace(tenant, trace_id)
    if record is None:
        return None
    rollback = rollbacks.rollback_of(tenant, trace_id) if rollbacks is not None else None
    found = spans.spans_of(tenant, trace_id)
    written = ledger.memories_of_trace(tenant, trace_id)
    return TraceView(
        trace_id=trace_id,
        user_id=record.user_id,
        session_id=record.session_id,
        created_at=record.created_at,
        status=_status(record.turn_ids, found),
        turn_ids=list(record.turn_ids),
        spans=found,
        outcome=TraceOutcome(
            stored=sum(1 for _, outcome in written if outcome == "stored"),
            merged=sum(1 for _, outcome in written if outcome == "merged"),
            discarded=sum(1 for span in found if span.result is SpanResult.REJECT),
            memory_ids=sorted({memory_id for memory_id, _ in written}),
        ),
        llm_calls=sum(span.llm.calls for span in found if span.llm),
        cost_usd=round(sum(span.llm.cost_usd for span in found if span.llm), 6),
        rolled_back_at=rollback.rolled_back_at if rollback is not None else None,
        rollback=rollback,
    )
