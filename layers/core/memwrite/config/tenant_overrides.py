"""Per-tenant overrides (`tenants.<id>`, docs/design.md §14) and what a tenant supplies in
them: skip patterns, its own topics and their vocabulary, change-feed webhooks.

Apart from `memwrite.config.settings` (which reads `TenantOverrides` in `Settings.for_request`,
and `UserSkipPattern`, `TopicDefinition` as deployment defaults too) to keep each module short.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import AnyUrl, BaseModel, ConfigDict, Field, field_serializer, field_validator

from memwrite.config.model_limits import ModelBudgetOverrides
from memwrite.guards.egress import loopback_allowed, url_refusal
from memwrite.guards.linear_regex import compile_linear
from memwrite.reasons import PII_KINDS, SecretKind

__all__ = [
    "MAX_INSTRUCTIONS_CHARS",
    "AgentOverrides",
    "ExtractionOverrides",
    "TenantOverrides",
    "TopicDefinition",
    "UserSkipPattern",
    "Webhook",
    "WebhookEvent",
    "normalise_topic_names",
    "normalise_topic_terms",
    "only_pii",
]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class UserSkipPattern(_Frozen):
    """A tenant's own skip rule: a sentence fully matching `pattern` is dropped (UserRule)."""

    # Named in the rejection reason: UserRule{name}.
    name: str = Field(min_length=1, max_length=64)
    # A regular expression matched against a whole sentence, any case, on RE2 (linear time:
    # no backreferences or lookaround).
    pattern: str = Field(min_length=1, max_length=500)

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        compile_linear(value)  # ValueError naming what RE2 refuses
        return value


def _sorted(values: frozenset[str] | None) -> list[str] | None:
    """A set as JSON: sorted, so a document reads (and compares) the same every time."""
    return None if values is None else sorted(values)


def only_pii(kinds: frozenset[SecretKind] | None) -> frozenset[SecretKind] | None:
    """A tenant may let PII through, never a secret (a key or a password stays masked)."""
    if kinds is not None and not kinds <= PII_KINDS:
        allowed = ", ".join(sorted(PII_KINDS))
        raise ValueError(f"only PII kinds ({allowed}) can be allowed, not {sorted(kinds)}")
    return kinds


_TOPIC_NAME_CHARS = 64


def _topic_name(name: str) -> str:
    """A topic label as extraction writes it (`Candidate.topic`): one line, lowercase."""
    normalised = " ".join(name.split()).lower()
    if not normalised or len(normalised) > _TOPIC_NAME_CHARS:
        raise ValueError(f"a topic name is 1 to {_TOPIC_NAME_CHARS} characters")
    return normalised


def normalise_topic_names(names: frozenset[str] | None) -> frozenset[str] | None:
    return None if names is None else frozenset(_topic_name(name) for name in names)


MAX_INSTRUCTIONS_CHARS = 2_000
MAX_TENANT_TOPICS = 50
MAX_TOPIC_TERMS, _TERM_CHARS = 500, 64  # terms per topic, characters per term


def normalise_topic_terms(
    vocabularies: dict[str, tuple[str, ...]] | None,
) -> dict[str, tuple[str, ...]] | None:
    """`{topic: terms}`: topic names as extraction writes them; each term one line of words."""
    if vocabularies is None:
        return None
    if len(vocabularies) > MAX_TENANT_TOPICS:
        raise ValueError(f"at most {MAX_TENANT_TOPICS} topics")
    checked: dict[str, tuple[str, ...]] = {}
    for name, terms in vocabularies.items():
        if len(terms) > MAX_TOPIC_TERMS:
            raise ValueError(f"at most {MAX_TOPIC_TERMS} terms per topic")
        normalised = tuple(" ".join(term.split()).lower() for term in terms)
        if any(not term or len(term) > _TERM_CHARS for term in normalised):
            raise ValueError(f"a term is 1 to {_TERM_CHARS} characters")
        checked[_topic_name(name)] = normalised
    return checked


class TopicDefinition(_Frozen):
    """A tenant's own topic: the model may assign `name` to a candidate `description` fits."""

    name: str = Field(min_length=1, max_length=_TOPIC_NAME_CHARS)
    # One line: what belongs under this topic (shown to the model).
    description: str = Field(min_length=1, max_length=200, pattern=r"^[^\r\n]+$")

    _name = field_validator("name")(_topic_name)


class ExtractionOverrides(_Frozen):
    """A tenant's steering of extraction; unset fields keep the deployment's value."""

    # Free text given to the model inside a delimited block that cannot change the output
    # format or the rules.
    instructions: str | None = Field(default=None, max_length=MAX_INSTRUCTIONS_CHARS)
    # The tenant's own topics, which the model may assign.
    topics: tuple[TopicDefinition, ...] | None = Field(default=None, max_length=MAX_TENANT_TOPICS)
    # Only candidates of these topics are kept (else ExcludedTopic{topic}); unset: all.
    include_topics: frozenset[str] | None = None
    # Candidates of these topics are dropped: ExcludedTopic{topic}; offline, so are the turns
    # their vocabulary marks (never kept as episodes); a change removes what is stored of them.
    exclude_topics: frozenset[str] | None = None
    # Words and phrases (base form; inflections match too) that mark a turn as of a topic,
    # beside the built-in vocabulary: {"health": ["dialysis", "stoma bag"]}.
    topic_terms: dict[str, tuple[str, ...]] | None = None

    _names = field_validator("include_topics", "exclude_topics")(normalise_topic_names)
    _sets = field_serializer("include_topics", "exclude_topics")(_sorted)
    _terms = field_validator("topic_terms")(normalise_topic_terms)

    @field_validator("topics")
    @classmethod
    def _distinct_names(
        cls, topics: tuple[TopicDefinition, ...] | None
    ) -> tuple[TopicDefinition, ...] | None:
        names = [topic.name for topic in topics or ()]
        if len(names) != len(set(names)):
            raise ValueError("topic names must be distinct")
        return topics


class WebhookEvent(StrEnum):
    """What a webhook subscribes to (the change feed's event types)."""

    MEMORY_CREATED = "memory.created"
    MEMORY_SUPERSEDED = "memory.superseded"  # ended by a newer fact
    MEMORY_UPDATED = "memory.updated"  # merged, re-scored, pinned, restored
    MEMORY_EXPIRED = "memory.expired"  # past its expires_at
    MEMORY_ERASED = "memory.erased"  # rolled back or erased
    MEMORY_DELETED = "memory.deleted"  # deleted by its id (DELETE /v1/memories/{memory_id})
    USER_ERASED = "user.erased"  # the user's erasure (DELETE /v1/users/{user_id})


class Webhook(_Frozen):
    """One endpoint of a tenant's change feed: `events` are POSTed to `url`, signed with
    `secret` (HMAC-SHA256). Stored and validated here; delivery is the change feed's."""

    # https to a public address (loopback only where the deployment allows: memwrite.guards.egress).
    url: AnyUrl
    # The signing key shared with the receiver.
    secret: str = Field(min_length=16, max_length=256)
    # The event types delivered to this endpoint.
    events: frozenset[WebhookEvent] = Field(min_length=1)

    _sets = field_serializer("events")(_sorted)

    @field_validator("url")
    @classmethod
    def _https(cls, url: AnyUrl) -> AnyUrl:
        if len(str(url)) > 2_048:
            raise ValueError("at most 2,048 characters")
        refused = url_refusal(url.scheme, url.host or "", allow_loopback=loopback_allowed())
        if refused is not None:
            raise ValueError(refused)
        return url


MAX_WEBHOOKS = 10


class AgentOverrides(_Frozen):
    # Overrides pipeline.pre_filter.extract_from_assistant for this agent.
    extract_from_assistant: bool | None = None


class TenantOverrides(_Frozen):
    """What a tenant may change; unset fields keep the deployment's value."""

    # Overrides pipeline.pre_filter.min_words.
    min_words: int | None = Field(default=None, ge=0)
    # Overrides pipeline.pre_filter.rate_limit_window_secs.
    rate_limit_window_secs: int | None = Field(default=None, ge=0)
    # Overrides pipeline.pre_filter.extract_from_assistant.
    extract_from_assistant: bool | None = None
    # Replaces pipeline.pre_filter.user_skip_patterns.
    user_skip_patterns: tuple[UserSkipPattern, ...] | None = None
    # Overrides pipeline.extract.verifier.enabled.
    verifier_enabled: bool | None = None
    # Overrides pipeline.extract.verifier.min_importance.
    verifier_min_importance: float | None = Field(default=None, ge=0, le=1)
    # Replaces pipeline.pre_filter.allowed_pii.
    allowed_pii: frozenset[SecretKind] | None = None
    # Steering of extraction: instructions, own topics, topics kept or dropped.
    extraction: ExtractionOverrides | None = None
    # Its weight in the model budget's fair share and its own limits (docs/budget.md).
    model_budget: ModelBudgetOverrides | None = None
    # The tenant's change-feed endpoints (at most 10).
    webhooks: tuple[Webhook, ...] | None = Field(default=None, max_length=MAX_WEBHOOKS)
    # Overrides pipeline.episodes.pending_retention_days (raw words gone sooner, or later).
    pending_retention_days: int | None = Field(default=None, ge=1)
    # Per-agent overrides, by agent_id.
    agents: dict[str, AgentOverrides] = Field(default_factory=dict)

    _pii = field_validator("allowed_pii")(only_pii)
    _sets = field_serializer("allowed_pii")(_sorted)

    def over(self, base: TenantOverrides | None) -> TenantOverrides:
        """These overrides laid over `base` (the config file's for the same tenant): every
        field set here wins, extraction field by field, agents agent by agent."""
        if base is None:
            return self
        changes: dict[str, Any] = {
            name: value
            for name in type(self).model_fields
            if name not in ("extraction", "agents") and (value := getattr(self, name)) is not None
        }
        extraction = self.extraction
        if base.extraction is not None and extraction is not None:
            extraction = base.extraction.model_copy(
                update={
                    name: value
                    for name in ExtractionOverrides.model_fields
                    if (value := getattr(extraction, name)) is not None
                }
            )
        changes["extraction"] = extraction or base.extraction
        changes["agents"] = {**base.agents, **self.agents}
        return base.model_copy(update=changes)
