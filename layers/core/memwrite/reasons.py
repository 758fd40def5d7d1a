"""Typed reasons: every rejection or transformation says exactly why (docs/design.md §8).

Each reason is a small pydantic model tagged by `type`; `Reason` is their discriminated union,
so a span read back from DynamoDB or JSON comes back as the same typed object. Reasons carry
rule names and counts, never turn text: spans, logs and metrics must not leak content.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "KEPT_AS_EPISODE",
    "PII_KINDS",
    "AssistantTurn",
    "Contradiction",
    "DeadLettered",
    "DeferredBudget",
    "DeferredModelFailed",
    "DeferredNoLLM",
    "DuplicateConfirmed",
    "DuplicateTurn",
    "EnqueueFailed",
    "ExcludedTopic",
    "ExtractionError",
    "IndexingError",
    "JudgeError",
    "LateArrival",
    "MatchedSkipPattern",
    "MemoryDeleted",
    "NoCandidates",
    "NonConversationalTurn",
    "PinnedMemory",
    "PolicyBlocked",
    "QualityDiscard",
    "RateLimited",
    "Reason",
    "Redacted",
    "ResolutionFailed",
    "RolledBack",
    "SecretKind",
    "ShortAnswer",
    "SkipReason",
    "StoreError",
    "Supersedes",
    "TooShort",
    "TraceRolledBack",
    "Ungrounded",
    "Unverified",
    "UserErased",
    "UserRule",
    "VerifierCheck",
    "WebhookAttempt",
]


class SecretKind(StrEnum):
    """What the policy firewall found."""

    CARD_NUMBER = "card_number"
    NATIONAL_ID = "national_id"
    CLOUD_KEY = "cloud_key"
    API_TOKEN = "api_token"
    PRIVATE_KEY = "private_key"
    PASSWORD = "password"
    # PII rather than secrets: redacted by default, a tenant may allow them (`allowed_pii`).
    IBAN = "iban"
    EMAIL = "email"
    PHONE = "phone"


PII_KINDS: frozenset[SecretKind] = frozenset({SecretKind.IBAN, SecretKind.EMAIL, SecretKind.PHONE})


class VerifierCheck(StrEnum):
    """The verifier's eight checks of a candidate against its source turns (docs/design.md §2)."""

    ENTITY_IDENTITY = "entity_identity"
    OBJECT_IDENTITY = "object_identity"
    LOCATION = "location"
    TEMPORAL_ACCURACY = "temporal_accuracy"
    ORGANISATIONAL_CONTEXT = "organisational_context"
    COMPLETENESS = "completeness"
    RELATIONAL_CONTEXT = "relational_context"
    SUPPORTED_BY_TRANSCRIPT = "supported_by_transcript"


class _Reason(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TooShort(_Reason):
    type: Literal["TooShort"] = "TooShort"
    word_count: int
    min_words: int


class MatchedSkipPattern(_Reason):
    """A built-in skip rule matched every sentence (the first one's rule is reported)."""

    type: Literal["MatchedSkipPattern"] = "MatchedSkipPattern"
    pattern: str


class UserRule(_Reason):
    """A tenant's own skip pattern matched."""

    type: Literal["UserRule"] = "UserRule"
    name: str


class RateLimited(_Reason):
    type: Literal["RateLimited"] = "RateLimited"
    window_secs: int


class AssistantTurn(_Reason):
    type: Literal["AssistantTurn"] = "AssistantTurn"


class NonConversationalTurn(_Reason):
    """System and tool turns carry no statement by the user."""

    type: Literal["NonConversationalTurn"] = "NonConversationalTurn"
    role: str


class PolicyBlocked(_Reason):
    type: Literal["PolicyBlocked"] = "PolicyBlocked"
    kind: SecretKind


class Redacted(_Reason):
    """Not a rejection: the turn passed with these kinds of secret masked."""

    type: Literal["Redacted"] = "Redacted"
    kinds: tuple[SecretKind, ...]


class ShortAnswer(_Reason):
    """Not a rejection: a turn too short alone passed with the question it answers attached."""

    type: Literal["ShortAnswer"] = "ShortAnswer"
    word_count: int
    redacted: tuple[SecretKind, ...] = ()


class DuplicateTurn(_Reason):
    """The turn was enqueued by an earlier request; it is not enqueued again."""

    type: Literal["DuplicateTurn"] = "DuplicateTurn"


class EnqueueFailed(_Reason):
    """The queue refused the turn; the client was told to re-send it."""

    type: Literal["EnqueueFailed"] = "EnqueueFailed"
    error: str


class NoCandidates(_Reason):
    """Extraction found nothing durable in the turn (a normal, expected answer)."""

    type: Literal["NoCandidates"] = "NoCandidates"
    extractor: str


class QualityDiscard(_Reason):
    """The extractor judged the candidate not worth keeping (hypothetical, trivia, ...)."""

    type: Literal["QualityDiscard"] = "QualityDiscard"
    reason: str


class ExcludedTopic(_Reason):
    """The tenant's settings drop candidates of this topic (`extraction.include_topics` does
    not name it, or `extraction.exclude_topics` does)."""

    type: Literal["ExcludedTopic"] = "ExcludedTopic"
    topic: str


class Ungrounded(_Reason):
    """The candidate has no direct evidence in its turn."""

    type: Literal["Ungrounded"] = "Ungrounded"


class DeferredNoLLM(_Reason):
    """The rules could not fully handle the turn and no LLM is configured (offline mode)."""

    type: Literal["DeferredNoLLM"] = "DeferredNoLLM"


class DeferredModelFailed(_Reason):
    """The model failed after its own retries (`error`: the error's type name only): the turn
    is kept as a pending episode for backfill, visibly (an error span), never dropped."""

    type: Literal["DeferredModelFailed"] = "DeferredModelFailed"
    error: str


class DeferredBudget(_Reason):
    """The model budget stayed empty for `model.max_wait_s` after the turn was accepted
    (`waited_s`: how long it waited in the queue): kept as a pending episode for backfill,
    which runs on the budget's spare capacity (docs/design.md §18)."""

    type: Literal["DeferredBudget"] = "DeferredBudget"
    waited_s: float


# The rejections that keep the turn as a pending episode rather than drop it
# (docs/design.md §10): a trace counts them as `episodes`, never as `discarded`.
KEPT_AS_EPISODE = (DeferredNoLLM, DeferredModelFailed, DeferredBudget)


class Unverified(_Reason):
    """The verifier re-read the source turns and dropped the candidate: `check` failed."""

    type: Literal["Unverified"] = "Unverified"
    check: VerifierCheck


class ExtractionError(_Reason):
    """Extraction failed after its retries; the turn goes to the DLQ, visibly."""

    type: Literal["ExtractionError"] = "ExtractionError"
    error: str


class StoreError(_Reason):
    """Persisting failed after its retries; the batch goes to the DLQ, visibly."""

    type: Literal["StoreError"] = "StoreError"
    error: str


class JudgeError(_Reason):
    """A stage's judge (resolve_refs, dedupe) failed after its retries (model or store down):
    the task is retried, then dead-lettered, visibly; what its calls cost stays on the span."""

    type: Literal["JudgeError"] = "JudgeError"
    error: str


class IndexingError(_Reason):
    """Indexing a memory failed (index or embedder down); the row stays pending and is
    retried, its memory readable by id but not yet searchable."""

    type: Literal["IndexingError"] = "IndexingError"
    error: str


class WebhookAttempt(_Reason):
    """One delivery attempt of the row's change-feed event to one of the tenant's webhooks:
    its answer (`status`; None: no answer, `error` names the transport error), which attempt
    of this delivery it was and where it went (the host only: a URL may carry a token)."""

    type: Literal["WebhookAttempt"] = "WebhookAttempt"
    event_id: str
    event: str
    host: str
    attempt: int
    status: int | None
    error: str | None = None


class DeadLettered(_Reason):
    """A pipeline stage gave up on the batch (its Catch): the turn is in the pipeline DLQ.

    `error` is the error's type name only (its message could quote the turn)."""

    type: Literal["DeadLettered"] = "DeadLettered"
    stage: str
    error: str


class ResolutionFailed(_Reason):
    """A reference ("she", "my manager") could not be tied to one entity: not stored."""

    type: Literal["ResolutionFailed"] = "ResolutionFailed"
    detail: str


class DuplicateConfirmed(_Reason):
    """Not a new memory: tier 1 (same id), 2 (cosine) or 3 (LLM judge) found it stored."""

    type: Literal["DuplicateConfirmed"] = "DuplicateConfirmed"
    tier: int


class Supersedes(_Reason):
    """A newer value of a stateful predicate: the older memories end (kept, pointed forward)."""

    type: Literal["Supersedes"] = "Supersedes"
    count: int


class PinnedMemory(_Reason):
    """An inferred candidate would have superseded a pinned memory: it is kept beside it as
    challenged instead (only a direct write or the user's explicit correction replaces a
    pinned memory, with the ordinary `Supersedes`)."""

    type: Literal["PinnedMemory"] = "PinnedMemory"
    memory_id: str


class LateArrival(_Reason):
    """An older value arriving after a newer one: stored already superseded."""

    type: Literal["LateArrival"] = "LateArrival"


class Contradiction(_Reason):
    """An idempotent predicate observed both ways: both memories CHALLENGED and linked."""

    type: Literal["Contradiction"] = "Contradiction"
    count: int


class RolledBack(_Reason):
    """The trace's memories were removed and the memories they had ended restored."""

    type: Literal["RolledBack"] = "RolledBack"
    removed: int
    restored: int


class MemoryDeleted(_Reason):
    """One memory of the trace was deleted by its id (`DELETE /v1/memories/{memory_id}`) and
    the memories it had ended restored."""

    type: Literal["MemoryDeleted"] = "MemoryDeleted"
    memory_id: str
    restored: int


class TraceRolledBack(_Reason):
    """The candidate's trace was rolled back while a retry of its turn was pending: nothing is
    stored, so the rollback stays whole."""

    type: Literal["TraceRolledBack"] = "TraceRolledBack"


class UserErased(_Reason):
    """The candidate's user was erased while its turn was in flight: nothing is written."""

    type: Literal["UserErased"] = "UserErased"


SkipReason = Annotated[
    TooShort
    | MatchedSkipPattern
    | UserRule
    | RateLimited
    | AssistantTurn
    | NonConversationalTurn
    | PolicyBlocked,
    Field(discriminator="type"),
]

Reason = Annotated[
    TooShort
    | MatchedSkipPattern
    | UserRule
    | RateLimited
    | AssistantTurn
    | NonConversationalTurn
    | PolicyBlocked
    | Redacted
    | ShortAnswer
    | DuplicateTurn
    | EnqueueFailed
    | NoCandidates
    | QualityDiscard
    | ExcludedTopic
    | Ungrounded
    | DeferredNoLLM
    | DeferredModelFailed
    | DeferredBudget
    | Unverified
    | ExtractionError
    | DeadLettered
    | ResolutionFailed
    | DuplicateConfirmed
    | Supersedes
    | LateArrival
    | PinnedMemory
    | Contradiction
    | RolledBack
    | MemoryDeleted
    | StoreError
    | IndexingError
    | WebhookAttempt
    | JudgeError
    | UserErased
    | TraceRolledBack,
    Field(discriminator="type"),
]
