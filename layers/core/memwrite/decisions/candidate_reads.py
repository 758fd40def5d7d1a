"""One read of what a candidate touches in the store: its own id, its entity_facts row and
every memory of that row. Dedupe decides on it; persist reads it again to commit."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memwrite.ports import MemoryStore
from memwrite.records.store import FactRow, StoreItem, VersionedMemory

__all__ = ["CandidateReads", "read_candidate"]


@dataclass(frozen=True)
class CandidateReads:
    """One consistent read of what a candidate touches: its own id, its entity_facts row and
    every memory of that row that exists."""

    row: FactRow
    memories: dict[str, VersionedMemory]


def read_candidate(store: MemoryStore, item: StoreItem, also: Sequence[str] = ()) -> CandidateReads:
    """Read the candidate's row and memories (and `also`, e.g. a merge target outside it)."""
    fact_key = item.fact_key
    row = FactRow() if fact_key is None else store.get_fact_row(item.tenant, item.user_id, fact_key)
    ids = [item.memory_id, *row.facts, *also]
    return CandidateReads(row=row, memories=store.get_memories(item.tenant, item.user_id, ids))
