"""Pipeline configuration: every knob with its default (docs/design.md §14).

`Settings` is what a deployment loads (a JSON file named by `MEMWRITE_CONFIG`, else defaults);
`Settings.for_request(tenant, agent_id)` gives the effective `PipelineConfig` of one request,
the tenant's overrides (`memwrite.config.tenant_overrides`) laid over the defaults.
"""

from __future__ import annotations

import json
import os
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from memwrite.config.model_limits import ModelConfig, ModelTask, extract_task_moved
from memwrite.config.renamed_keys import renamed_keys, without_retired_keys
from memwrite.config.tenant_overrides import (
    MAX_INSTRUCTIONS_CHARS,
    ExtractionOverrides,
    TenantOverrides,
    TopicDefinition,
    UserSkipPattern,
    normalise_topic_names,
    normalise_topic_terms,
    only_pii,
)
from memwrite.costs.pricing import LIST_PRICES_PER_MTOK, model_family
from memwrite.errors import ConfigError
from memwrite.reasons import SecretKind

__all__ = [
    "BackfillConfig",
    "DedupeConfig",
    "EpisodesConfig",
    "ExtractConfig",
    "FirewallAction",
    "IngestLimits",
    "PipelineConfig",
    "PreFilterConfig",
    "ScoringConfig",
    "SearchConfig",
    "Settings",
    "VerifierConfig",
    "load_settings",
]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class FirewallAction(StrEnum):
    REDACT = "redact"  # mask the secret, keep the rest of the sentence
    BLOCK = "block"  # drop the whole sentence


DEFAULT_FIREWALL_ACTIONS: dict[SecretKind, FirewallAction] = {
    SecretKind.CARD_NUMBER: FirewallAction.REDACT,
    SecretKind.NATIONAL_ID: FirewallAction.REDACT,
    SecretKind.CLOUD_KEY: FirewallAction.REDACT,
    SecretKind.API_TOKEN: FirewallAction.REDACT,
    # A sentence about a password or a private key carries nothing worth remembering.
    SecretKind.PRIVATE_KEY: FirewallAction.BLOCK,
    SecretKind.PASSWORD: FirewallAction.BLOCK,
    SecretKind.IBAN: FirewallAction.REDACT,
    SecretKind.EMAIL: FirewallAction.REDACT,
    SecretKind.PHONE: FirewallAction.REDACT,
}


class PreFilterConfig(_Frozen):
    # A turn of fewer whitespace-separated words is skipped: TooShort.
    min_words: int = Field(default=3, ge=0)
    # Let assistant turns through the role gate (else AssistantTurn).
    extract_from_assistant: bool = False
    # Identical content from the same user within this window: RateLimited; 0 disables.
    rate_limit_window_secs: int = Field(default=60, ge=0)
    # Bound of the in-process LRU of the rate gate (a DynamoDB item holds across instances).
    rate_map_max_entries: int = Field(default=10_000, ge=1)
    # Length limit of the short_meta_request skip rule.
    short_meta_request_max_chars: int = Field(default=20, ge=0)
    # How long a session's last question waits for a short answer; 0: never attached.
    short_answer_window_secs: int = Field(default=86_400, ge=0)
    # A tenant's own skip rules, after the built-in ones.
    user_skip_patterns: tuple[UserSkipPattern, ...] = ()
    # redact or block, per secret or PII kind.
    firewall_actions: dict[SecretKind, FirewallAction] = Field(
        default_factory=lambda: dict(DEFAULT_FIREWALL_ACTIONS)
    )
    allowed_pii: frozenset[SecretKind] = Field(
        default=frozenset(), description="PII kinds (iban, email, phone) kept unmasked."
    )

    _pii = field_validator("allowed_pii")(only_pii)


class IngestLimits(_Frozen):
    # More turns in one POST /v1/turns: 413 naming turns.
    max_turns_per_request: int = Field(default=100, ge=1)
    # A longer turn: 413 naming turns[i].content.
    max_chars_per_turn: int = Field(default=16_000, ge=1)
    # A larger body: 413, checked before it is parsed.
    max_body_bytes: int = Field(default=262_144, ge=1)
    # A larger import body (POST /v1/users/{user_id}/import, `memwrite serve`): 413. On AWS
    # the function's 6 MB request payload caps it, above the 5 MiB an export answers inline.
    max_import_bytes: int = Field(default=67_108_864, ge=1)
    # A longer line of an import (HTTP or `memwrite import`): refused at once, unparsed.
    max_import_line_bytes: int = Field(default=1_048_576, ge=1_024)
    # A turn dated later than receive time + this is refused: it would stay "current" forever.
    max_clock_skew_secs: int = Field(default=86_400, ge=0)


class VerifierConfig(_Frozen):
    """The optional verifier pass after extraction (off by default; a tenant may turn it on).

    Only candidates of at least `min_importance` are re-checked: each check is one model call.
    """

    # Re-check each candidate against the transcript with eight checks (Unverified{check}).
    enabled: bool = False
    # Candidates of lower importance are not re-checked.
    min_importance: float = Field(default=0.0, ge=0, le=1)
    include_rule_candidates: bool = True  # the rule fast-path's candidates are re-checked too
    # Per verifier call.
    max_output_tokens: int = Field(default=1_024, ge=128)


class ExtractConfig(_Frozen):
    # anthropic: the Anthropic API (an API key); bedrock: Claude on Bedrock through the same
    # SDK (IAM); bedrock-converse: any Bedrock model with tool use (Claude, Amazon Nova, Meta
    # Llama, ...) through Bedrock's Converse API (IAM).
    provider: Literal["anthropic", "bedrock", "bedrock-converse"] = "anthropic"
    # A model with an entry in prices_per_mtok (an unpriced model fails at start-up); on
    # Bedrock a model or inference profile id ("us.amazon.nova-lite-v1:0").
    model: str = "claude-haiku-4-5"
    aws_region: str | None = None  # Bedrock only; default: the Lambda's region
    # Output limit of an extraction call, charged to the model budget when the call starts.
    # Measured: the p99 (nearest rank) of the output_tokens of the recorded extraction answers
    # (the extract answers of tests/recorded/anthropic and the run of tests/recorded/runs, 13
    # that ended on end_turn) is 590; 2,048 leaves 3.5 times that for a rich 10-turn batch. A
    # truncated answer is asked again once with twice this (docs/budget.md).
    max_output_tokens: int = Field(default=2_048, ge=256)
    # A session's turns wait in the queue this long after the first is accepted, so that the
    # turns its user sends meanwhile share one model call (0: none wait). Below
    # model.max_wait_s, which the wait counts towards.
    coalesce_window_s: float = Field(default=0.0, ge=0, le=60)
    # Per model call.
    timeout_secs: float = Field(default=60.0, gt=0)
    # The SDK's own retries (429/5xx/timeouts): one; past it the queue does the waiting.
    max_retries: int = Field(default=1, ge=0)
    # Prompt context: the user's active entities.
    max_entities: int = Field(default=30, ge=0)
    # Prompt context: the user's most recent memories.
    max_recent_memories: int = Field(default=15, ge=0)
    # Prompt context: earlier turns of the session (the session log).
    max_source_turns: int = Field(default=20, ge=0)
    # How long a session's logged turns (redacted: the LLM's context) are kept.
    session_log_retention_secs: int = Field(default=2_592_000, ge=1)
    # Each source turn in the prompt is truncated to this many characters.
    max_turn_chars: int = Field(default=2_000, ge=100)
    # The detail pass runs when context + batch hold at least this many messages,
    detail_pass_min_messages: int = Field(default=9, ge=2)
    # and only on windows where it pays: cut_turns, those holding a new turn longer than
    # max_turn_chars (the full pass saw it cut; a window shows it whole: elsewhere a window
    # rereads the full pass's text, docs/design.md §2); long_conversations, every window
    # holding a new turn (the detail pass before issue 30: about 1.65 calls per batch).
    detail_pass: Literal["cut_turns", "long_conversations"] = "cut_turns"
    # Size of one detail-pass window.
    detail_chunk_chars: int = Field(default=10_000, ge=100)
    # Messages shared by consecutive detail-pass windows.
    detail_overlap_messages: int = Field(default=2, ge=0)
    # Detail-pass windows sent at once.
    detail_max_concurrency: int = Field(default=4, ge=1)
    # Confidence ceiling for hypotheticals, role-play, sarcasm (the post-check).
    hypothetical_confidence_cap: float = Field(default=0.3, ge=0, le=1)
    # The optional verifier pass (below).
    verifier: VerifierConfig = VerifierConfig()
    # A tenant's instructions to the model (`ExtractionOverrides.instructions`).
    instructions: str | None = Field(default=None, max_length=MAX_INSTRUCTIONS_CHARS)
    # Topics the model may assign besides its own (`ExtractionOverrides.topics`).
    topics: tuple[TopicDefinition, ...] = ()
    # Only candidates of these topics are kept; unset: all (ExcludedTopic{topic}).
    include_topics: frozenset[str] | None = None
    # Candidates of these topics are dropped (ExcludedTopic{topic}); offline, so are the turns
    # their vocabulary marks (never kept as episodes).
    exclude_topics: frozenset[str] = frozenset()
    # Terms that mark a turn as of a topic, beside the built-in vocabulary
    # (memwrite.topics.vocabularies).
    topic_terms: dict[str, tuple[str, ...]] = Field(default_factory=dict)

    _names = field_validator("include_topics", "exclude_topics")(normalise_topic_names)
    _terms = field_validator("topic_terms")(normalise_topic_terms)
    # USD per million (input, output) tokens, list prices, by model family: dated and Bedrock
    # ids ("us.anthropic.claude-haiku-4-5-20251001-v1:0", "us.amazon.nova-lite-v1:0") map
    # here. Defaults: Claude, Amazon Nova and Meta Llama
    # (memwrite.costs.pricing.LIST_PRICES_PER_MTOK).
    prices_per_mtok: dict[str, tuple[float, float]] = Field(
        default_factory=lambda: dict(LIST_PRICES_PER_MTOK)
    )
    # Minimum cacheable prompt length, in tokens, by model family as prices_per_mtok: a cached
    # prefix shorter than this is not cached, and no error says so (the extractor warns at
    # start-up). The Anthropic docs' values (platform.claude.com/docs/en/build-with-claude/
    # prompt-caching, "Cache limitations"); a family not listed is taken at 4,096, the largest.
    min_cacheable_tokens: dict[str, int] = Field(
        default_factory=lambda: {
            "claude-haiku-4-5": 4_096,
            "claude-opus-4-5": 4_096,
            "claude-opus-4-6": 4_096,
            "claude-sonnet-4-5": 1_024,
            "claude-sonnet-4": 1_024,
            "claude-opus-4-1": 1_024,
            "claude-opus-4": 1_024,
            "claude-3-5-haiku": 2_048,
            "claude-3-haiku": 2_048,
        }
    )


class DedupeConfig(_Frozen):
    # Tier 2's similarity measure, whatever the index's embedder: the band below is calibrated
    # on it (tests/benchmarks/dedupe_band.py). wordllama needs the `local` extra, which the
    # Lambda layer leaves out: the AWS settings choose hashing with its own band (0.92, 0.80).
    embedder: Literal["wordllama", "hashing"] = "wordllama"
    # Tier 2: cosine similarity at or above this merges into the existing memory.
    dedupe_merge_threshold: float = Field(default=0.81, ge=0, le=1)
    # Tier 2: below this the candidate is a new memory; in between, the LLM judge decides.
    dedupe_distinct_threshold: float = Field(default=0.71, ge=0, le=1)
    # Nearest existing memories compared with a candidate.
    neighbours: int = 5

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.dedupe_distinct_threshold > self.dedupe_merge_threshold:
            raise ValueError("dedupe_distinct_threshold must not exceed dedupe_merge_threshold")
        return self


class ScoringConfig(_Frozen):
    """C = sigmoid(logit(E) + a*S + b*K - g*F + d*T - bias), E the extractor's confidence.

    S source weight, K corroboration (extra observations, capped), F 1 when in conflict, T the
    memory type's kind bonus. With the defaults a plain explicit fact (E 0.9) lands in WORKING
    (~0.85), one corroboration lifts it to FACT (~0.94), a hypothetical (E 0.3) stays in
    QUARANTINE (~0.21).
    """

    # S by the request's source.
    source_weights: dict[str, float] = Field(
        default_factory=lambda: {
            "user_explicit": 1.0,
            "group_chat": 0.5,
            "agent_inferred": 0.3,
            "direct": 1.0,
        }
    )
    # T by memory type.
    kind_bonus: dict[str, float] = Field(
        default_factory=lambda: {
            "fact": 1.0,
            "instruction": 1.0,
            "preference": 0.6,
            "decision": 0.6,
            "event": 0.4,
            "task": 0.0,
        }
    )
    # a: weight of the source weight S.
    weight_source: float = 1.0
    # b: weight of corroboration K.
    weight_corroboration: float = 1.0
    # g: weight of the conflict penalty F.
    weight_conflict: float = 2.0
    # d: weight of the kind bonus T.
    weight_kind: float = 0.5
    # Subtracted inside the sigmoid.
    bias: float = 2.0
    # K is capped at this many extra observations.
    max_corroboration: int = Field(default=3, ge=0)
    # Below: QUARANTINE (hidden from search).
    tier_quarantine_below: float = 0.30
    # Below: CANDIDATE (searchable only when asked for).
    tier_candidate_below: float = 0.50
    # At or above: FACT; in between: WORKING.
    tier_fact_at_least: float = 0.90
    # Tasks expire (TTL) after this many days.
    task_ttl_days: int = Field(default=14, ge=1)


# The dimensions each embedder can give, and the one it gives unless told. Titan v2 at 512
# keeps about 99 % of its 1,024-dimension retrieval accuracy (256: 97 %, Amazon's launch post)
# for half the index memory (docs/scale.md, "Index memory").
_EMBEDDING_DIMENSIONS: dict[str, frozenset[int]] = {
    "wordllama": frozenset({64, 128, 256}),
    "hashing": frozenset({384}),
    "bedrock": frozenset({256, 512, 1024}),
}
_DEFAULT_DIMENSIONS = {"wordllama": 256, "hashing": 384, "bedrock": 512}


class SearchConfig(_Frozen):
    # Search's default confidence floor.
    min_confidence: float = 0.4
    # HyPE questions per memory, each embedded beside its text: 3 is where the paraphrase
    # set's recall stops rising (docs/search.md); each is one more vector in the index.
    hype_questions: int = Field(default=3, ge=0, le=5)
    # How a memory's BM25 and kNN ranks are combined: rrf (reciprocal-rank fusion) or min_max
    # (scores min-max normalised, then averaged); OpenSearch runs the same (docs/search.md).
    fusion: Literal["rrf", "min_max"] = "rrf"
    bm25_weight: float = Field(default=0.3, ge=0, le=1)  # the rest goes to the vectors
    # rrf: a hit's share of a list is weight / (rank_constant + rank), for memories and episodes.
    rank_constant: int = Field(default=60, ge=1, le=10_000)
    # Index embeddings: WordLlama offline (static token embeddings packaged in its wheel,
    # never downloaded), hashing (word features, no meaning), Titan Text Embeddings v2 on AWS.
    # The index and every query must use the same one (and dimension).
    embedder: Literal["wordllama", "hashing", "bedrock"] = "wordllama"
    # The Titan model when embedder is bedrock.
    bedrock_model: str = "amazon.titan-embed-text-v2:0"
    # None: the embedder's own (wordllama 256, bedrock 512). wordllama takes 64, 128 or 256
    # (its first dimensions), bedrock 256, 512 or 1024; hashing is always 384. An index made
    # at another size keeps it: set that size, or give the index a new name.
    embedding_dimension: Literal[64, 128, 256, 512, 1024] | None = None
    # Normalise Titan vectors.
    embedding_normalize: bool = True

    @model_validator(mode="after")
    def _dimension_fits_embedder(self) -> Self:
        allowed = _EMBEDDING_DIMENSIONS[self.embedder]
        if self.embedding_dimension is not None and self.embedding_dimension not in allowed:
            raise ValueError(
                f"embedding_dimension {self.embedding_dimension} does not fit embedder "
                f"{self.embedder!r}: one of {sorted(allowed)}"
            )
        return self

    @property
    def dimension(self) -> int:
        """The index's vector dimension: the one set, else the embedder's own."""
        return self.embedding_dimension or _DEFAULT_DIMENSIONS[self.embedder]

    # The embedded index in a file (`memwrite serve`, the local runner): users' kNN vector
    # partitions, and as many users' BM25 postings, it keeps in memory (the least recently
    # searched is reloaded from SQLite when needed again).
    embedded_max_resident_partitions: int = Field(default=256, ge=1)


class EpisodesConfig(_Frozen):
    """`pipeline.episodes` (docs/episodes.md): which turns are kept as episodes, for how long,
    and how episodes rank against memories in search."""

    # deferred: turns extraction deferred (no model, the rules unsure, the model failing);
    # all: every user turn that reached extraction; off: none (a failing model dead-letters).
    keep: Literal["deferred", "all", "off"] = "deferred"
    # Days an extracted episode is kept after its distillation (or its keeping, if extracted
    # then); then expired: DynamoDB TTL, SQLite deletes.
    retention_days: int = Field(default=30, ge=1)
    # Days a pending (undistilled) episode is kept: no word is lost to a clock while no model
    # distils it; a tenant may want raw words gone sooner (`tenants.*.pending_retention_days`).
    pending_retention_days: int = Field(default=365, ge=1)
    # With no model configured, pending episodes this close to their expiry raise a warning:
    # the episodes list, `memwrite serve`'s log, a metric and alarm on AWS.
    expiry_warning_days: int = Field(default=30, ge=1)
    # An episode's fused score is multiplied by this before it is ranked beside memories: a
    # distilled memory of equal relevance comes first, a clearly better episode still wins.
    search_weight: float = Field(default=0.8, ge=0, le=1)
    # How an episode's BM25 and kNN ranks are combined (as `search.fusion`, with its
    # `rank_constant`).
    fusion: Literal["rrf", "min_max"] = "rrf"
    # Episodes are the user's own words, long and unedited: BM25's order leads, and the
    # vectors break its near-ties and add what BM25 missed after its hits (measured with
    # WordLlama: docs/search.md). With the hashing embedder, 1.0: its vectors only add noise.
    bm25_weight: float = Field(default=0.95, ge=0, le=1)

    def expires_at_kept(self, now: float, *, pending: bool) -> int:
        """The expiry of an episode kept at `now`: a pending one keeps until it is distilled
        (or `pending_retention_days`), one extracted at once `retention_days`."""
        days = self.pending_retention_days if pending else self.retention_days
        return int(now) + days * 86_400

    def expires_at_distilled(self, now: float) -> int:
        """The expiry of an episode distilled at `now`: `retention_days` from that day."""
        return int(now) + self.retention_days * 86_400


class BackfillConfig(_Frozen):
    """`pipeline.backfill` (docs/episodes.md): how pending episodes reach the model. `live`
    sends each batch's extraction as a live turn's; `batch` submits them to the provider's
    batch API (the Message Batches API, or Bedrock batch inference through S3) at
    `batch_price_factor` of the list price, and applies each answer when its batch has ended
    (docs/design.md §10)."""

    mode: Literal["live", "batch"] = "live"
    # Extraction requests in one submitted batch (the Message Batches API takes 100,000,
    # Bedrock's default quota 50,000 records per job); more pending episodes: more batches.
    max_batch_requests: int = Field(default=10_000, ge=1, le=100_000)
    # Bedrock's quota of records a job needs at least (100 by default): fewer pending requests
    # wait for the next round. The Message Batches API takes a batch of one.
    bedrock_min_records: int = Field(default=100, ge=1)
    # What a batched call costs, as a fraction of `extract.prices_per_mtok` (both providers
    # bill batches at half the on-demand price).
    batch_price_factor: float = Field(default=0.5, gt=0, le=1)
    # How often `memwrite serve`'s batch worker polls the open batches and submits new ones.
    poll_secs: float = Field(default=60.0, gt=0)
    # Bedrock batch jobs that have not ended after this many hours are stopped (24 to 168).
    bedrock_timeout_hours: int = Field(default=24, ge=24, le=168)


class PipelineConfig(_Frozen):
    pre_filter: PreFilterConfig = PreFilterConfig()
    ingest: IngestLimits = IngestLimits()
    extract: ExtractConfig = ExtractConfig()
    dedupe: DedupeConfig = DedupeConfig()
    scoring: ScoringConfig = ScoringConfig()
    search: SearchConfig = SearchConfig()
    episodes: EpisodesConfig = EpisodesConfig()
    backfill: BackfillConfig = BackfillConfig()
    model: ModelConfig = ModelConfig()

    @model_validator(mode="before")
    @classmethod
    def _renamed_keys(cls, data: Any) -> Any:
        return extract_task_moved(without_retired_keys(renamed_keys(data)))

    @model_validator(mode="after")
    def _task_models(self) -> Self:
        """A task's model without a price fails when the config loads, not after a call; the
        batch lane sends Messages API requests, which Converse does not take."""
        for task, model in self.model.tasks.items():
            if model_family(model) not in self.extract.prices_per_mtok:
                raise ValueError(
                    f"model.tasks.{task}: no price for {model!r} in extract.prices_per_mtok"
                )
        if self.backfill.mode == "batch" and self.extract.provider == "bedrock-converse":
            raise ValueError(
                "backfill.mode batch sends Messages API requests: with extract.provider "
                "bedrock-converse, use mode live (or provider bedrock for Claude)"
            )
        return self

    @model_validator(mode="after")
    def _coalescing_leaves_the_budget_time(self) -> Self:
        # A batch held for its user's next turns would otherwise be deferred on release.
        window = self.extract.coalesce_window_s
        if window > 0 and window >= self.model.max_wait_s:
            raise ValueError(
                f"extract.coalesce_window_s ({window:g}) must be below "
                f"model.max_wait_s ({self.model.max_wait_s:g}): the wait counts towards it"
            )
        return self

    def task_model(self, task: ModelTask) -> str:
        """The model `task` calls: its own (`model.tasks`), else the extraction model."""
        return self.model.tasks.get(task, self.extract.model)


class Settings(_Frozen):
    """A deployment's configuration: defaults, tenant overrides and (locally) API keys."""

    # The deployment's defaults.
    pipeline: PipelineConfig = PipelineConfig()
    # Per-tenant overrides, by tenant id.
    tenants: dict[str, TenantOverrides] = Field(default_factory=dict)
    api_keys: dict[str, str] = Field(
        default_factory=dict,
        description="Local only: API key -> tenant (a deployed one refuses it: `memwrite keys`).",
    )
    # Seconds an authorizer trusts a key table answer (`KEY_CACHE_SECS`; docs/api-keys.md).
    api_key_cache_secs: float = Field(default=30, gt=0)

    def for_request(
        self,
        tenant: str,
        agent_id: str | None = None,
        stored: TenantOverrides | None = None,
    ) -> PipelineConfig:
        """The effective config of one request: defaults, then the tenant's overrides (the
        file's, with the tenant's stored settings laid over them), then the agent's."""
        overrides = self.tenants.get(tenant)
        if stored is not None:
            overrides = stored.over(overrides)
        if overrides is None:
            return self.pipeline
        changes: dict[str, Any] = {
            field: value
            for field in (
                "min_words",
                "rate_limit_window_secs",
                "extract_from_assistant",
                "allowed_pii",
            )
            if (value := getattr(overrides, field)) is not None
        }
        if overrides.user_skip_patterns is not None:
            changes["user_skip_patterns"] = overrides.user_skip_patterns
        agent = overrides.agents.get(agent_id) if agent_id else None
        if agent is not None and agent.extract_from_assistant is not None:
            changes["extract_from_assistant"] = agent.extract_from_assistant
        pre_filter = self.pipeline.pre_filter.model_copy(update=changes)
        verifier_changes = {
            field: value
            for field, value in (
                ("enabled", overrides.verifier_enabled),
                ("min_importance", overrides.verifier_min_importance),
            )
            if value is not None
        }
        extract = self.pipeline.extract
        if verifier_changes:
            verifier = extract.verifier.model_copy(update=verifier_changes)
            extract = extract.model_copy(update={"verifier": verifier})
        if overrides.extraction is not None:
            extract = extract.model_copy(
                update={
                    name: value
                    for name in ExtractionOverrides.model_fields
                    if (value := getattr(overrides.extraction, name)) is not None
                }
            )
        model = self.pipeline.model
        if overrides.model_budget is not None:
            model = model.model_copy(
                update={
                    "tenant_weight": overrides.model_budget.weight,
                    "tenant_limits": overrides.model_budget.limits,
                }
            )
        episodes = self.pipeline.episodes
        if overrides.pending_retention_days is not None:
            episodes = episodes.model_copy(
                update={"pending_retention_days": overrides.pending_retention_days}
            )
        return self.pipeline.model_copy(
            update={
                "pre_filter": pre_filter,
                "extract": extract,
                "model": model,
                "episodes": episodes,
            }
        )

    def verifier_wanted(self) -> bool:
        """Whether any tenant (or the deployment) has the verifier on: only then build it."""
        return self.pipeline.extract.verifier.enabled or any(
            overrides.verifier_enabled for overrides in self.tenants.values()
        )


def _api_keys_from_env(raw: str) -> dict[str, str]:
    """`MEMWRITE_API_KEYS="key1=tenant1,key2=tenant2"`."""
    keys: dict[str, str] = {}
    for pair in filter(None, (part.strip() for part in raw.split(","))):
        key, sep, tenant = pair.partition("=")
        if not sep or not key or not tenant:
            raise ConfigError("MEMWRITE_API_KEYS: expected comma-separated key=tenant pairs")
        keys[key] = tenant
    return keys


def load_settings(environ: dict[str, str] | None = None) -> Settings:
    """Settings from `MEMWRITE_CONFIG` (a JSON file) plus `MEMWRITE_API_KEYS`; defaults if unset."""
    env = os.environ if environ is None else environ
    data: dict[str, Any] = {}
    path = env.get("MEMWRITE_CONFIG")
    if path:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError(f"MEMWRITE_CONFIG={path}: {exc}") from exc
    if raw_keys := env.get("MEMWRITE_API_KEYS"):
        data["api_keys"] = {**data.get("api_keys", {}), **_api_keys_from_env(raw_keys)}
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"invalid configuration: {exc}") from exc
