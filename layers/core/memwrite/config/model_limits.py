"""`pipeline.model`: the model budget's settings, a tenant's part of it (docs/budget.md), and
the model each task calls (`tasks`).

Apart from `memwrite.config.settings` (which reads them as `PipelineConfig.model` and
`TenantOverrides.model_budget`) to keep each module short; `memwrite.budget` charges by them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "ModelBudgetOverrides",
    "ModelConfig",
    "ModelLimits",
    "ModelTask",
    "budget_provider",
    "extract_task_moved",
]

# What the model is called for: extraction, the verifier, the dedupe judge (tier 3), the
# resolve-refs judge and HyPE questions.
ModelTask = Literal["extract", "verify", "dedupe_judge", "resolve_judge", "questions"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ModelLimits(_Frozen):
    """A model's rate limits per minute, as the provider enforces them (a token bucket each)."""

    requests_per_minute: int = Field(ge=1)
    input_tokens_per_minute: int = Field(ge=1)
    output_tokens_per_minute: int = Field(ge=1)


def budget_provider(provider: str) -> str:
    """The provider a model's limits and budget are kept under: Bedrock's Converse API counts
    against the account's Bedrock quotas, as the anthropic SDK's Bedrock client does."""
    return "bedrock" if provider == "bedrock-converse" else provider


def _limits_keys(limits: dict[str, ModelLimits] | None) -> dict[str, ModelLimits] | None:
    """Keys are `provider/model` ("anthropic/claude-haiku-4-5") or `*` (any other model)."""
    for key in limits or {}:
        provider, sep, model = key.partition("/")
        if key != "*" and (not sep or provider not in ("anthropic", "bedrock") or not model):
            raise ValueError(
                f"{key!r}: a limits key is 'anthropic/<model>', 'bedrock/<model>' or *"
            )
    return limits


class ModelBudgetOverrides(_Frozen):
    """A tenant's part of the model budget (tenant settings `model_budget`)."""

    # Its weighted fair share: a tenant of weight w is guaranteed w * model.tenant_share of
    # each model limit; past it, it borrows only capacity others are not using.
    weight: float = Field(default=1.0, gt=0, le=100)
    # Its own limits (by `provider/model` or `*`), on top of its share; unset: its share only.
    limits: dict[str, ModelLimits] | None = None

    _keys = field_validator("limits")(_limits_keys)


# Anthropic's published limits of a large (tier 4) account for a Haiku-class model.
_TIER4_HAIKU = ModelLimits(
    requests_per_minute=4_000,
    input_tokens_per_minute=4_000_000,
    output_tokens_per_minute=800_000,
)


class ModelConfig(_Frozen):
    """`pipeline.model`: the model budget shared by every worker (docs/budget.md).

    Token buckets per (provider, model) and per tenant for requests, input and output tokens
    per minute; a call is charged its input tokens and max_tokens when it starts and refunded
    to its real usage when it ends. Live turns wait in the queue for room up to `max_wait_s`.
    """

    # A model per task (task -> model id, e.g. {"dedupe_judge": "claude-sonnet-4-5"}); a task
    # not named calls the extraction model (pipeline.extract.model), and `extract` names that
    # one (it replaces extract.model). Every model needs a price in extract.prices_per_mtok;
    # all go through extract.provider.
    tasks: dict[ModelTask, str] = Field(default_factory=dict)
    # Off: no bucket is charged (the SDK's retries and the queue are then the only limits).
    budget_enabled: bool = True
    # The account's limits, by `provider/model`; `*` for any model not listed.
    limits: dict[str, ModelLimits] = Field(
        default_factory=lambda: {"anthropic/claude-haiku-4-5": _TIER4_HAIKU, "*": _TIER4_HAIKU}
    )
    # How long a live turn may wait for room, from when it was accepted; then it becomes a
    # pending episode (DeferredBudget{waited_s}). Locally it waits in the queue; on AWS in the
    # state machine (a Wait of its place in line), so under 240 (an Express execution lasts
    # 5 minutes).
    max_wait_s: float = Field(default=120.0, ge=0, le=43_200)
    # Shortest wait between two tries (each try is one extract run: locally a receive of the
    # queue's message, on AWS one Lambda invocation after the state machine's Wait).
    min_retry_delay_s: float = Field(default=5.0, ge=0, le=900)
    # The fraction of each model limit a tenant of weight 1 is guaranteed.
    tenant_share: float = Field(default=0.1, gt=0, le=1)
    # A live call past its tenant's share is admitted only while the model's bucket holds more
    # than this fraction of its capacity: what is left is kept for tenants within their share.
    borrow_floor: float = Field(default=0.2, ge=0, lt=1)
    # Backfill takes only spare capacity: above this fraction (the reserve kept for live calls).
    backfill_floor: float = Field(default=0.5, ge=0, lt=1)
    # Each bucket is split into up to this many items so that no one item is hot on DynamoDB
    # (a shard holds at least 100 requests a minute: small limits use fewer).
    shards: int = Field(default=8, ge=1, le=64)
    # On a 429/529 the budget's limits drop to this fraction of what they were (at most once
    # per `aimd_cooldown_s`), down to `aimd_min_factor`; they recover additively by
    # `aimd_recovery_per_minute` of the limit each minute.
    aimd_decrease: float = Field(default=0.5, gt=0, lt=1)
    aimd_min_factor: float = Field(default=0.05, gt=0, le=1)
    aimd_recovery_per_minute: float = Field(default=0.1, gt=0, le=1)
    aimd_cooldown_s: float = Field(default=5.0, ge=0)
    # The request's tenant's weight and own limits (`model_budget` of its settings; set by
    # `Settings.for_request`, not in a config file).
    tenant_weight: float = Field(default=1.0, gt=0, le=100)
    tenant_limits: dict[str, ModelLimits] | None = None

    _keys = field_validator("limits", "tenant_limits")(_limits_keys)

    def limits_for(self, provider: str, model: str) -> ModelLimits:
        """The limits of one model: its own entry, else `*`, else the tier-4 Haiku limits."""
        return self.limits.get(f"{provider}/{model}") or self.limits.get("*") or _TIER4_HAIKU

    def tenant_limits_for(self, provider: str, model: str) -> ModelLimits | None:
        """The tenant's own limits of one model, if it has any."""
        own = self.tenant_limits or {}
        return own.get(f"{provider}/{model}") or own.get("*")


def extract_task_moved(data: Any) -> Any:
    """`data` (a `pipeline` section) with `model.tasks.extract` moved to `extract.model`: the
    extraction model is one setting for every reader (extraction, the batch lane, the budget)."""
    if not isinstance(data, dict):
        return data
    model: Any = data.get("model") or {}
    tasks = model.get("tasks") if isinstance(model, dict) else getattr(model, "tasks", None)
    if not tasks or "extract" not in tasks:
        return data
    tasks = dict(tasks)
    chosen = tasks.pop("extract")
    extract = data.get("extract", {})
    if isinstance(extract, BaseModel):
        extract = extract.model_copy(update={"model": chosen})
    else:
        extract = {**extract, "model": chosen}
    if isinstance(model, BaseModel):
        model = model.model_copy(update={"tasks": tasks})
    else:
        model = {**model, "tasks": tasks}
    return {**data, "extract": extract, "model": model}
