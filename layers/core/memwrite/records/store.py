"""The memory store's records: what dedupe, conflict and persist read, the one atomic commit
persist writes, the one a trace's rollback writes and the one a memory's deletion writes."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict

from memwrite.claims.candidate import Candidate
from memwrite.models import StageSpan
from memwrite.payloads import ItemsPayload, PipelineItem
from memwrite.records.entity_facts import FactObservation, fact_key_for
from memwrite.records.memory import KEYED_TYPES, MemoryUnit, memory_id_for

__all__ = [
    "Commit",
    "DeletionCommit",
    "DeletionRecord",
    "FactRow",
    "LedgerEntry",
    "OutboxOp",
    "OutboxRow",
    "RequestedVia",
    "RollbackCommit",
    "RollbackRecord",
    "StoreItem",
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
    trace_id: str  # the trace whose write this is: stage 7's span joins that trace


@dataclass(frozen=True)
class LedgerEntry:
    trace_id: str
    memory_id: str
    outcome: str  # stored | merged


@dataclass
class Commit:
    """Everything one candidate changes, written all-or-nothing.

    `memories` are whole-item puts conditioned on the rev that was read (None: must not exist);
    `fact_row` is conditioned on its version. Any failed condition cancels every item. The
    source trace (`trace_id`, written by ingest before its turns were enqueued) must still
    exist: once the user is erased, a turn still in flight writes nothing (`SourceErased`).
    A caller's own edit of a memory (`from_trace` False: a pin, an expiry) has no source trace
    to check; the revs it read guard it against an erasure or a rollback meanwhile.
    """

    tenant: str
    user_id: str
    trace_id: str
    memories: list[tuple[MemoryUnit, int | None]] = field(default_factory=list)
    fact_key: str | None = None
    fact_row: FactRow | None = None  # the new row; its version is the one read
    ledger: list[LedgerEntry] = field(default_factory=list)
    outbox: list[OutboxRow] = field(default_factory=list)
    from_trace: bool = True


RequestedVia = Literal["api", "cli"]
"""Which door a rollback came through: the HTTP route or `memwrite rollback`."""


class RollbackRecord(BaseModel):
    """The audit record of one trace's rollback, kept for as long as the trace is: who asked
    (the credential's tenant, through which door), when, and what changed."""

    model_config = ConfigDict(frozen=True)

    trace_id: str
    tenant: str
    user_id: str
    rolled_back_at: datetime
    requested_via: RequestedVia
    removed: list[str]  # memories the trace stored, deleted with their index documents
    restored: list[str]  # memories they had ended (superseded), active again
    updated: list[str]  # other memories of the same rows re-derived (links, tier, confidence)


@dataclass
class RollbackCommit:
    """Everything one rollback changes, written all-or-nothing.

    `removed` are deleted on the rev that was read (with their retrieval counters and outbox
    rows); `changed` are whole-item puts on the rev read, each with an outbox row; each of
    `fact_rows` is written on its version (an empty row is deleted); `record` is inserted only
    if absent, so of two concurrent rollbacks of one trace exactly one applies; `span` (stage
    `rollback`) joins the trace with it. The trace must still exist, its user not being erased.
    """

    tenant: str
    user_id: str
    removed: list[VersionedMemory]
    changed: list[tuple[MemoryUnit, int]]
    fact_rows: dict[str, FactRow]  # key -> the new row; its version is the one read
    outbox: list[OutboxRow]
    record: RollbackRecord
    span: StageSpan

    @property
    def item_count(self) -> int:
        """Items one DynamoDB transaction holds for this: per removed memory the memory, its
        counter and one outbox row per rev; per changed memory the memory and an outbox row;
        each row; the trace's check, the record and the span."""
        removed = sum(2 + versioned.rev for versioned in self.removed)
        return removed + len(self.changed) + len(self.outbox) + len(self.fact_rows) + 3


class DeletionRecord(BaseModel):
    """`DELETE /v1/memories/{memory_id}`: the memory deleted, and what that changed around it."""

    model_config = ConfigDict(frozen=True)

    memory_id: str
    user_id: str
    trace_id: str  # the trace that stored it: the deletion's span joins it
    deleted_at: datetime
    restored: list[str]  # memories it had ended (superseded), active again
    updated: list[str]  # other memories of its row re-derived (links, tier, confidence)


@dataclass
class DeletionCommit:
    """Everything one memory's deletion changes, written all-or-nothing.

    `removed` is deleted on the rev that was read (with its retrieval counter and its outbox
    rows); `changed` are whole-item puts on the rev read, each with an outbox row; `fact_row`
    (under `fact_key`) is written on its version (an empty row is deleted); `announcement` is
    the deletion's own outbox row (`memwrite.records.change_events.deletion_row_id`: stage 7 takes
    the document out and sends `memory.deleted`); `span` (stage `delete`) joins the memory's trace.
    """

    tenant: str
    user_id: str
    removed: VersionedMemory
    changed: list[tuple[MemoryUnit, int]]
    fact_key: str | None
    fact_row: FactRow | None  # the new row; its version is the one read
    outbox: list[OutboxRow]
    announcement: OutboxRow
    record: DeletionRecord
    span: StageSpan


@dataclass(frozen=True)
class StoreItem:
    """A resolved candidate with where it came from: the unit dedupe, conflict and persist
    decide about."""

    candidate: Candidate  # entity is the canonical name
    entity_id: str
    tenant: str
    user_id: str
    session_id: str
    trace_id: str
    turn_id: str
    observed_at: datetime
    source: str
    pinned: bool = False  # a direct memory written pinned
    expires_on: datetime | None = None  # a direct memory's expiry

    @classmethod
    def of(cls, payload: ItemsPayload, item: PipelineItem) -> StoreItem:
        turn = next((t for t in payload.turns if t.turn_id == item.turn_id), None)
        return cls(
            candidate=item.candidate,
            entity_id=item.entity_id,
            tenant=payload.tenant,
            user_id=payload.user_id,
            session_id=payload.session_id,
            trace_id=item.trace_id,
            turn_id=item.turn_id,
            observed_at=item.observed_at,
            source=payload.source,
            pinned=turn.pinned if turn is not None else False,
            expires_on=turn.expires_on if turn is not None else None,
        )

    @property
    def memory_id(self) -> str:
        return memory_id_for(self.tenant, self.user_id, self.candidate, self.entity_id)

    @property
    def fact_key(self) -> str | None:
        """The entity_facts row of a keyed candidate; None for events and tasks."""
        if self.candidate.type not in KEYED_TYPES:
            return None
        return fact_key_for(self.candidate, self.entity_id)
