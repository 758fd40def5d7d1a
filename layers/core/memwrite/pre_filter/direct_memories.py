"""Queue a request's direct memories: one queued "turn" per memory, in a trace of its own.

The same order as `POST /v1/turns` (the trace before any message, the ledger after SQS took
them), and the same identity: each memory's turn id is content-addressed from the memory as
written, so the same write twice (or a retry under one `Idempotency-Key`) is one write. The
firewall refuses a memory that holds a secret (400 naming the field): nothing of the request
is written then.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memwrite.config.settings import PipelineConfig
from memwrite.direct_memories.model import (
    DIRECT_SESSION,
    DirectMemoriesRequest,
    DirectWriteAccepted,
)
from memwrite.errors import InvalidQuery, QueueUnavailable
from memwrite.ids import new_trace_id, trace_id_for_key, turn_id
from memwrite.models import QueuedTurn, Role, Source, SpanResult, TraceInput
from memwrite.ports import TraceRecord
from memwrite.pre_filter.checks import STAGE, mask_secrets
from memwrite.pre_filter.stage import IngestDeps
from memwrite.reasons import DuplicateTurn
from memwrite.records.memory import DIRECT_SOURCE
from memwrite.spans import make_span

__all__ = ["write_direct"]


def _refuse_what_no_memory_may_hold(
    request: DirectMemoriesRequest, now: datetime, max_skew_secs: int
) -> None:
    latest = now + timedelta(seconds=max_skew_secs)
    for index, memory in enumerate(request.memories):
        for name in ("value", "text"):
            said = getattr(memory, name)
            if said is not None and mask_secrets(said) != said:
                raise InvalidQuery(f"memories[{index}].{name}", "holds a secret the firewall masks")
        if memory.observed_at is not None and memory.observed_at > latest:
            raise InvalidQuery(f"memories[{index}].observed_at", "is in the future")


def write_direct(
    tenant: str,
    user_id: str,
    request: DirectMemoriesRequest,
    *,
    config: PipelineConfig,
    deps: IngestDeps,
    idempotency_key: str | None = None,
) -> DirectWriteAccepted:
    """Queue the memories for resolve, dedupe, conflict, persist and indexing (no extraction
    call); raises `QueueUnavailable` when some could not be queued (the caller retries)."""
    now = datetime.fromtimestamp(deps.clock(), tz=UTC)
    _refuse_what_no_memory_may_hold(request, now, config.ingest.max_clock_skew_secs)
    trace_id = trace_id_for_key(tenant, idempotency_key) if idempotency_key else new_trace_id()
    turns = {
        turn_id(
            tenant,
            user_id,
            DIRECT_SESSION,
            Role.USER.value,
            memory.model_dump_json(),
            timestamp=memory.observed_at,
        ): memory
        for memory in request.memories
    }
    trace = TraceRecord(
        trace_id=trace_id,
        tenant=tenant,
        user_id=user_id,
        session_id=DIRECT_SESSION,
        agent_id=None,
        source=DIRECT_SOURCE,
        created_at=now.isoformat(),
        turn_ids=tuple(turns),
    )
    existing = deps.ledger.get_trace(tenant, trace_id) if idempotency_key else None
    if existing is None:
        inputs = [
            TraceInput(role=Role.USER, content=memory.sentence, timestamp=memory.observed_at)
            for memory in turns.values()
        ]
        deps.ledger.put_trace(trace, inputs)
    known = deps.ledger.already_enqueued(tenant, tuple(turns))
    to_send = [
        QueuedTurn(
            tenant=tenant,
            user_id=user_id,
            session_id=DIRECT_SESSION,
            agent_id=None,
            trace_id=trace_id,
            turn_id=tid,
            role=Role.USER,
            text=memory.sentence,
            observed_at=memory.observed_at or now,
            source=Source.USER_EXPLICIT,
            direct=memory,
        )
        for tid, memory in turns.items()
        if tid not in known
    ]
    outcome = deps.queue.enqueue(to_send) if to_send else None
    sent = sorted(outcome.sent) if outcome else []
    raced = deps.ledger.record_enqueued(tenant, trace_id, sent) if sent else set()
    if existing is None:
        deps.spans.put_spans(
            [
                make_span(
                    trace_id=trace_id,
                    tenant=tenant,
                    user_id=user_id,
                    stage=STAGE,
                    item_id=tid,
                    result=SpanResult.REJECT if tid in known | raced else SpanResult.PASS,
                    reason=DuplicateTurn() if tid in known | raced else None,
                    kind="turn",
                )
                for tid in turns
            ]
        )
    if outcome is not None and outcome.failed:
        raise QueueUnavailable(f"{len(outcome.failed)} memories could not be queued")
    return DirectWriteAccepted(trace_id=trace_id)
