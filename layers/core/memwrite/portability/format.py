"""The export format: the JSON lines a user downloads and uploads, one model per `kind`. The
store's own records of one user, which the `UserPortability` port reads and restores, are
`memwrite.records.user_snapshot`'s.

Every line is a JSON object with a `kind`; the first is the `header`. A new kind is a new
model in the `ExportLine` union: a reader of this format skips nothing silently, it refuses a
kind it does not know.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from memwrite.claims.entities import Entity
from memwrite.records.entity_facts import FactObservation
from memwrite.records.episode import Episode
from memwrite.records.memory import MemoryUnit

__all__ = [
    "EXPORT_FORMAT",
    "EntityFactLine",
    "EntityLine",
    "EpisodeLine",
    "ExportLine",
    "HeaderLine",
    "MemoryLine",
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
    the firewall as it was kept, ids, session, `observed_at`, `context` = in reply to,
    `preceding` = the end of the turn before it), status, deferred reason, the memories a
    backfill made of it (or its `outcome`), the backfill's trace and the expiry."""

    kind: Literal["episode"]
    episode: Episode


ExportLine = Annotated[
    HeaderLine | EntityLine | EntityFactLine | MemoryLine | EpisodeLine,
    Field(discriminator="kind"),
]
