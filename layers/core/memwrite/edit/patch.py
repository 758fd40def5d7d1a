"""`PATCH /v1/memories/{memory_id}`: pin a memory, or give it an expiry.

A pin lives in two places written together: the memory (`pinned`, what the API shows) and its
observation in the entity_facts row (what `memwrite.records.entity_facts.derive` reads, so a pinned
memory is never ended by an inferred fact, whatever the order things arrive in). Pinning or
unpinning re-derives the row, so unpinning lets a newer challenger take over at once, as it
would have had the memory never been pinned.

An expiry (`expires_at` in the API, `expires_on` inside) takes the memory out of search and the
memory list once it has passed; it stays readable by id (history) until the store's TTL,
`EXPIRED_RETENTION_DAYS` later, deletes it. Clearing the expiry restores the TTL the memory had
(a task's own; none for the others). An expiry already passed is announced by the patch's own
outbox row (`memory.expired`); a later one by the expiry sweep (`memwrite.expiry`) once it
passes.

One commit per patch, conditioned on the revs and the row version that were read; a lost race
reads again (bounded attempts). The commit carries an outbox row per changed memory, so the
index and the change feed see the patch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    field_validator,
    model_validator,
)

from memwrite.claims.candidate import MemoryType
from memwrite.config.settings import PipelineConfig
from memwrite.decisions.fact_row import apply_state
from memwrite.errors import UnknownMemory, WriteConflict
from memwrite.ports import MemoryReader, MemoryStore
from memwrite.records.entity_facts import derive, memory_fact_key
from memwrite.records.memory import EXPIRED_RETENTION, MemoryUnit, expiry_announced_on_write
from memwrite.records.store import Commit, FactRow, OutboxOp, OutboxRow

__all__ = [
    "MAX_PATCH_ATTEMPTS",
    "MemoryPatch",
    "PatchDeps",
    "patch_memory",
]

MAX_PATCH_ATTEMPTS = 5


class MemoryPatch(BaseModel):
    """The body of `PATCH /v1/memories/{memory_id}`: at least one of the two fields."""

    model_config = ConfigDict(extra="forbid")

    pinned: StrictBool = Field(
        default=False,
        description="True: only a direct write or an explicit correction replaces the memory; "
        "an inferred one is kept beside it as challenged.",
    )
    expires_at: datetime | None = Field(
        default=None,
        description="ISO 8601 (naive: UTC). After it the memory leaves search and the memory "
        "list (it stays readable by id); null removes the expiry.",
    )

    @field_validator("expires_at")
    @classmethod
    def _as_utc(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value

    @model_validator(mode="after")
    def _not_empty(self) -> MemoryPatch:
        if not self.model_fields_set:
            raise ValueError("give pinned, expires_at or both")
        return self


@dataclass
class PatchDeps:
    store: MemoryStore
    reader: MemoryReader
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))


def _ttl(memory: MemoryUnit, expires_on: datetime | None, config: PipelineConfig) -> int | None:
    if expires_on is not None:
        return int((expires_on + EXPIRED_RETENTION).timestamp())
    if memory.type is MemoryType.TASK:
        return int((memory.observed_at + timedelta(days=config.scoring.task_ttl_days)).timestamp())
    return None


def _patched(
    memory: MemoryUnit, patch: MemoryPatch, config: PipelineConfig, now: datetime
) -> MemoryUnit:
    update: dict[str, object] = {}
    if "pinned" in patch.model_fields_set:
        update["pinned"] = patch.pinned
    if "expires_at" in patch.model_fields_set:
        update["expires_on"] = patch.expires_at
        update["expires_at"] = _ttl(memory, patch.expires_at, config)
        update["expiry_announced"] = expiry_announced_on_write(memory, patch.expires_at, now)
    return memory.model_copy(update=update)


def _commit(
    tenant: str, memory: MemoryUnit, rev: int, config: PipelineConfig, store: MemoryStore
) -> Commit:
    """The patched memory and, when its pin changed, its row re-derived."""
    changed: list[tuple[MemoryUnit, int | None]] = [(memory, rev)]
    fact_key = memory_fact_key(memory)
    row = None
    if fact_key is not None:
        read = store.get_fact_row(tenant, memory.user_id, fact_key)
        observation = read.facts.get(memory.memory_id)
        if observation is not None and observation.pinned != memory.pinned:
            facts = {
                **read.facts,
                memory.memory_id: observation.model_copy(update={"pinned": memory.pinned}),
            }
            row = FactRow(facts=facts, version=read.version)
            state = derive(facts, stateful=memory.predicate_is_stateful)
            others = store.get_memories(tenant, memory.user_id, list(facts))
            changed = [(apply_state(memory, state, config), rev)]
            for mid in sorted(others):
                if mid == memory.memory_id:
                    continue
                before = others[mid]
                after = apply_state(before.memory, state, config)
                if after != before.memory:
                    changed.append((after, before.rev))
    return Commit(
        tenant=tenant,
        user_id=memory.user_id,
        trace_id=memory.trace_id,
        memories=changed,
        fact_key=fact_key if row is not None else None,
        fact_row=row,
        outbox=[
            OutboxRow(m.memory_id, OutboxOp.UPSERT if m.active else OutboxOp.DELETE, m.trace_id)
            for m, _ in changed
        ],
        from_trace=False,
    )


def patch_memory(
    tenant: str, memory_id: str, patch: MemoryPatch, config: PipelineConfig, deps: PatchDeps
) -> MemoryUnit:
    """Apply `patch` to one of the tenant's memories; the memory as stored after it."""
    for attempt in range(1, MAX_PATCH_ATTEMPTS + 1):
        found = deps.reader.memory_by_id(tenant, memory_id)
        if found is None:
            raise UnknownMemory(memory_id)
        versioned = deps.store.get_memories(tenant, found.user_id, [memory_id]).get(memory_id)
        if versioned is None:
            raise UnknownMemory(memory_id)
        patched = _patched(versioned.memory, patch, config, deps.clock())
        commit = _commit(tenant, patched, versioned.rev, config, deps.store)
        try:
            deps.store.commit(commit)
        except WriteConflict:
            if attempt == MAX_PATCH_ATTEMPTS:
                raise
            continue
        written = commit.memories[0][0]
        return written.model_copy(
            update={"access_count": found.access_count, "last_accessed": found.last_accessed}
        )
    raise AssertionError("unreachable: the loop returns or raises")
