"""The Lambda environment as one pydantic model, validated once at cold start.

Every handler reads its configuration through `LambdaEnvironment.load()`: a missing or empty
variable is a `ConfigError` naming it, raised on the first invocation rather than deep inside a
stage. The local runner sets the same variables (`memwrite_local.aws`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

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
