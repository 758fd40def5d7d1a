"""The trace endpoints' reads: one request's turns stage by stage (`GET /v1/traces/{trace_id}`),
the traces that wrote a memory, and a user's traces over a time range."""

from __future__ import annotations

import time
from collections.abc import Set as AbstractSet
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

from memwrite.errors import InvalidQuery, UnknownMemory
from memwrite.models import SpanResult, StageSpan
from memwrite.ports import (
    EpisodeStore,
    MemoryReader,
    SpanStore,
    TraceRecord,
    TraceRollback,
    TurnLedger,
)
from memwrite.reasons import KEPT_AS_EPISODE, RolledBack
from memwrite.records.episode import episode_doc_id
from memwrite.records.store import RollbackRecord
from memwrite.stages import pipeline_stages, stream_stages

__all__ = [
    "MemoryTraceView",
    "MemoryTraces",
    "TraceOutcome",
    "TracePageView",
    "TraceStatus",
    "TraceView",
    "get_trace",
    "parse_time_bound",
    "traces_of_memory",
    "traces_of_user",
]


class TraceStatus(StrEnum):
    IN_PROGRESS = "in_progress"  # a turn has no final verdict yet, or what it wrote is unindexed
    COMPLETE = "complete"  # every turn decided, and what they wrote indexed (searchable)
    FAILED = "failed"  # some turn ended in an error span


class TraceOutcome(BaseModel):
    stored: int
    merged: int
    discarded: int  # turns and candidates dropped, never the turns kept as episodes
    episodes: int  # turns deferred and kept as pending episodes for backfill
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
    input_tokens: int  # uncached
    output_tokens: int
    cost_usd: float  # cached tokens included
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    rolled_back_at: datetime | None = None
    rollback: RollbackRecord | None = None  # the audit record, once rolled back
    episodes: list[dict[str, Any]] = Field(
        default_factory=list, description="The request's turns kept as episodes."
    )


class MemoryTraceView(TraceView):
    memory_outcomes: list[str]  # what this trace did to the memory: stored and/or merged


class MemoryTraces(BaseModel):
    memory_id: str
    traces: list[MemoryTraceView]  # oldest first


class TracePageView(BaseModel):
    user_id: str
    traces: list[TraceView]  # newest first
    next_cursor: str | None


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


def _of_turn(span: StageSpan, turn_ids: tuple[str, ...]) -> str | None:
    return next(
        (tid for tid in turn_ids if span.item_id == tid or span.item_id.startswith(f"{tid}:")),
        None,
    )


def _retried_past(error: StageSpan, spans: list[StageSpan], turn_ids: tuple[str, ...]) -> bool:
    """A later attempt of the error's stage went on with the same turn. A retry's span replaces
    the failed attempt's when their ids agree; resolve_refs' do not when resolving renamed the
    candidate, and its failed attempt stays on the trace, with what its calls cost. A failed
    webhook attempt is retried past once the same event reached the same webhook."""
    if error.kind == "webhook":
        delivery = error.item_id.partition("@")[0]  # <memory>#<rev>:webhook:<hook>
        return any(
            span.kind == "webhook"
            and span.result is not SpanResult.ERROR
            and span.item_id.partition("@")[0] == delivery
            for span in spans
        )
    turn = _of_turn(error, turn_ids)
    return turn is not None and any(
        span.stage == error.stage
        and span.result is not SpanResult.ERROR
        and span.at > error.at
        and _of_turn(span, turn_ids) == turn
        for span in spans
    )


def _indexed(doc_ids: AbstractSet[str], spans: list[StageSpan]) -> bool:
    """Stage 7 has taken each document's change: its span (`<doc id>#<rev>`, written after
    the index call returned) is on the trace, so a search now finds (or no longer finds) it."""
    streamed = {stage.name for stage in stream_stages()}
    done = {
        span.item_id.rpartition("#")[0]
        for span in spans
        if span.stage in streamed and span.result is not SpanResult.ERROR
    }
    return doc_ids <= done


def _status(
    turn_ids: tuple[str, ...], spans: list[StageSpan], doc_ids: AbstractSet[str]
) -> TraceStatus:
    errors = [span for span in spans if span.result is SpanResult.ERROR]
    if any(not _retried_past(error, spans, turn_ids) for error in errors):
        return TraceStatus.FAILED
    # Complete once persisted and indexed (docs/design.md §7): a client's `wait` then
    # `search` finds what the trace stored. A rollback took the trace's documents out itself.
    if any(isinstance(span.reason, RolledBack) for span in spans):
        doc_ids = frozenset()
    last_stage = pipeline_stages()[-1].name
    if all(_finished(tid, spans, last_stage) for tid in set(turn_ids)) and _indexed(doc_ids, spans):
        return TraceStatus.COMPLETE
    return TraceStatus.IN_PROGRESS


def get_trace(
    tenant: str,
    trace_id: str,
    ledger: TurnLedger,
    spans: SpanStore,
    rollbacks: TraceRollback | None = None,
    *,
    episodes: EpisodeStore | None = None,
) -> TraceView | None:
    """The trace of `tenant`, or None when it does not exist for that tenant; with its
    rollback record when `rollbacks` is given and it was rolled back."""
    record = ledger.get_trace(tenant, trace_id)
    if record is None:
        return None
    kept = (
        {} if episodes is None else episodes.get_episodes(tenant, record.user_id, record.turn_ids)
    )
    # The episodes it kept are the trace's to index too (a backfill's trace lists turns that
    # another trace kept: their documents' spans are that trace's).
    own = frozenset(episode_doc_id(t) for t, e in kept.items() if e.turn.trace_id == trace_id)
    view = _view(record, ledger, spans, own)
    if episodes is not None:
        now = time.time()
        view = view.model_copy(
            update={"episodes": [kept[t].as_json(now) for t in record.turn_ids if t in kept]}
        )
    rollback = rollbacks.rollback_of(tenant, trace_id) if rollbacks is not None else None
    if rollback is None:
        return view
    return view.model_copy(update={"rolled_back_at": rollback.rolled_back_at, "rollback": rollback})


def _view(
    record: TraceRecord,
    ledger: TurnLedger,
    spans: SpanStore,
    episode_docs: frozenset[str] = frozenset(),
) -> TraceView:
    found = spans.spans_of(record.tenant, record.trace_id)
    written = ledger.memories_of_trace(record.tenant, record.trace_id)
    usage = [span.llm for span in found if span.llm]
    return TraceView(
        trace_id=record.trace_id,
        user_id=record.user_id,
        session_id=record.session_id,
        created_at=record.created_at,
        status=_status(
            record.turn_ids, found, {memory_id for memory_id, _ in written} | episode_docs
        ),
        turn_ids=list(record.turn_ids),
        spans=found,
        outcome=TraceOutcome(
            stored=sum(1 for _, outcome in written if outcome == "stored"),
            merged=sum(1 for _, outcome in written if outcome == "merged"),
            discarded=sum(
                1
                for span in found
                if span.result is SpanResult.REJECT and not isinstance(span.reason, KEPT_AS_EPISODE)
            ),
            episodes=len(
                {span.item_id for span in found if isinstance(span.reason, KEPT_AS_EPISODE)}
            ),
            memory_ids=sorted({memory_id for memory_id, _ in written}),
        ),
        llm_calls=sum(llm.calls for llm in usage),
        input_tokens=sum(llm.input_tokens for llm in usage),
        output_tokens=sum(llm.output_tokens for llm in usage),
        cost_usd=round(sum(llm.cost_usd for llm in usage), 6),
        cache_creation_input_tokens=sum(llm.cache_creation_input_tokens for llm in usage),
        cache_read_input_tokens=sum(llm.cache_read_input_tokens for llm in usage),
    )


def traces_of_memory(
    tenant: str, memory_id: str, ledger: TurnLedger, spans: SpanStore, reader: MemoryReader
) -> MemoryTraces:
    """Every trace that stored or merged into the memory, with its spans, oldest first.

    Raises `UnknownMemory` when the tenant has no such memory."""
    if reader.memory_by_id(tenant, memory_id) is None:
        raise UnknownMemory(memory_id)
    outcomes: dict[str, list[str]] = {}
    for trace_id, outcome in ledger.traces_of_memory(tenant, memory_id):
        outcomes.setdefault(trace_id, []).append(outcome)
    views = []
    for trace_id, written in outcomes.items():
        record = ledger.get_trace(tenant, trace_id)
        if record is not None:  # an erased trace leaves no record to show
            view = _view(record, ledger, spans)
            views.append(MemoryTraceView(**view.model_dump(), memory_outcomes=sorted(written)))
    views.sort(key=lambda view: (view.created_at, view.trace_id))
    return MemoryTraces(memory_id=memory_id, traces=views)


def parse_time_bound(name: str, value: str | None) -> datetime | None:
    """An ISO 8601 time from a query parameter (naive: UTC); `InvalidQuery` naming it."""
    if value is None or value == "":
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError as exc:
        raise InvalidQuery(name, "an ISO 8601 time, e.g. 2026-01-31T09:00:00Z") from exc


def traces_of_user(
    tenant: str,
    user_id: str,
    *,
    since: datetime | None,
    until: datetime | None,
    limit: int,
    cursor: str | None,
    ledger: TurnLedger,
    spans: SpanStore,
) -> TracePageView:
    """One page of the user's traces created in [since, until], newest first, with spans."""
    if since is not None and until is not None and _aware(since) > _aware(until):
        raise InvalidQuery("from", "must not be after `to`")
    page = ledger.traces_of_user(
        tenant, user_id, since=since, until=until, limit=limit, cursor=cursor
    )
    return TracePageView(
        user_id=user_id,
        traces=[_view(record, ledger, spans) for record in page.traces],
        next_cursor=page.next_cursor,
    )


def _aware(at: datetime) -> datetime:
    return at if at.tzinfo else at.replace(tzinfo=UTC)
