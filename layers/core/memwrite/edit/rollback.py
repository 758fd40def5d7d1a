"""Rolling back one trace (`POST /v1/traces/{trace_id}/rollback`): remove exactly the memories
it stored, give back to the memories they had ended their active state, and keep an audit
record of it.

Supersession and contradictions are *derived* from the set of observations in an entity_facts
row (`memwrite.records.entity_facts.derive`), never from arrival order; so taking the trace's
observations out of their rows and deriving again gives exactly the state the other traces would
have left without it, whoever wrote later. That makes a later supersession undoable exactly: a
newer fact of a later trace stays current, an older one this trace had ended is current again.

What cannot be undone exactly is refused (409, nothing changed):
- a merge of this trace into a memory another trace stored (`merged_into_existing`): a merge
  moves `last_seen`, `observed_at` and the extractor's confidence to a max/min, and the value
  before it is not kept;
- a memory of this trace that another trace merged into since (`later_trace_depends`): removing
  it would drop that trace's observation too;
- a trace still in progress (`in_progress`): its remaining candidates would be written after;
- a rollback needing more than `MAX_ROLLBACK_ITEMS` writes (`too_large`): one DynamoDB
  transaction holds at most 100 items, and a rollback is never split.

The store changes in one transaction (`TraceRollback.apply_rollback`) with the record and the
trace's `rollback` span, conditioned on every rev and row version read, on the record being
absent and on the trace still existing unerased (an erasure under way: 404); a lost race is
planned again from a fresh read. The removed memories' outbox rows go with them, and their
search documents are deleted right after the commit, on every call: a failure there (503) is
finished by the retry, which finds the record and deletes again (a no-op for documents
already gone); until then search never returns them, as the store has the last word.
Restored memories are re-indexed by stage 7 from the outbox rows the transaction wrote.

A `failed` trace can be rolled back although its failed turn may still be retried: the record
is what keeps the rollback whole, as persist's commit requires it absent (`SourceRolledBack`),
so a retry that comes later stores nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from memwrite.config.settings import PipelineConfig
from memwrite.decisions.fact_row import apply_state
from memwrite.errors import RollbackRefused, UnknownTrace, WriteConflict
from memwrite.models import SpanResult, StageSpan
from memwrite.ports import (
    EpisodeStore,
    MemoryIndex,
    MemoryStore,
    MetricsSink,
    SpanStore,
    TraceRecord,
    TraceRollback,
    TurnLedger,
)
from memwrite.read.traces import TraceStatus, get_trace
from memwrite.reasons import RolledBack
from memwrite.records.entity_facts import derive, memory_fact_key
from memwrite.records.episode import EpisodeStatus
from memwrite.records.store import (
    FactRow,
    OutboxOp,
    OutboxRow,
    RequestedVia,
    RollbackCommit,
    RollbackRecord,
    VersionedMemory,
)

__all__ = [
    "MAX_ROLLBACK_ATTEMPTS",
    "MAX_ROLLBACK_ITEMS",
    "STAGE",
    "RollbackDeps",
    "RollbackReads",
    "plan_rollback",
    "read_for_rollback",
    "rollback_trace",
]

STAGE = "rollback"
MAX_ROLLBACK_ITEMS = 100  # DynamoDB's TransactWriteItems limit; the same on both backends
MAX_ROLLBACK_ATTEMPTS = 5
UNKNOWN_TRACE = "unknown"  # a corroborating turn the ledger no longer knows (erased, expired)


@dataclass(frozen=True)
class RollbackReads:
    """What a rollback plan is made from: the trace, what it wrote, and the store around it."""

    trace: TraceRecord
    written: list[tuple[str, str]]  # (memory id, stored | merged), the trace's ledger rows
    memories: dict[str, VersionedMemory]  # the trace's memories and every other of their rows
    rows: dict[str, FactRow]  # the entity_facts rows of the trace's keyed memories
    turn_traces: dict[str, str]  # corroborating turn of another request -> its trace


def _refuse_merges(reads: RollbackReads, stored: set[str]) -> None:
    merged = {mid for mid, outcome in reads.written if outcome == "merged"} - stored
    blocking = sorted(mid for mid in merged if mid in reads.memories)
    if blocking:
        raise RollbackRefused(
            "merged_into_existing",
            f"trace {reads.trace.trace_id} merged into {len(blocking)} memories other traces "
            "stored; a merge cannot be undone exactly",
            memory_ids=blocking,
        )


def _refuse_later_merges(reads: RollbackReads, own: list[VersionedMemory]) -> None:
    trace_id = reads.trace.trace_id
    own_turns = set(reads.trace.turn_ids)
    later: dict[str, set[str]] = {}
    for versioned in own:
        for turn in versioned.memory.corroborated_by:
            source = reads.turn_traces.get(turn, UNKNOWN_TRACE)
            if turn not in own_turns and source != trace_id:
                later.setdefault(source, set()).add(versioned.memory.memory_id)
    if later:
        raise RollbackRefused(
            "later_trace_depends",
            f"traces {', '.join(sorted(later))} merged into memories of trace {trace_id}; "
            "roll those back first",
            memory_ids=sorted(set().union(*later.values())),
            trace_ids=sorted(later),
        )


def plan_rollback(
    reads: RollbackReads,
    config: PipelineConfig,
    now: datetime,
    requested_via: RequestedVia,
) -> RollbackCommit:
    """The one commit that undoes the trace exactly; raises `RollbackRefused` when none can."""
    trace = reads.trace
    stored = {mid for mid, outcome in reads.written if outcome == "stored"}
    _refuse_merges(reads, stored)
    # A memory id is content-addressed: one the trace stored may since have been erased and
    # stored again by another trace. Only the trace's own writes are its to remove.
    own = [
        reads.memories[mid]
        for mid in sorted(stored)
        if mid in reads.memories and reads.memories[mid].memory.trace_id == trace.trace_id
    ]
    _refuse_later_merges(reads, own)
    removed = {versioned.memory.memory_id for versioned in own}
    stateful_of_row = {
        key: versioned.memory.predicate_is_stateful
        for versioned in own
        if (key := memory_fact_key(versioned.memory)) is not None and key in reads.rows
    }
    fact_rows: dict[str, FactRow] = {}
    changed: list[tuple[VersionedMemory, VersionedMemory]] = []  # (before, after)
    for key in sorted(stateful_of_row):
        row = reads.rows[key]
        facts = {mid: fact for mid, fact in row.facts.items() if mid not in removed}
        fact_rows[key] = FactRow(facts=facts, version=row.version)
        state = derive(facts, stateful=stateful_of_row[key])
        for mid in sorted(facts):
            before = reads.memories.get(mid)
            if before is None:
                continue
            after = apply_state(before.memory, state, config)
            if after != before.memory:
                changed.append((before, VersionedMemory(after, before.rev)))
    restored = [
        after.memory.memory_id
        for before, after in changed
        if not before.memory.active and after.memory.active
    ]
    record = RollbackRecord(
        trace_id=trace.trace_id,
        tenant=trace.tenant,
        user_id=trace.user_id,
        rolled_back_at=now,
        requested_via=requested_via,
        removed=sorted(removed),
        restored=restored,
        updated=[a.memory.memory_id for _, a in changed if a.memory.memory_id not in restored],
    )
    commit = RollbackCommit(
        tenant=trace.tenant,
        user_id=trace.user_id,
        removed=own,
        changed=[(after.memory, after.rev) for _, after in changed],
        fact_rows=fact_rows,
        outbox=[
            OutboxRow(
                after.memory.memory_id,
                OutboxOp.UPSERT if after.memory.active else OutboxOp.DELETE,
                trace.trace_id,
            )
            for _, after in changed
        ],
        record=record,
        span=_span_of(record),
    )
    if commit.item_count > MAX_ROLLBACK_ITEMS:
        raise RollbackRefused(
            "too_large",
            f"rolling back trace {trace.trace_id} takes {commit.item_count} writes; one "
            f"transaction holds at most {MAX_ROLLBACK_ITEMS}",
            memory_ids=sorted(removed),
        )
    return commit


@dataclass
class RollbackDeps:
    ledger: TurnLedger
    spans: SpanStore  # read for the trace's status; the rollback's span goes with its commit
    store: MemoryStore
    rollbacks: TraceRollback
    index: MemoryIndex
    metrics: MetricsSink
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    episodes: EpisodeStore | None = None


def _reopen_episodes(tenant: str, trace_id: str, deps: RollbackDeps) -> None:
    """A backfill's rollback returns its episodes to `pending` (idempotent)."""
    trace = deps.ledger.get_trace(tenant, trace_id)
    if deps.episodes is None or trace is None:
        return
    kept = deps.episodes.get_episodes(tenant, trace.user_id, trace.turn_ids)
    reopened = [
        episode.model_copy(
            update={
                "status": EpisodeStatus.PENDING,
                "memory_ids": [],
                "outcome": None,
                "backfill_trace_id": None,
            }
        )
        for episode in kept.values()
        if episode.backfill_trace_id == trace_id
    ]
    if reopened:
        deps.episodes.update_episodes(reopened)


def read_for_rollback(tenant: str, trace: TraceRecord, deps: RollbackDeps) -> RollbackReads:
    written = deps.ledger.memories_of_trace(tenant, trace.trace_id)
    user_id = trace.user_id
    memories = deps.store.get_memories(tenant, user_id, [mid for mid, _ in written])
    rows: dict[str, FactRow] = {}
    for versioned in memories.values():
        key = memory_fact_key(versioned.memory)
        if key is not None and key not in rows:
            rows[key] = deps.store.get_fact_row(tenant, user_id, key)
    neighbours = {mid for row in rows.values() for mid in row.facts} - set(memories)
    memories = {**memories, **deps.store.get_memories(tenant, user_id, sorted(neighbours))}
    foreign_turns = {
        turn for versioned in memories.values() for turn in versioned.memory.corroborated_by
    } - set(trace.turn_ids)
    return RollbackReads(
        trace=trace,
        written=written,
        memories=memories,
        rows=rows,
        turn_traces=deps.rollbacks.traces_of_turns(tenant, sorted(foreign_turns)),
    )


def _span_of(record: RollbackRecord) -> StageSpan:
    """The trace's span of stage `rollback`, written with the record (latency: set when known)."""
    return StageSpan(
        trace_id=record.trace_id,
        tenant=record.tenant,
        user_id=record.user_id,
        stage=STAGE,
        item_id=record.trace_id,
        result=SpanResult.TRANSFORM,
        reason=RolledBack(removed=len(record.removed), restored=len(record.restored)),
        latency_ms=0.0,
        at=record.rolled_back_at,
    )


def _remove_documents(record: RollbackRecord, deps: RollbackDeps) -> None:
    """After the commit, on every call: idempotent, so a retry completes it."""
    for memory_id in record.removed:
        deps.index.delete(record.tenant, record.user_id, memory_id)


def rollback_trace(
    tenant: str,
    trace_id: str,
    config: PipelineConfig,
    deps: RollbackDeps,
    *,
    requested_via: RequestedVia,
) -> RollbackRecord:
    """Roll the trace back once; a repeat returns the first call's record and changes nothing.

    Raises `UnknownTrace` (none for this tenant) and `RollbackRefused` (see the module)."""
    started = time.perf_counter()
    for attempt in range(1, MAX_ROLLBACK_ATTEMPTS + 1):
        record = deps.rollbacks.rollback_of(tenant, trace_id)
        if record is not None:
            _remove_documents(record, deps)
            _reopen_episodes(tenant, trace_id, deps)
            return record
        trace = deps.ledger.get_trace(tenant, trace_id)
        view = get_trace(tenant, trace_id, deps.ledger, deps.spans)
        if trace is None or view is None:
            raise UnknownTrace(trace_id)
        if view.status is TraceStatus.IN_PROGRESS:
            raise RollbackRefused(
                "in_progress", f"trace {trace_id} is still in progress; roll it back once done"
            )
        commit = plan_rollback(
            read_for_rollback(tenant, trace, deps), config, deps.clock(), requested_via
        )
        latency_ms = round((time.perf_counter() - started) * 1000, 3)
        commit.span = commit.span.model_copy(update={"latency_ms": latency_ms})
        try:
            deps.rollbacks.apply_rollback(commit)
        except WriteConflict:
            if attempt == MAX_ROLLBACK_ATTEMPTS:
                raise
            continue  # someone wrote in between (or rolled it back first): read again
        deps.metrics.count(STAGE, commit.span.result.value, commit.span.reason)
        deps.metrics.timing(STAGE, latency_ms)
        _remove_documents(commit.record, deps)
        _reopen_episodes(tenant, trace_id, deps)
        return commit.record
    raise AssertionError("unreachable: the loop returns or raises")
