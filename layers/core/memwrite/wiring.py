"""Picks concrete adapters from the environment: the one place outside handlers that does.

boto3 is imported here, lazily, when the first invocation builds its clients: module import of
a handler stays cheap and tests can set the environment before anything is built.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memwrite.config import ExtractConfig, Settings, load_settings
from memwrite.errors import ConfigError
from memwrite.extract import ExtractDeps
from memwrite.ingest import IngestDeps
from memwrite.llm_extractor import ExtractionLlm
from memwrite.rate_gate import RateGate

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_sqs.client import SQSClient

__all__ = ["ApiDeps", "StageDeps", "build_api_deps", "build_extract_deps", "build_llm"]


@dataclass
class ApiDeps:
    settings: Settings
    ingest: IngestDeps


def _required(env: dict[str, str] | os._Environ[str], name: str) -> str:
    value = env.get(name)
    if not value:
        raise ConfigError(f"environment variable {name} is not set")
    return value


def _client_kwargs(env: dict[str, str] | os._Environ[str]) -> dict[str, Any]:
    from botocore.config import Config

    kwargs: dict[str, Any] = {
        # Standard mode retries throttling with backoff before we see an error.
        "config": Config(
            retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=2, read_timeout=5
        ),
    }
    if endpoint := env.get("AWS_ENDPOINT_URL"):
        kwargs["endpoint_url"] = endpoint
    return kwargs


def build_api_deps(environ: dict[str, str] | None = None) -> ApiDeps:
    """Adapters for the API Lambda: DynamoDB tables and the SQS queue named in the environment."""
    import boto3

    from memwrite.adapters.dynamodb import DynamoRateStore, DynamoSpanStore, DynamoTurnLedger
    from memwrite.adapters.emf_metrics import EmfMetrics
    from memwrite.adapters.sqs import SqsTurnQueue

    env = os.environ if environ is None else environ
    settings = load_settings(dict(env))
    dynamodb: DynamoDBClient = boto3.client("dynamodb", **_client_kwargs(env))
    sqs: SQSClient = boto3.client("sqs", **_client_kwargs(env))
    turns_table = _required(env, "TURNS_TABLE")
    ingest = IngestDeps(
        queue=SqsTurnQueue(sqs, _required(env, "TURN_QUEUE_URL")),
        ledger=DynamoTurnLedger(dynamodb, turns_table),
        spans=DynamoSpanStore(dynamodb, _required(env, "SPANS_TABLE")),
        metrics=EmfMetrics(),
        rate_gate=RateGate(
            settings.pipeline.prefilter.rate_map_max_entries,
            shared=DynamoRateStore(dynamodb, turns_table),
        ),
    )
    return ApiDeps(settings=settings, ingest=ingest)


@dataclass
class StageDeps:
    settings: Settings
    extract: ExtractDeps


def build_llm(
    config: ExtractConfig, environ: dict[str, str] | os._Environ[str]
) -> ExtractionLlm | None:
    """The model client, or None offline: Bedrock uses IAM; the API needs ANTHROPIC_API_KEY."""
    api_key = environ.get("ANTHROPIC_API_KEY")
    if config.provider == "anthropic" and not api_key:
        return None
    from memwrite.adapters.anthropic_llm import AnthropicExtractorClient

    return AnthropicExtractorClient(config, api_key=api_key)


def build_extract_deps(environ: dict[str, str] | None = None) -> StageDeps:
    """Adapters for the extract task: spans and the session log in DynamoDB, the LLM if any."""
    import boto3

    from memwrite.adapters.dynamodb import DynamoSessionLog, DynamoSpanStore
    from memwrite.adapters.emf_metrics import EmfMetrics

    env = os.environ if environ is None else environ
    settings = load_settings(dict(env))
    dynamodb: DynamoDBClient = boto3.client("dynamodb", **_client_kwargs(env))
    extract = ExtractDeps(
        spans=DynamoSpanStore(dynamodb, _required(env, "SPANS_TABLE")),
        metrics=EmfMetrics(),
        session_log=DynamoSessionLog(dynamodb, _required(env, "TURNS_TABLE")),
        llm=build_llm(settings.pipeline.extract, env),
    )
    return StageDeps(settings=settings, extract=extract)
