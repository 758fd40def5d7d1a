"""Deleting one memory (`DELETE /v1/memories/{memory_id}`): remove it from the store and the
index, announce it on the change feed (`memory.deleted`) and leave a span on its trace.

**What it had superseded comes back.** Supersession and contradictions are derived from the
set of observations in the memory's entity_facts row (`memwrite.records.entity_facts.derive`), never
kept as a decision of their own. The deletion takes the memory's observation out of its row and
derives the row again, so the store is what it would be had that memory never been observed:
an older value it had ended is current again (`restored`), a contradiction it was half of is
lifted (`updated`). That is also the only state a later write of the same predicate would
leave, since it derives the row from what is in it. To forget the older value too, delete it as
well. Rollback (`memwrite.edit.rollback`) derives the same way.

Unlike a rollback, a deletion removes the memory whoever stored or merged into it: the request
is for that memory, not for a request's writes, so there is nothing to refuse. The turns stay in
the ledger: re-sending the same turns stores nothing again; a new observation stores it anew.

One commit (`MemoryDeletion.apply_deletion`), conditioned on the revs and the row version read:
the memory and its counter and outbox rows go, the re-derived memories are written with their
outbox rows, the deletion's own outbox row (stage 7 deletes the document and sends
`memory.deleted`) and the span of stage `delete` on the trace that stored the memory. A lost
race reads again (bounded attempts). The document is also deleted right after the commit, a
clean-up only: search already never returns it (a hit is read back from the store, which has
the last word), and stage 7 deletes it from the deletion's row. So an index that is down then
is logged, not answered as a failure: the deletion is done, and a retry would find nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from memwrite.config.settings import PipelineConfig
from memwrite.decisions.fact_row import apply_state
from memwrite.edit.ports import MemoryDeletion
from memwrite.errors import IndexUnavailable, UnknownMemory, WriteConflict
from memwrite.models import SpanResult, StageSpan
from memwrite.ports import MemoryIndex, MemoryReader, MemoryStore, MetricsSink
from memwrite.reasons import MemoryDeleted
from memwrite.records.change_events import deletion_row_id
from memwrite.records.entity_facts import derive, memory_fact_key
from memwrite.records.store import (
    DeletionCommit,
    DeletionRecord,
    FactRow,
    OutboxOp,
    OutboxRow,
    VersionedMemory,
)

__all__ = ["MAX_DELETE_ATTEMPTS", "STAGE", "DeleteDeps", "delete_memory", "plan_deletion"]

logger = logging.getLogger(__name__)

STAGE = "delete"
MAX_DELETE_ATTEMPTS = 5


@dataclass
class DeleteDeps:
    store: MemoryStore
    reader: MemoryReader
    deletions: MemoryDeletion
    index: MemoryIndex
    metrics: MetricsSink
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))


def plan_deletion(
    versioned: VersionedMemory,
    row: FactRow | None,
    neighbours: dict[str, VersionedMemory],
    config: PipelineConfig,
    now: datetime,
) -> DeletionCommit:
    """The one commit deleting the memory: its row without it, derived again.

    `row` is the memory's entity_facts row (None: an event or a task, no row) and
    `neighbours` the other memories of that row as read."""
    memory = versioned.memory
    fact_key = memory_fact_key(memory)
    new_row: FactRow | None = None
    changed: list[tuple[VersionedMemory, VersionedMemory]] = []  # (before, after)
    if fact_key is not None and row is not None:
        facts = {mid: fact for mid, fact in row.facts.items() if mid != memory.memory_id}
        new_row = FactRow(facts=facts, version=row.version)
        state = derive(facts, stateful=memory.predicate_is_stateful)
        for mid in sorted(facts):
            before = neighbours.get(mid)
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
    record = DeletionRecord(
        memory_id=memory.memory_id,
        user_id=memory.user_id,
        trace_id=memory.trace_id,
        deleted_at=now,
        restored=restored,
        updated=[a.memory.memory_id for _, a in changed if a.memory.memory_id not in restored],
    )
    return DeletionCommit(
        tenant=memory.tenant,
        user_id=memory.user_id,
        removed=versioned,
        changed=[(after.memory, after.rev) for _, after in changed],
        fact_key=fact_key if new_row is not None else None,
        fact_row=new_row,
        outbox=[
            OutboxRow(
                after.memory.memory_id,
                OutboxOp.UPSERT if after.memory.active else OutboxOp.DELETE,
                after.memory.trace_id,
            )
            for _, after in changed
        ],
        announcement=OutboxRow(
            deletion_row_id(memory.memory_id, now), OutboxOp.DELETE, memory.trace_id
        ),
        record=record,
        span=StageSpan(
            trace_id=memory.trace_id,
            tenant=memory.tenant,
            user_id=memory.user_id,
            stage=STAGE,
            item_id=memory.memory_id,
            result=SpanResult.TRANSFORM,
            reason=MemoryDeleted(memory_id=memory.memory_id, restored=len(restored)),
            latency_ms=0.0,
            at=now,
        ),
    )


def _read(
    tenant: str, memory_id: str, deps: DeleteDeps
) -> tuple[VersionedMemory, FactRow | None, dict[str, VersionedMemory]]:
    found = deps.reader.memory_by_id(tenant, memory_id)
    if found is None:
        raise UnknownMemory(memory_id)
    user_id = found.user_id
    versioned = deps.store.get_memories(tenant, user_id, [memory_id]).get(memory_id)
    if versioned is None:
        raise UnknownMemory(memory_id)
    fact_key = memory_fact_key(versioned.memory)
    if fact_key is None:
        return versioned, None, {}
    row = deps.store.get_fact_row(tenant, user_id, fact_key)
    others = sorted(mid for mid in row.facts if mid != memory_id)
    return versioned, row, deps.store.get_memories(tenant, user_id, others)


def delete_memory(
    tenant: str, memory_id: str, config: PipelineConfig, deps: DeleteDeps
) -> DeletionRecord:
    """Delete one of the tenant's memories; raises `UnknownMemory` for an id it does not have
    (another tenant's, or one deleted already)."""
    started = time.perf_counter()
    for attempt in range(1, MAX_DELETE_ATTEMPTS + 1):
        versioned, row, neighbours = _read(tenant, memory_id, deps)
        commit = plan_deletion(versioned, row, neighbours, config, deps.clock())
        latency_ms = round((time.perf_counter() - started) * 1000, 3)
        commit.span = commit.span.model_copy(update={"latency_ms": latency_ms})
        try:
            deps.deletions.apply_deletion(commit)
        except WriteConflict:
            if attempt == MAX_DELETE_ATTEMPTS:
                raise
            continue  # someone wrote in between (or deleted it first): read again
        deps.metrics.count(STAGE, commit.span.result.value, commit.span.reason)
        deps.metrics.timing(STAGE, latency_ms)
        try:
            deps.index.delete(tenant, commit.user_id, memory_id)
        except IndexUnavailable:
            logger.warning("index unavailable; stage 7 deletes the document from the outbox")
        return commit.record
    raise AssertionError("unreachable: the loop returns or raises")
