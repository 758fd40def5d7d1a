"""Input, domain and output models of the write path up to the queue."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from memwrite.direct_memories.model import DirectMemory
from memwrite.reasons import Reason, SecretKind, SkipReason

__all__ = [
    "AcceptedTurn",
    "BackfillAccepted",
    "Decision",
    "FailedTurn",
    "Identifier",
    "IngestRequest",
    "IngestResponse",
    "IngestTurn",
    "LlmUsageSummary",
    "PreFilterDecision",
    "QueuedTurn",
    "Role",
    "SkippedTurn",
    "Source",
    "SpanResult",
    "StageSpan",
    "TraceInput",
    "session_sort_key",
]

Identifier = Annotated[
    str,
    StringConstraints(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:@+=/-]+$"),
]
"""A caller-chosen id (session, user, agent): 1-128 URL-safe characters, no spaces."""


class Role(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"
    SYSTEM = "system"
    TOOL = "tool"


class Source(StrEnum):
    """Who stands behind the turns; it weights confidence later (docs/design.md §9)."""

    USER_EXPLICIT = "user_explicit"
    GROUP_CHAT = "group_chat"
    AGENT_INFERRED = "agent_inferred"


class Decision(StrEnum):
    PASS = "pass"
    SKIP = "skip"


class SpanResult(StrEnum):
    PASS = "pass"
    REJECT = "reject"
    TRANSFORM = "transform"
    ERROR = "error"


def _as_utc(value: datetime | None) -> datetime | None:
    """Naive timestamps are taken as UTC so that ordering by time is well defined."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


# C0 controls and DEL, but tab, newline and carriage return: never part of what a person said.
_CONTROL_CHARACTER = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _without_control_characters(value: str) -> str:
    if match := _CONTROL_CHARACTER.search(value):
        raise ValueError(
            f"control character U+{ord(match.group()):04X} at offset {match.start()}"
            " (only tab, newline and carriage return are allowed)"
        )
    return value


class IngestTurn(BaseModel):
    """One conversation turn as the agent sends it."""

    model_config = ConfigDict(extra="forbid")

    role: Role
    content: str = Field(min_length=1)
    timestamp: datetime | None = None

    _utc = field_validator("timestamp")(_as_utc)
    _plain_text = field_validator("content")(_without_control_characters)


class TraceInput(BaseModel):
    """One turn of a request as its trace keeps it for replay: the firewall's masked text
    (`memwrite.pre_filter.checks.mask_secrets`), never the raw content."""

    model_config = ConfigDict(frozen=True)

    role: Role
    content: str
    timestamp: datetime | None = None


class IngestRequest(BaseModel):
    """Body of `POST /v1/turns`. The tenant never comes from here: it comes from the credential."""

    model_config = ConfigDict(extra="forbid")

    session_id: Identifier
    user_id: Identifier
    agent_id: Identifier | None = None
    # Not in the repr: a turn may hold a secret, and Powertools formats every route's
    # arguments into a debug message on each request, logged or not (a request's turns took
    # a tenth of its ingest's CPU to format).
    turns: list[IngestTurn] = Field(min_length=1, repr=False)
    source: Source = Source.USER_EXPLICIT


class PreFilterDecision(BaseModel):
    """What the pre-filter decided for one turn (the `memwrite prefilter` output line)."""

    model_config = ConfigDict(frozen=True)

    decision: Decision
    reason: SkipReason | None = None
    text: str | None = Field(
        default=None, description="Kept sentences, reassembled, secrets masked; null on skip."
    )
    redacted: tuple[SecretKind, ...] = ()
    context: str | None = Field(
        default=None, description="The question a short answer was kept with (masked)."
    )
    sentences: int = Field(default=0, description="Sentences the skip rules judged.")
    dropped_by: tuple[str, ...] = Field(
        default=(), description="The rule that dropped each dropped sentence (for metrics)."
    )


class QueuedTurn(BaseModel):
    """The SQS message body: a pre-filter survivor on its way to extraction."""

    model_config = ConfigDict(frozen=True)

    tenant: str
    user_id: str
    session_id: str
    agent_id: str | None
    trace_id: str
    turn_id: str
    role: Role
    text: str
    observed_at: datetime
    source: Source
    context: str | None = Field(
        default=None, description="The question this short answer replies to (masked)."
    )
    preceding: str | None = Field(
        default=None,
        description="The end of the turn before this one in its request (masked, any role, "
        "at most `memwrite.records.episode.PRECEDING_MAX_CHARS`): an episode's search text begins "
        "with it (docs/design.md §10).",
    )
    direct: DirectMemory | None = Field(
        default=None, description="A memory written as is: extract makes no call for it."
    )
    accepted_at: datetime | None = Field(
        default=None,
        description="When POST /v1/turns accepted it: how long it waits for the model budget "
        "counts from here (pipeline.model.max_wait_s).",
    )


def session_sort_key(turn: QueuedTurn) -> str:
    """Orders a session's turns by observation time, ties broken by turn id."""
    return f"{turn.observed_at.astimezone(UTC).isoformat()}#{turn.turn_id}"


class SkippedTurn(BaseModel):
    turn_id: str
    reason: SkipReason


class FailedTurn(BaseModel):
    """A turn the queue refused: it was not accepted and the client should re-send it."""

    turn_id: str
    error: str
    retry_after_secs: int


class AcceptedTurn(BaseModel):
    turn_id: str
    redacted: tuple[SecretKind, ...] = ()


class IngestResponse(BaseModel):
    """Body of the `POST /v1/turns` response.

    `accepted` counts turns enqueued by this request; `turn_ids` lists every turn's id in request
    order; `duplicates` are turns already enqueued earlier (not enqueued again); `failed` lists
    turns the queue refused (the response is then a 503 and those turns should be re-sent).
    """

    trace_id: str
    accepted: int
    skipped: list[SkippedTurn]
    turn_ids: list[str]
    duplicates: list[str] = Field(default_factory=list)
    failed: list[FailedTurn] = Field(default_factory=list)


class BackfillAccepted(BaseModel):
    """Body of the `POST /v1/users/{user_id}/backfill` response (202): the backfill was handed
    to the backfill function; `GET /v1/traces/{trace_id}` follows it once it runs. `trace_id`
    is None when the user had no pending episode in the range (nothing was started)."""

    user_id: str
    trace_id: str | None


class LlmUsageSummary(BaseModel):
    """What the LLM calls behind one span cost."""

    model_config = ConfigDict(frozen=True)

    calls: int
    input_tokens: int  # uncached, as the API's `usage.input_tokens`
    output_tokens: int
    cost_usd: float  # cached tokens included
    models: tuple[str, ...] = ()
    malformed: int = 0  # of `calls`, the answers that were unusable (asked again, or given up)
    cache_creation_input_tokens: int = 0  # prompt prefix tokens written to the cache
    cache_read_input_tokens: int = 0  # prompt prefix tokens read from the cache


class StageSpan(BaseModel):
    """One stage's verdict on one item (a turn now, a candidate in later stages)."""

    model_config = ConfigDict(frozen=True)

    trace_id: str
    tenant: str
    user_id: str
    stage: str
    item_id: str
    result: SpanResult
    reason: Reason | None = None
    latency_ms: float
    at: datetime
    kind: Literal["turn", "candidate", "webhook"] = "turn"
    llm: LlmUsageSummary | None = None
