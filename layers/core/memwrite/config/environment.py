"""The Lambda environment as one pydantic model, validated once at cold start.

Every handler reads its configuration through `LambdaEnvironment.load()`: a missing or empty
variable is a `ConfigError` naming it, raised on the first invocation rather than deep inside a
stage. The local runner sets the same variables (`memwrite_local.runtime.aws`,
`memwrite_local.runtime.embedded`).

`MEMWRITE_BACKEND` picks the stores: `dynamodb` (the default, and what Lambda runs: the tables
and queue named below) or `sqlite` (the embedded mode: one SQLite file under
`MEMWRITE_DATA_DIR`, which then replaces every table and queue variable).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator

from memwrite.config.settings import Settings, load_settings
from memwrite.errors import ConfigError

__all__ = ["Backend", "LambdaEnvironment"]


class Backend(StrEnum):
    DYNAMODB = "dynamodb"
    SQLITE = "sqlite"


_INDEX_FILE = "index.sqlite3"  # the embedded search index's file in `MEMWRITE_DATA_DIR`

_TABLE_FIELDS = (
    "turns_table",
    "spans_table",
    "memories_table",
    "entity_facts_table",
    "entities_table",
    "outbox_table",
)


class LambdaEnvironment(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    backend: Backend = Field(default=Backend.DYNAMODB, alias="MEMWRITE_BACKEND")
    data_dir: Path | None = Field(default=None, alias="MEMWRITE_DATA_DIR")
    # Required with the dynamodb backend (checked below), unused with sqlite.
    turns_table: str = Field(default="", alias="TURNS_TABLE")
    spans_table: str = Field(default="", alias="SPANS_TABLE")
    memories_table: str = Field(default="", alias="MEMORIES_TABLE")
    entity_facts_table: str = Field(default="", alias="ENTITY_FACTS_TABLE")
    entities_table: str = Field(default="", alias="ENTITIES_TABLE")
    outbox_table: str = Field(default="", alias="OUTBOX_TABLE")
    # The authorizer's only: hashes of API keys -> tenant (`memwrite.auth.api_keys`).
    api_keys_table: str | None = Field(default=None, alias="API_KEYS_TABLE", min_length=1)
    # Tenants' stored settings (`GET|PUT /v1/settings`); unset: the config file only.
    tenant_settings_table: str | None = Field(
        default=None, alias="TENANT_SETTINGS_TABLE", min_length=1
    )
    # The model budget's buckets (`memwrite.budget`), for every function that calls the model;
    # unset: its calls are not budgeted.
    budget_table: str | None = Field(default=None, alias="BUDGET_TABLE", min_length=1)
    # Each tenant's usage by the hour (`memwrite.metering`, `GET /v1/usage`), for every function
    # that meters; unset: usage is counted nowhere (its $ per tenant metric still goes out).
    usage_table: str | None = Field(default=None, alias="USAGE_TABLE", min_length=1)
    # How long a function reuses a tenant's stored settings (default: 30 s on DynamoDB, 0 with
    # sqlite, where every handler shares one file and a read costs microseconds).
    settings_cache_secs: float | None = Field(
        default=None, alias="MEMWRITE_SETTINGS_CACHE_SECS", ge=0, le=60
    )
    turn_queue_url: str | None = Field(default=None, alias="TURN_QUEUE_URL")
    # The dispatcher's only: the pipeline state machine it runs each queue batch through.
    pipeline_state_machine_arn: str | None = Field(default=None, alias="PIPELINE_STATE_MACHINE_ARN")
    # Where the local runner's consumer moves dead letters (on AWS: the redrive policy's queue).
    turn_dead_letter_url: str | None = Field(default=None, alias="TURN_DEAD_LETTER_URL")
    # The hype function's only: the environment's EventBridge bus the change feed is published
    # on (`memwrite.adapters.aws.eventbridge`); unset (locally): no bus, webhooks only.
    event_bus_name: str | None = Field(default=None, alias="EVENT_BUS_NAME", min_length=1)
    # The webhook delivery lane's queue (`memwrite.feed.delivery`): hype sends to it, the
    # webhook_delivery function delays failed deliveries on it; unset: none (the sqlite
    # backend keeps it in its database).
    webhook_queue_url: str | None = Field(default=None, alias="WEBHOOK_QUEUE_URL", min_length=1)
    # Where the webhook queue's redrive puts what it gave up on: read by the local runner and
    # the tests (on AWS the operator reads the DLQ).
    webhook_dead_letter_url: str | None = Field(
        default=None, alias="WEBHOOK_DEAD_LETTER_URL", min_length=1
    )
    # The api function's only: where exports too large for one response go
    # (`memwrite.adapters.aws.s3_exports`); unset (locally): every export is answered inline.
    exports_bucket: str | None = Field(default=None, alias="EXPORTS_BUCKET", min_length=1)
    # The api function's only: the function a topic sweep is handed to, invoked asynchronously
    # (the expire function); unset (locally): the sweep runs in the settings request.
    topic_sweep_function: str | None = Field(
        default=None, alias="TOPIC_SWEEP_FUNCTION", min_length=1
    )
    # The backfill function's, with Bedrock in batch mode (`memwrite.adapters.aws.
    # bedrock_batches`): the bucket batch jobs read their input from and write their output
    # to, and the service role Bedrock runs them as.
    batch_bucket_name: str | None = Field(default=None, alias="BATCH_BUCKET", min_length=1)
    batch_role: str | None = Field(default=None, alias="BATCH_ROLE_ARN", min_length=1)
    # The api function's: the backfill function a `POST /v1/users/{user_id}/backfill` is
    # handed to (`memwrite.adapters.aws.lambda_backfill`); unset (locally): `memwrite serve`'s
    # backfill worker runs it. The backfill function fans out to itself, by the name Lambda
    # gives it (`AWS_LAMBDA_FUNCTION_NAME`).
    backfill_function_name: str | None = Field(
        default=None, alias="BACKFILL_FUNCTION_NAME", min_length=1
    )
    lambda_function_name: str | None = Field(
        default=None, alias="AWS_LAMBDA_FUNCTION_NAME", min_length=1
    )
    # Any emulator or a real account's endpoint; unset: the SDK's default for the region.
    aws_endpoint_url: str | None = Field(default=None, alias="AWS_ENDPOINT_URL")
    # Unset: offline (the rule extractor only), unless the provider is Bedrock (IAM).
    anthropic_api_key: SecretStr | None = Field(default=None, alias="ANTHROPIC_API_KEY")
    # On AWS: the name of the Secrets Manager secret holding that key, read at run time by the
    # functions that call the model (`memwrite.adapters.aws.secrets`); never the value.
    anthropic_api_key_secret: str | None = Field(
        default=None, alias="ANTHROPIC_API_KEY_SECRET", min_length=1
    )
    # Every model request and answer written to this directory, as the tests replay them
    # (`memwrite.adapters.anthropic.recording`); unset: nothing is recorded.
    llm_record_dir: Path | None = Field(default=None, alias="MEMWRITE_LLM_RECORD")
    # The search index: OpenSearch when an endpoint is set (https://...; a managed domain signs
    # with "es", Serverless with "aoss"), else the embedded index (`embedded_index_path`).
    opensearch_endpoint: str | None = Field(default=None, alias="OPENSEARCH_ENDPOINT")
    opensearch_index: str = Field(
        default="memwrite-memories", alias="OPENSEARCH_INDEX", min_length=1
    )
    opensearch_service: Literal["es", "aoss"] = Field(default="es", alias="OPENSEARCH_SERVICE")
    index_path: str | None = Field(default=None, alias="MEMWRITE_INDEX_PATH", min_length=1)
    aws_region: str = Field(default="us-east-1", alias="AWS_REGION", min_length=1)
    settings: Settings

    @model_validator(mode="after")
    def _backend_is_complete(self) -> LambdaEnvironment:
        if self.backend is Backend.SQLITE:
            missing = [] if self.data_dir else ["MEMWRITE_DATA_DIR"]
        else:
            fields = type(self).model_fields
            missing = [str(fields[name].alias) for name in _TABLE_FIELDS if not getattr(self, name)]
        if missing:
            raise ValueError(f"{self.backend.value} backend needs {', '.join(missing)}")
        return self

    @classmethod
    def load(cls, environ: Mapping[str, str] | None = None) -> LambdaEnvironment:
        env = dict(os.environ if environ is None else environ)
        try:
            return cls.model_validate({**env, "settings": load_settings(env)})
        except ValidationError as exc:
            problems = ", ".join(
                str(err["loc"][0]) if err["loc"] else err["msg"] for err in exc.errors()
            )
            raise ConfigError(f"invalid Lambda environment: {problems}") from exc

    def sqlite_dir(self) -> Path:
        assert self.data_dir is not None, "validated: the sqlite backend has a data directory"
        return self.data_dir

    def embedded_index_path(self) -> str:
        """`MEMWRITE_INDEX_PATH` if set (a file every handler shares, or ":memory:": this
        process only); else beside the SQLite database with the sqlite backend (it persists
        with the rest of the state), else in memory."""
        if self.index_path:
            return self.index_path
        if self.backend is Backend.SQLITE:
            return str(self.sqlite_dir() / _INDEX_FILE)
        return ":memory:"

    def dead_letter_url(self) -> str:
        if not self.turn_dead_letter_url:
            raise ConfigError("environment variable TURN_DEAD_LETTER_URL is not set")
        return self.turn_dead_letter_url

    def webhook_queue(self) -> str:
        if not self.webhook_queue_url:
            raise ConfigError("environment variable WEBHOOK_QUEUE_URL is not set")
        return self.webhook_queue_url

    def batch_bucket(self) -> str:
        if not self.batch_bucket_name:
            raise ConfigError("environment variable BATCH_BUCKET is not set")
        return self.batch_bucket_name

    def batch_role_arn(self) -> str:
        if not self.batch_role:
            raise ConfigError("environment variable BATCH_ROLE_ARN is not set")
        return self.batch_role

    def queue_url(self) -> str:
        if not self.turn_queue_url:
            raise ConfigError("environment variable TURN_QUEUE_URL is not set")
        return self.turn_queue_url

    def state_machine_arn(self) -> str:
        if not self.pipeline_state_machine_arn:
            raise ConfigError("environment variable PIPELINE_STATE_MACHINE_ARN is not set")
        return self.pipeline_state_machine_arn

    def api_key(self) -> str | None:
        return self.anthropic_api_key.get_secret_value() if self.anthropic_api_key else None
