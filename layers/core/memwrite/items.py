"""Payloads of the store stages (resolve_refs -> dedupe -> conflict -> persist).

Small by design (Step Functions' 256 KB limit): the batch's ids, and per candidate the candidate
itself plus what each stage decided about it.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from memwrite.candidate import Candidate, memory_key
from memwrite.extract import ExtractedTurn
from memwrite.ids import content_hash
from memwrite.persist import PersistItem

__all__ = ["ConflictNote", "DedupeNote", "ItemsPayload", "PipelineItem"]


class DedupeNote(BaseModel):
    target: str | None = Field(description="Memory it duplicates (merge target), or null: new.")
    tier: int | None
    similarity: float | None = None


class ConflictNote(BaseModel):
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
    tenant: str
    user_id: str
    session_id: str
    source: str
    turns: list[ExtractedTurn]
    items: list[PipelineItem]

    def persist_item(self, item: PipelineItem) -> PersistItem:
        return PersistItem(
            candidate=item.candidate,
            entity_id=item.entity_id,
            tenant=self.tenant,
            user_id=self.user_id,
            session_id=self.session_id,
            trace_id=item.trace_id,
            turn_id=item.turn_id,
            observed_at=item.observed_at,
            source=self.source,
        )
