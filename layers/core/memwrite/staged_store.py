"""A read-through overlay on a `MemoryStore`: commits land in memory, reads see them first.

The dedupe and conflict stages decide without writing; planning a batch's candidates one after
another against this overlay lets each decision see the ones before it (two near-identical
candidates in one batch: the second is a duplicate of the first), exactly as the persist stage
will find them when it commits for real.
"""

from __future__ import annotations

from collections.abc import Sequence

from memwrite.memory import MemoryUnit
from memwrite.store import Commit, FactRow, MemoryStore, OutboxOp, VersionedMemory

__all__ = ["StagedStore"]


class StagedStore:
    def __init__(self, store: MemoryStore) -> None:
        self._store = store
        self._memories: dict[tuple[str, str, str], VersionedMemory] = {}
        self._rows: dict[tuple[str, str, str], FactRow] = {}
        self._pending: dict[tuple[str, str], dict[str, MemoryUnit]] = {}

    def get_memories(
        self, tenant: str, user_id: str, ids: Sequence[str]
    ) -> dict[str, VersionedMemory]:
        staged = {
            i: self._memories[(tenant, user_id, i)]
            for i in ids
            if (tenant, user_id, i) in self._memories
        }
        missing = [i for i in ids if i not in staged]
        return (
            {**self._store.get_memories(tenant, user_id, missing), **staged} if missing else staged
        )

    def get_fact_row(self, tenant: str, user_id: str, key: str) -> FactRow:
        staged = self._rows.get((tenant, user_id, key))
        return staged if staged is not None else self._store.get_fact_row(tenant, user_id, key)

    def pending_memories(self, tenant: str, user_id: str, limit: int) -> list[MemoryUnit]:
        staged = list(self._pending.get((tenant, user_id), {}).values())
        stored = self._store.pending_memories(tenant, user_id, limit)
        seen = {m.memory_id for m in staged}
        return (staged + [m for m in stored if m.memory_id not in seen])[:limit]

    def commit(self, commit: Commit) -> None:
        for memory, expected in commit.memories:
            key = (commit.tenant, commit.user_id, memory.memory_id)
            self._memories[key] = VersionedMemory(memory, (expected or 0) + 1)
        if commit.fact_key is not None and commit.fact_row is not None:
            row = commit.fact_row
            self._rows[(commit.tenant, commit.user_id, commit.fact_key)] = FactRow(
                facts=dict(row.facts), version=row.version + 1
            )
        pending = self._pending.setdefault((commit.tenant, commit.user_id), {})
        by_id = {memory.memory_id: memory for memory, _ in commit.memories}
        for row_out in commit.outbox:
            if row_out.op is OutboxOp.UPSERT:
                pending[row_out.memory_id] = by_id[row_out.memory_id]

    def memories_of(self, tenant: str, user_id: str) -> list[MemoryUnit]:
        stored = {m.memory_id: m for m in self._store.memories_of(tenant, user_id)}
        for (t, u, memory_id), versioned in self._memories.items():
            if (t, u) == (tenant, user_id):
                stored[memory_id] = versioned.memory
        return list(stored.values())
