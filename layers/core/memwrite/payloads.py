"""What flows between the pipeline stages (Step Functions task inputs and outputs).

Small by design (Step Functions' 256 KB limit): ids, candidates, and per candidate what each
stage decided about it; never whole conversations. `memwrite.stages.STAGES` names, for every
stage, which of these models it takes and returns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from enum import StrEnum
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from memwrite.claims.candidate import Candidate, memory_key
from memwrite.ids import content_hash
from memwrite.models import QueuedTurn
from memwrite.records.entity_facts import DerivedState, FactObservation
from memwrite.schema import PARTITION_KEY, SORT_KEY

__all__ = [
    "ConflictNote",
    "DedupeNote",
    "ExtractInput",
    "ExtractOutput",
    "ExtractedTurn",
    "Extractor",
    "IndexAction",
    "IndexedChange",
    "ItemsPayload",
    "OutboxChange",
    "PipelineItem",
]


class ExtractInput(BaseModel):
    """Extract's input: queued turns of one tenant, user and session, in order."""

    turns: list[QueuedTurn] = Field(min_length=1)
    backfill: bool = Field(
        default=False, description="A backfill of kept episodes: no new episode is kept."
    )

    @model_validator(mode="after")
    def _one_session(self) -> Self:
        sessions = {(t.tenant, t.user_id, t.session_id) for t in self.turns}
        if len(sessions) > 1:
            raise ValueError("a batch holds the turns of one tenant, user and session")
        return self

    @property
    def tenant(self) -> str:
        return self.turns[0].tenant

    @classmethod
    def batches_of(cls, turns: Sequence[QueuedTurn]) -> list[ExtractInput]:
        """One input per tenant, user and session of a queue batch, turns in arrival order:
        what the dispatcher of an SQS batch starts (one extract task per session)."""
        grouped: dict[tuple[str, str, str], list[QueuedTurn]] = {}
        for turn in turns:
            grouped.setdefault((turn.tenant, turn.user_id, turn.session_id), []).append(turn)
        return [cls(turns=session) for session in grouped.values()]


class Extractor(StrEnum):
    RULES = "rules"  # the rule fast-path understood the whole turn: no LLM call for it
    LLM = "llm"
    DEFERRED = "deferred"  # offline and the rules could not handle all of it
    DIRECT = "direct"  # a memory written as is (`POST /v1/users/{user_id}/memories`)


class ExtractedTurn(BaseModel):
    turn_id: str
    trace_id: str
    observed_at: datetime
    extractor: Extractor
    pinned: bool = False  # a direct memory written pinned
    expires_on: datetime | None = None  # a direct memory's expiry


class ExtractOutput(BaseModel):
    """Extract's output: ids and kept candidates only."""

    tenant: str
    user_id: str
    session_id: str
    source: str
    turns: list[ExtractedTurn]
    candidates: list[Candidate]


class DedupeNote(BaseModel):
    """What dedupe decided for one candidate; persist commits it as recorded."""

    memory_id: str = Field(description="The candidate's content-addressed id as a new memory.")
    target: str | None = Field(description="Memory it duplicates (merge target), or null: new.")
    tier: int | None = Field(description="Tier that found the duplicate: 1 id, 2 cosine, 3 LLM.")
    similarity: float | None = None
    already_applied: bool = Field(
        default=False, description="This turn's candidate is in the store already (redelivery)."
    )

    @property
    def written_id(self) -> str:
        """The memory this candidate writes: the merge target, or itself."""
        return self.target or self.memory_id


class ConflictNote(BaseModel):
    """What conflict decided for one keyed candidate's (entity, predicate) row.

    `state` is the row's derived state with the candidate's observation added, decided on the
    row at `row_version`; persist writes it only if it still finds that version.
    """

    fact_key: str
    row_version: int
    observation: FactObservation
    state: DerivedState
    supersedes: list[str] = Field(default_factory=list)
    contradicts: list[str] = Field(default_factory=list)
    born_superseded: bool = False


class PipelineItem(BaseModel):
    candidate: Candidate
    entity_id: str
    turn_id: str
    trace_id: str
    observed_at: datetime
    dedupe: DedupeNote | None = None
    conflict: ConflictNote | None = None
    memory_id: str | None = None
    outcome: str | None = None

    @property
    def item_id(self) -> str:
        """The span id of this candidate: its turn and its memory key."""
        return f"{self.turn_id}:{content_hash(memory_key(self.candidate))}"


class ItemsPayload(BaseModel):
    """resolve_refs -> dedupe -> conflict -> persist: the batch's ids and its candidates."""

    tenant: str
    user_id: str
    session_id: str
    source: str
    turns: list[ExtractedTurn]
    items: list[PipelineItem]


class OutboxChange(BaseModel):
    """One outbox row: memory `memory_id` of a user changed (its `rev`-th write); stage 7's
    input. The row says only *that* it changed: the indexer reads what it is now."""

    model_config = ConfigDict(frozen=True)

    tenant: str
    user_id: str
    memory_id: str
    rev: int = Field(ge=1)
    trace_id: str | None = None  # the trace that wrote it (rows written before it was kept: None)

    @classmethod
    def from_row(cls, row: Mapping[str, object]) -> OutboxChange:
        """From an outbox row as stored (a DynamoDB stream's NEW_IMAGE, deserialised):
        `pk` = tenant#user_id, `sk` = memory_id#rev (`memwrite.schema.OUTBOX`). User ids never
        hold "#" (URL-safe characters), so the last one splits the partition key."""
        partition, sort = row.get(PARTITION_KEY), row.get(SORT_KEY)
        if not isinstance(partition, str) or not isinstance(sort, str):
            raise ValueError("an outbox row needs string pk and sk")
        tenant, _, user_id = partition.rpartition("#")
        memory_id, _, rev = sort.rpartition("#")
        trace_id = row.get("trace_id")
        return cls(
            tenant=tenant,
            user_id=user_id,
            memory_id=memory_id,
            rev=int(rev),
            trace_id=trace_id if isinstance(trace_id, str) else None,
        )


class IndexAction(StrEnum):
    INDEXED = "indexed"  # text, then vectors (or text only: tasks)
    REMOVED = "removed"  # superseded, retracted, erased or rolled back: out of every query


class IndexedChange(BaseModel):
    """What stage 7 did for one outbox row, and when each part became searchable."""

    memory_id: str
    action: IndexAction
    questions: list[str] = Field(default_factory=list)
    text_indexed_at: datetime | None = None
    vectors_indexed_at: datetime | None = None
