"""What an export holds, two ways: the JSON lines a user downloads and uploads (one model per
`kind`), and the store's own records of one user that the `UserPortability` port reads and
restores (with the revs and versions its conditional writes need); and where an export too
large for one response was stored (`SpilledExport`).

Every line is a JSON object with a `kind`; the first is the `header`. A new kind is a new
model in the `ExportLine` union: a reader of this format skips nothing silently, it refuses a
kind it does not know.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from memwrite.entities import Entity, VersionedEntity
from memwrite.entity_facts import FactObservation
from memwrite.episode import Episode
from memwrite.memory import MemoryUnit

__all__ = [
    "EXPORT_FORMAT",
    "EntityFactLine",
    "EntityLine",
    "EpisodeLine",
    "ExportLine",
    "HeaderLine",
    "MemoryLine",
    "RestoreUnit",
    "SpilledExport",
    "StoredFactRow",
    "StoredMemory",
    "UserSnapshot",
]

EXPORT_FORMAT = "memwrite.export.v1"
_KEY = Annotated[str, Field(min_length=1, max_length=1024)]


class _Line(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class HeaderLine(_Line):
    """The first line: which format, whose data (the tenant of the credential that exported
    it; an import checks both against its own)."""

    kind: Literal["header"]
    format: Literal["memwrite.export.v1"]
    tenant: str
    user_id: str


class EntityLine(_Line):
    """One entity of the user with its aliases (resolve matches names against them)."""

    kind: Literal["entity"]
    version: int = Field(ge=1)
    entity: Entity


class EntityFactLine(_Line):
    """One entity_facts row: every observation of one (entity, predicate[, value]), from which
    conflict derives the supersession chain."""

    kind: Literal["entity_fact"]
    key: _KEY
    version: int = Field(ge=1)
    facts: dict[str, FactObservation]


class MemoryLine(_Line):
    """One memory as stored (superseded ones too: `superseded_by` and `valid_until` are the
    chain), its rev and its retrieval counters."""

    kind: Literal["memory"]
    rev: int = Field(ge=1)
    access_count: int = Field(default=0, ge=0)
    last_accessed: datetime | None = None
    memory: MemoryUnit


class EpisodeLine(_Line):
    """One kept turn of the user, the whole record as stored: the turn (its text masked by
    the firewall as it was kept, ids, session, `observed_at`, `context` = in reply to), status,
    deferred reason, the memories a backfill made of it (or its `outcome`), the backfill's
    trace and the expiry."""

    kind: Literal["episode"]
    episode: Episode


ExportLine = Annotated[
    HeaderLine | EntityLine | EntityFactLine | MemoryLine | EpisodeLine,
    Field(discriminator="kind"),
]


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
