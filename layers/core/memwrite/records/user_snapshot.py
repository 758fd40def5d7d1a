"""One user's records as the store holds them, with the revs and versions its conditional
writes need: what the `UserPortability` port reads for an export (`UserSnapshot`) and writes
back for an import (`RestoreUnit`); and where an export too large for one response was stored
(`SpilledExport`). The JSON lines a user downloads are `memwrite.portability.format`'s."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from memwrite.claims.entities import VersionedEntity
from memwrite.records.entity_facts import FactObservation
from memwrite.records.episode import Episode
from memwrite.records.memory import MemoryUnit

__all__ = ["RestoreUnit", "SpilledExport", "StoredFactRow", "StoredMemory", "UserSnapshot"]


@dataclass(frozen=True)
class StoredMemory:
    memory: MemoryUnit  # as stored: its own counters are not used (they live beside it)
    rev: int
    access_count: int = 0
    last_accessed: datetime | None = None


@dataclass(frozen=True)
class StoredFactRow:
    key: str
    facts: dict[str, FactObservation]
    version: int


@dataclass(frozen=True)
class UserSnapshot:
    """Everything of one user that an export holds, as the store holds it."""

    entities: list[VersionedEntity] = field(default_factory=list)
    fact_rows: list[StoredFactRow] = field(default_factory=list)
    memories: list[StoredMemory] = field(default_factory=list)
    episodes: list[Episode] = field(default_factory=list)


@dataclass(frozen=True)
class RestoreUnit:
    """Items written all-or-nothing by `UserPortability.restore`: every one only if absent,
    each memory with an outbox row (so stage 7 indexes it) and its counters, each episode with
    its outbox row (`episode:<turn id>`: stage 7 indexes it too)."""

    tenant: str
    user_id: str
    entities: list[VersionedEntity] = field(default_factory=list)
    fact_rows: list[StoredFactRow] = field(default_factory=list)
    memories: list[StoredMemory] = field(default_factory=list)
    episodes: list[Episode] = field(default_factory=list)

    @property
    def item_count(self) -> int:
        """Items of one DynamoDB transaction: per memory itself, its outbox row and its
        counters (when it has any); per episode itself and its outbox row."""
        counters = sum(1 for m in self.memories if m.access_count)
        return (
            len(self.entities)
            + len(self.fact_rows)
            + 2 * len(self.memories)
            + counters
            + 2 * len(self.episodes)
        )


@dataclass(frozen=True)
class SpilledExport:
    """An export stored apart: where to fetch it (a presigned URL), for how long, its size."""

    url: str
    expires_in: int  # seconds
    size: int  # bytes
