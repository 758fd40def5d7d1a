"""What the API answers, as the client reads it (the server's OpenAPI document describes the same
shapes, at `GET /v1/openapi.json`).

Tolerant on purpose: every model keeps fields it does not know (`extra="allow"`, reachable as
attributes and in `model_extra`), and closed sets of the server (types, tiers, statuses) are
plain strings here, so an additive change of the API never breaks an installed client.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "BackfillAck",
    "BatchReplay",
    "DeletionRecord",
    "ErasureReport",
    "FieldError",
    "ImportReport",
    "IngestAck",
    "Memory",
    "MemoryDetail",
    "MemoryLink",
    "MemoryPage",
    "MemoryTrace",
    "MemoryTraces",
    "ReplayDiff",
    "RollbackRecord",
    "SearchHit",
    "SearchResults",
    "Span",
    "TenantSettings",
    "Trace",
    "TraceOutcome",
    "TracePage",
    "Turn",
    "UsageReport",
]


class _Answer(BaseModel):
    model_config = ConfigDict(extra="allow")


class Turn(BaseModel):
    """One conversation turn to ingest (a dict with the same keys works as well)."""

    model_config = ConfigDict(extra="forbid")

    role: str = Field(description="user, assistant, system or tool")
    content: str
    timestamp: datetime | None = None


class FieldError(_Answer):
    field: str
    message: str


class SkippedTurn(_Answer):
    turn_id: str
    reason: dict[str, Any]


class FailedTurn(_Answer):
    turn_id: str
    error: str
    retry_after_secs: int


class BackfillAck(_Answer):
    """202 of `POST /v1/users/{user_id}/backfill`: the trace the backfill runs under (None:
    nothing was pending)."""

    user_id: str
    trace_id: str | None


class DirectWriteAck(_Answer):
    """202 of `POST /v1/users/{user_id}/memories`: the trace to follow."""

    trace_id: str


class IngestAck(_Answer):
    """`POST /v1/turns`: the trace to follow, what stage 1 accepted and skipped."""

    trace_id: str
    accepted: int
    skipped: list[SkippedTurn]
    turn_ids: list[str]
    duplicates: list[str] = Field(default_factory=list)
    failed: list[FailedTurn] = Field(default_factory=list)


class LlmUsage(_Answer):
    calls: int
    input_tokens: int  # uncached
    output_tokens: int
    cost_usd: float  # cached tokens included
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0


class Span(_Answer):
    """What one stage decided about one turn or candidate."""

    stage: str
    item_id: str
    result: str
    reason: dict[str, Any] | None = None
    latency_ms: float
    at: datetime
    kind: str = "turn"
    llm: LlmUsage | None = None


class TraceOutcome(_Answer):
    stored: int
    merged: int
    discarded: int
    episodes: int  # turns kept as pending episodes, not counted as discarded
    memory_ids: list[str]


class RollbackRecord(_Answer):
    """The audit record of a trace's rollback."""

    trace_id: str
    user_id: str
    rolled_back_at: datetime
    requested_via: str
    removed: list[str]
    restored: list[str]
    updated: list[str]


class DeletionRecord(_Answer):
    """`DELETE /v1/memories/{memory_id}`: the memory deleted and what it had superseded,
    current again (`restored`)."""

    memory_id: str
    user_id: str
    trace_id: str
    deleted_at: datetime
    restored: list[str]
    updated: list[str]


class Trace(_Answer):
    """`GET /v1/traces/{trace_id}`: `status` is in_progress, complete or failed."""

    trace_id: str
    user_id: str
    session_id: str
    created_at: str
    status: str
    turn_ids: list[str]
    spans: list[Span]
    outcome: TraceOutcome
    llm_calls: int
    input_tokens: int  # uncached
    output_tokens: int
    cost_usd: float  # cached tokens included
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    rolled_back_at: datetime | None = None
    rollback: RollbackRecord | None = None

    @property
    def finished(self) -> bool:
        return self.status != "in_progress"


class MemoryTrace(Trace):
    memory_outcomes: list[str]


class MemoryTraces(_Answer):
    """`GET /v1/memories/{memory_id}/traces`: the traces behind a memory, oldest first."""

    memory_id: str
    traces: list[MemoryTrace]


class TracePage(_Answer):
    user_id: str
    traces: list[Trace]
    next_cursor: str | None


class MemoryLink(_Answer):
    kind: str
    memory_id: str


class Memory(_Answer):
    """A memory as the API returns it."""

    memory_id: str
    user_id: str
    type: str
    text: str
    topic: str
    entity: str
    attribute: str
    value: str
    tier: str
    confidence: float
    observed_at: datetime
    valid_until: datetime | None = None
    superseded_by: str | None = None
    links: list[MemoryLink] = Field(default_factory=list)
    negated: bool = False
    corroboration: int = 1
    source_turn_id: str
    pinned: bool = False
    expires_at: datetime | None = None


class SearchHit(_Answer):
    """One search result, its fused score and what matched (bm25, content, question): a
    memory (`kind` "memory", the fields of `Memory`) or an episode (`kind` "episode": a kept
    turn's own words waiting for a model, with `turn_id`, `status`, ...; the memory fields
    are then None)."""

    kind: str = "memory"
    text: str
    source_turn_id: str
    user_id: str
    observed_at: datetime
    score: float
    matched: list[str]
    memory_id: str | None = None
    type: str | None = None
    topic: str | None = None
    entity: str | None = None
    attribute: str | None = None
    value: str | None = None
    tier: str | None = None
    confidence: float | None = None
    valid_until: datetime | None = None
    superseded_by: str | None = None
    links: list[MemoryLink] = Field(default_factory=list)
    negated: bool = False
    corroboration: int = 1
    turn_id: str | None = None  # an episode's
    status: str | None = None  # an episode's: pending | extracted | expired


class SearchResults(_Answer):
    results: list[SearchHit]


class MemoryDetail(Memory):
    """`GET /v1/memories/{memory_id}`: with its supersession chain (oldest first, itself
    included)."""

    access_count: int = 0
    last_accessed: datetime | None = None
    chain: list[Memory]


class MemoryPage(_Answer):
    user_id: str
    memories: list[Memory]
    next_cursor: str | None


class TenantSettings(_Answer):
    """`GET|PUT /v1/settings`: the tenant's stored settings (null: the deployment's value)."""

    min_words: int | None = None
    rate_limit_window_secs: int | None = None
    extract_from_assistant: bool | None = None
    user_skip_patterns: list[dict[str, Any]] | None = None
    verifier_enabled: bool | None = None
    verifier_min_importance: float | None = None
    allowed_pii: list[str] | None = None
    extraction: dict[str, Any] | None = None
    webhooks: list[dict[str, Any]] | None = None
    agents: dict[str, Any] = Field(default_factory=dict)


class UsageReport(_Answer):
    """`GET /v1/usage`: the tenant's usage over whole UTC hours [`from_`, `to`)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    tenant: str
    from_: datetime = Field(alias="from")
    to: datetime
    turns_in: int
    turns_kept: int
    model_calls: int
    input_tokens: int
    cache_read_input_tokens: int
    cache_creation_input_tokens: int
    output_tokens: int
    embeddings: int
    cost_usd: float


class ErasureReport(_Answer):
    user_id: str
    erased: bool
    removed: dict[str, int]


class ImportReport(_Answer):
    """`POST /v1/users/{user_id}/import`: items written, and items found there already."""

    user_id: str
    imported: dict[str, int]
    unchanged: dict[str, int]


class RunSummary(_Answer):
    stored: int
    merged: int
    discarded: int
    llm_calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float


class MemoryChange(_Answer):
    memory_id: str
    text: str
    before: str | None
    after: str | None


class MemoryChanges(_Answer):
    added: list[MemoryChange] = Field(default_factory=list)
    merged: list[MemoryChange] = Field(default_factory=list)
    no_longer_written: list[MemoryChange] = Field(default_factory=list)


class ReplayDiff(_Answer):
    """`POST /v1/traces/{trace_id}/replay`: what a changed config would have done (nothing
    written); `stages` maps each stage to the items it newly drops or keeps."""

    trace_id: str
    stages: dict[str, dict[str, Any]]
    memories: MemoryChanges
    before: RunSummary
    after: RunSummary


class BatchReplay(_Answer):
    user_id: str
    traces: list[ReplayDiff]
    without_inputs: list[str]
    totals: dict[str, int]
    next_cursor: str | None
