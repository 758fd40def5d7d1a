"""The memory store port: what persist reads, and the one atomic commit it writes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from memwrite.facts import FactObservation
from memwrite.memory import MemoryUnit

__all__ = [
    "Commit",
    "FactRow",
    "LedgerEntry",
    "MemoryStore",
    "OutboxOp",
    "OutboxRow",
    "VersionedMemory",
]


@dataclass(frozen=True)
class VersionedMemory:
    memory: MemoryUnit
    rev: int  # bumps on every write; a commit names the rev it read


@dataclass(frozen=True)
class FactRow:
    """One (entity, predicate)'s observations, and the version a commit must still find."""

    facts: dict[str, FactObservation] = field(default_factory=dict)
    version: int = 0  # 0: the row does not exist yet


class OutboxOp(StrEnum):
    UPSERT = "upsert"  # (re)index the memory
    DELETE = "delete"  # remove it from the index (superseded)


@dataclass(frozen=True)
class OutboxRow:
    """One change for the indexer; it carries the memory as committed (same rev)."""

    memory_id: str
    op: OutboxOp


@dataclass(frozen=True)
class LedgerEntry:
    trace_id: str
    memory_id: str
    outcome: str  # stored | merged


@dataclass
class Commit:
    """Everything one candidate changes, written all-or-nothing.

    `memories` are whole-item puts conditioned on the rev that was read (None: must not exist);
    `fact_row` is conditioned on its version. Any failed condition cancels every item.
    """

    tenant: str
    user_id: str
    memories: list[tuple[MemoryUnit, int | None]] = field(default_factory=list)
    fact_key: str | None = None
    fact_row: FactRow | None = None  # the new row; its version is the one read
    ledger: list[LedgerEntry] = field(default_factory=list)
    outbox: list[OutboxRow] = field(default_factory=list)


class MemoryStore(Protocol):
    def get_memories(
        self, tenant: str, user_id: str, ids: Sequence[str]
    ) -> dict[str, VersionedMemory]: ...

    def get_fact_row(self, tenant: str, user_id: str, key: str) -> FactRow: ...

    def pending_memories(self, tenant: str, user_id: str, limit: int) -> list[MemoryUnit]:
        """Memories changed but not yet indexed (the outbox's pending rows), newest first."""

    def commit(self, commit: Commit) -> None:
        """Apply atomically; raise `WriteConflict` when a condition no longer holds."""

    def memories_of(self, tenant: str, user_id: str) -> list[MemoryUnit]: ...
