"""The stored memory (MemoryUnit), its links, and its content-addressed id."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from memwrite.claims.candidate import Candidate, MemoryType, Tier
from memwrite.ids import content_hash

__all__ = [
    "DIRECT_SOURCE",
    "EXPIRED_RETENTION",
    "EXPIRED_RETENTION_DAYS",
    "KEYED_TYPES",
    "MemoryLink",
    "MemoryUnit",
    "expiry_announced_on_write",
    "memory_id_for",
    "normalise",
]

# How long a memory past its user expiry stays in history before the store's TTL deletes it.
EXPIRED_RETENTION_DAYS = 30
EXPIRED_RETENTION = timedelta(days=EXPIRED_RETENTION_DAYS)
# Types whose identity is the (entity, predicate, value) triple; events and tasks are keyed by
# their text (docs/design.md §9, memory types).
KEYED_TYPES = frozenset(
    {MemoryType.FACT, MemoryType.PREFERENCE, MemoryType.INSTRUCTION, MemoryType.DECISION}
)

# The source of memories a caller writes itself (`POST /v1/users/{user_id}/memories`): they
# replace pinned memories, which inferred ones do only as the user's explicit corrections.
DIRECT_SOURCE = "direct"


class MemoryLink(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: Literal["contradicts"]
    memory_id: str


def normalise(text: str) -> str:
    return " ".join(text.lower().split())


def memory_id_for(tenant: str, user_id: str, candidate: Candidate, entity_id: str) -> str:
    """Same memory twice -> one id: keyed types by their triple, the others by their text."""
    identity: tuple[str, ...] = (normalise(candidate.text),)
    if candidate.type in KEYED_TYPES:
        identity = (candidate.attribute, normalise(candidate.value), str(candidate.negated))
    return content_hash("memory", tenant, user_id, candidate.type.value, entity_id, *identity)


class MemoryUnit(BaseModel):
    """One memory as stored (the memories table) and returned by `memwrite ingest`."""

    memory_id: str
    tenant: str
    user_id: str
    text: str
    type: MemoryType
    topic: str
    importance: float
    confidence: float = Field(description="Final confidence after scoring.")
    extractor_confidence: float
    tier: Tier
    source: str
    source_session: str
    trace_id: str
    turn_id: str
    created_at: datetime
    observed_at: datetime = Field(description="When the user first said it.")
    last_seen: datetime = Field(description="The latest observation (merges move it).")
    valid_at: datetime | None = None
    valid_until: datetime | None = None
    superseded_by: str | None = None
    corroboration: int = 1
    corroborated_by: list[str] = Field(
        default_factory=list, description="Turn ids that observed it (idempotent merges)."
    )
    access_count: int = 0
    last_accessed: datetime | None = None
    entity: str
    entity_id: str
    attribute: str
    value: str
    predicate_is_stateful: bool
    negated: bool = False
    links: list[MemoryLink] = Field(default_factory=list)
    search_questions: list[str] = Field(default_factory=list)
    expires_at: int | None = Field(
        default=None, description="Epoch seconds: the store's TTL (tasks; user expiries)."
    )
    pinned: bool = Field(
        default=False, description="Only a direct write or an explicit correction replaces it."
    )
    expires_on: datetime | None = Field(
        default=None, description="The user's expiry (the API's `expires_at`)."
    )
    expiry_announced: bool = Field(
        default=False,
        description="`expires_on` has passed and a revision of this memory said so on the "
        "change feed (`memory.expired`); reset when the expiry moves.",
    )

    @property
    def active(self) -> bool:
        return self.superseded_by is None and not self.negated

    def expired(self, now: datetime) -> bool:
        """Past the user's expiry: out of search and the memory list, kept in history."""
        return self.expires_on is not None and self.expires_on <= now

    @property
    def expiry_due(self) -> datetime | None:
        """When the expiry sweep (`memwrite.expiry`) must announce this memory's expiry: its
        user expiry while it is active and not yet announced (an ended memory's feed already
        said `memory.superseded`); None: nothing to announce."""
        if self.expiry_announced or not self.active:
            return None
        return self.expires_on


def expiry_announced_on_write(
    current: MemoryUnit | None, expires_on: datetime | None, now: datetime
) -> bool:
    """`expiry_announced` for a write giving a memory (`current`, None: new) `expires_on`: the
    same expiry keeps its flag; an expiry already passed is announced by this write's own
    outbox row, a later one by the sweep once it passes."""
    if current is not None and current.expires_on == expires_on:
        return current.expiry_announced
    return expires_on is not None and expires_on <= now
