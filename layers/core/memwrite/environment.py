"""The Lambda environment as one pydantic model, validated once at cold start.

Every handler reads its configuration through `LambdaEnvironment.load()`: a missing or empty
variable is a `ConfigError` naming it, raised on the first invocation rather than deep inside a
stage. The local runner sets the same variables (`memwrite_local.aws`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from memwrite.config import Settings, load_settings
from memwrite.errors import ConfigError

__all__ = ["LambdaEnvironment"]


class LambdaEnvironment(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    turns_table: str = Field(alias="TURNS_TABLE", min_length=1)
    spans_table: str = Field(alias="SPANS_TABLE", min_length=1)
    memories_table: str = Field(alias="MEMORIES_TABLE", min_length=1)
    entity_facts_table: str = Field(alias="ENTITY_FACTS_TABLE", min_length=1)
    entities_table: str = Field(alias="ENTITIES_TABLE", min_length=1)
    outbox_table: str = Field(alias="OUTBOX_TABLE", min_length=1)
    turn_queue_url: str | None = Field(default=None, alias="TURN_QUEUE_URL")
    # The dispatcher's only: the pipeline state machine it runs each queue batch through.
    pipeline_state_machine_arn: str | None = Field(default=None, alias="PIPELINE_STATE_MACHINE_ARN")
    # Any emulator or a real account's endpoint; unset: the SDK's default for the region.
    aws_endpoint_url: str | None = Field(default=None, alias="AWS_ENDPOINT_URL")
    # Unset: offline (the rule extractor only), unless the provider is Bedrock (IAM).
    anthropic_api_key: SecretStr | None = Field(default=None, alias="ANTHROPIC_API_KEY")
    # The search index: OpenSearch when an endpoint is set (https://...; a managed domain signs
    # with "es", Serverless with "aoss"), else the embedded index in `index_path` (":memory:":
    # this process only; the local runner names a file every handler shares).
    opensearch_endpoint: str | None = Field(default=None, alias="OPENSEARCH_ENDPOINT")
    opensearch_index: str = Field(
        default="memwrite-memories", alias="OPENSEARCH_INDEX", min_length=1
    )
    opensearch_service: Literal["es", "aoss"] = Field(default="es", alias="OPENSEARCH_SERVICE")
    index_path: str = Field(default=":memory:", alias="MEMWRITE_INDEX_PATH", min_length=1)
    aws_region: str = Field(default="us-east-1", alias="AWS_REGION", min_length=1)
    settings: Settings

    @classmethod
    def load(cls, environ: Mapping[str, str] | None = None) -> LambdaEnvironment:
        env = dict(os.environ if environ is None else environ)
        try:
            return cls.model_validate({**env, "settings": load_settings(env)})
        except ValidationError as exc:
            missing = ", ".join(str(err["loc"][0]) for err in exc.errors())
            raise ConfigError(f"invalid Lambda environment: {missing}") from exc

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
