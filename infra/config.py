"""One validated configuration per environment: the only thing that differs between them."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from memwrite.config.settings import Settings, load_settings
from memwrite.errors import ConfigError

__all__ = [
    "ENVIRONMENTS",
    "AlarmThresholds",
    "ApiPlan",
    "ApiThrottling",
    "EnvConfig",
    "FunctionSize",
    "LlmProvider",
    "SearchConfig",
    "config_for",
    "deployed_settings",
    "settings_file",
]

_SETTINGS = Path(__file__).resolve().parent / "settings"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class FunctionSize(_Frozen):
    # Lambda memory (MB).
    memory_mb: int = Field(ge=128, le=10240)
    # Lambda timeout (s).
    timeout_secs: int = Field(ge=1, le=900)


class LlmProvider(StrEnum):
    ANTHROPIC = "anthropic"  # API key from Secrets Manager
    BEDROCK = "bedrock"  # IAM credentials, no key to manage
    BEDROCK_CONVERSE = "bedrock-converse"  # any Bedrock model through Converse, IAM


class SearchConfig(_Frozen):
    """The OpenSearch Serverless collection; the index and the hybrid search pipeline (named
    `<index_name>-hybrid` by the adapter) are created at deploy time. (A managed domain is not
    built: see the README.)"""

    # OpenSearch Serverless (a managed domain is not built).
    kind: Literal["serverless"] = "serverless"
    # The collection (type SEARCH).
    collection_name: str = Field(pattern=r"^[a-z][a-z0-9-]{2,31}$")
    # The index; the hybrid search pipeline is <index_name>-hybrid.
    index_name: str = "memories"
    standby_replicas: bool = True  # off halves the OCU floor (dev only)


class ApiThrottling(_Frozen):
    """The whole API's ceiling (the stage, every tenant together); API Gateway answers 429
    above it. Each tenant's own limits are its usage plan's (`ApiPlan`)."""

    # Steady requests per second, all methods.
    rate_per_sec: float = Field(gt=0)
    # Burst above the steady rate.
    burst: int = Field(gt=0)


class ApiPlan(_Frozen):
    """One API Gateway usage plan: the limits of each tenant on it, counted per tenant (the
    authorizer names the tenant's usage key). `memwrite keys create` puts a new tenant on the
    first of `EnvConfig.api_plans`, `memwrite keys plan` on another (docs/api-keys.md)."""

    # Steady requests per second of one tenant, all methods.
    rate_per_sec: float = Field(gt=0)
    # Burst above the steady rate.
    burst: int = Field(gt=0)
    # Requests per day of one tenant (None: no daily quota).
    requests_per_day: int | None = Field(default=None, gt=0)


class AlarmThresholds(_Frozen):
    dlq_messages: int = 1  # any dead-lettered turn pages someone
    stage_error_rate_pct: float = 5.0  # Lambda errors / invocations per stage over 5 min
    outbox_lag_secs: int = 300  # age of the oldest outbox record the indexer has not taken
    prefilter_rate_band_stddevs: float = 3.0  # pre-filter rejection-rate anomaly band width
    # Turns deferred for want of model budget (DeferredBudget) in 5 minutes.
    deferred_budget_turns: int = 1
    # Extraction calls in 5 minutes with no prompt-cache read that count as "calls flow while
    # the cache is idle" (CacheReadsIdle): at two, the second could have read the first's write.
    cache_idle_min_calls: int = Field(default=2, ge=2)
    # Pending episodes near their expiry with no model configured (the hourly backfill's count).
    pending_near_expiry_episodes: int = 1
    # Usage the meter could not count (`usage.unmetered`): any is an undercounted bill.
    unmetered_usage: int = 1
    # 5-minute periods an alarm condition must hold.
    evaluation_periods: int = 3


class EnvConfig(_Frozen):
    # The stack is memwrite-<name>; -c env=<name> picks it.
    name: Literal["dev", "staging", "prod"]
    account: str | None = None  # None: the CLI's credentials decide (cdk deploy)
    # None: the CLI's region.
    region: str | None = None
    retain_data: bool  # tables, the collection and the exports bucket outlive a `cdk destroy`
    # CloudWatch Logs retention of every function.
    log_retention: Literal["ONE_WEEK", "TWO_WEEKS", "ONE_MONTH", "THREE_MONTHS", "ONE_YEAR"]
    # Express execution history in CloudWatch Logs.
    state_machine_log_level: Literal["ALL", "ERROR"]
    # The pipeline stage functions.
    stage_size: FunctionSize
    extract_size: FunctionSize  # the LLM call: longer, more memory for the SDK
    # The API's functions (pre_filter, api) and the authorizer.
    api_size: FunctionSize
    # Session batches one execution runs at once (the Map).
    map_concurrency: int = Field(default=10, ge=1, le=40)
    # First Retry interval of a task (backoff 2, full jitter).
    retry_interval_secs: int = Field(default=2, ge=1)
    # Retries of a task's TransientError before the Catch.
    retry_attempts: int = Field(default=4, ge=1)
    # Receives of a turn before the turn queue moves it to TurnsDlq.
    queue_max_receives: int = Field(default=3, ge=1)
    # anthropic (API key secret), bedrock or bedrock-converse (IAM): pipeline.extract.provider.
    llm_provider: LlmProvider
    # Secrets Manager secret of ANTHROPIC_API_KEY (anthropic only).
    anthropic_secret_name: str = "memwrite/anthropic-api-key"
    # The whole API's ceiling, every tenant together (429 above it).
    throttling: ApiThrottling
    # Usage plans by name: each tenant's own request rate and daily quota.
    api_plans: dict[str, ApiPlan] = Field(min_length=1)
    # Alarm thresholds.
    alarms: AlarmThresholds = AlarmThresholds()
    alarm_email: str | None = None  # subscribed to the alarm topic when set
    # The backfill of pending episodes (EventBridge Scheduler -> the backfill function). On:
    # a turn the model could not take becomes an episode, and this is what distils it. A run
    # finds the users with pending episodes through the sparse `pending_episodes` index.
    backfill_schedule_enabled: bool = True
    backfill_schedule: str = "rate(1 hour)"
    # The expiry sweep (EventBridge Scheduler -> the expire function): how soon after a user
    # expiry passes its memory.expired goes out. Always on: a run with nothing due is one
    # query per shard of an index that holds the due memories only.
    expiry_schedule: str = "rate(5 minutes)"
    # The search collection.
    search: SearchConfig

    @property
    def stack_name(self) -> str:
        return f"memwrite-{self.name}"


# dev states every setting; staging and prod state only where they differ from it (`_derive`
# re-validates the result, so a derived environment is checked like a written one).
_DEV = EnvConfig(
    name="dev",
    retain_data=False,
    log_retention="ONE_WEEK",
    state_machine_log_level="ALL",
    stage_size=FunctionSize(memory_mb=512, timeout_secs=60),
    extract_size=FunctionSize(memory_mb=1024, timeout_secs=120),
    api_size=FunctionSize(memory_mb=512, timeout_secs=10),
    map_concurrency=4,
    llm_provider=LlmProvider.ANTHROPIC,
    throttling=ApiThrottling(rate_per_sec=10, burst=20),
    api_plans={"standard": ApiPlan(rate_per_sec=5, burst=10, requests_per_day=50_000)},
    search=SearchConfig(collection_name="memwrite-dev", standby_replicas=False),
)


def _derive(base: EnvConfig, **differences: Any) -> EnvConfig:
    """`base` with `differences` applied, validated again (`model_copy` alone would not)."""
    return EnvConfig.model_validate({**base.model_dump(), **differences})


_STAGING = _derive(
    _DEV,
    name="staging",
    log_retention="ONE_MONTH",
    state_machine_log_level="ERROR",
    api_size=FunctionSize(memory_mb=1024, timeout_secs=10),
    map_concurrency=10,
    llm_provider=LlmProvider.BEDROCK,
    throttling=ApiThrottling(rate_per_sec=50, burst=100),
    api_plans={"standard": ApiPlan(rate_per_sec=20, burst=40)},
    search=SearchConfig(collection_name="memwrite-staging"),
)

_PROD = _derive(
    _STAGING,
    name="prod",
    retain_data=True,
    log_retention="THREE_MONTHS",
    stage_size=FunctionSize(memory_mb=1024, timeout_secs=60),
    # The API's ceiling; each tenant gets its plan's share of it.
    throttling=ApiThrottling(rate_per_sec=2_000, burst=4_000),
    api_plans={
        "standard": ApiPlan(rate_per_sec=100, burst=200),
        "large": ApiPlan(rate_per_sec=1_000, burst=2_000),
    },
    # A large Anthropic account's Haiku-class limits (docs/scale.md).
    alarms=AlarmThresholds(stage_error_rate_pct=2.0, outbox_lag_secs=120),
    search=SearchConfig(collection_name="memwrite-prod"),
)

ENVIRONMENTS: dict[str, EnvConfig] = {config.name: config for config in (_DEV, _STAGING, _PROD)}


def config_for(name: str) -> EnvConfig:
    try:
        return ENVIRONMENTS[name]
    except KeyError:
        raise ValueError(
            f"unknown environment {name!r}; one of: {', '.join(ENVIRONMENTS)}"
        ) from None


def settings_file(name: str) -> Path:
    """The pipeline settings an environment deploys (`MEMWRITE_CONFIG` on every function)."""
    return _SETTINGS / f"{name}.json"


def deployed_settings(name: str) -> Settings:
    """Those settings as the functions will load them (the grants follow the models named).

    Raises `ConfigError` when they name API keys: a deployed environment keeps only hashes of
    its keys, in its key table (`memwrite keys`), never a key in a file of the repository."""
    settings = load_settings({"MEMWRITE_CONFIG": str(settings_file(name))})
    if settings.api_keys:
        raise ConfigError(
            f"{settings_file(name)}: api_keys are for the local mode only; create a deployed "
            "environment's keys with `memwrite keys create --table ...`"
        )
    return settings
