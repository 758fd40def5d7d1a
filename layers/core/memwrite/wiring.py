"""Picks concrete adapters from the environment: the one place outside handlers that does.

Everything a builder needs is imported inside it, when the first invocation builds its clients:
a handler's module import pulls in only its own stage (the ingest Lambda never loads the
extractors, numpy or boto3 at import), and tests can set the environment before anything is
built.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memwrite.config import ExtractConfig, Settings, load_settings
from memwrite.errors import ConfigError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_sqs.client import SQSClient

    from memwrite.extract import ExtractDeps
    from memwrite.ingest import IngestDeps
    from memwrite.llm_extractor import ExtractionLlm
    from memwrite.resolve_stage import ResolveDeps
    from memwrite.store_stages import StoreStageDeps
    from memwrite.verifier import CandidateVerifier

__all__ = [
    "ApiDeps",
    "ResolveStageDeps",
    "StageDeps",
    "StoreDeps",
    "build_api_deps",
    "build_extract_deps",
    "build_llm",
    "build_resolve_deps",
    "build_store_deps",
    "build_verifier",
]


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
    from memwrite.ingest import IngestDeps
    from memwrite.rate_gate import RateGate

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


def build_verifier(
    settings: Settings, environ: dict[str, str] | os._Environ[str]
) -> CandidateVerifier | None:
    """The verifier when some tenant (or the deployment) turns it on and a model is reachable."""
    config = settings.pipeline.extract
    api_key = environ.get("ANTHROPIC_API_KEY")
    if not settings.verifier_wanted() or (config.provider == "anthropic" and not api_key):
        return None
    from memwrite.adapters.anthropic_verifier import AnthropicVerifier

    return AnthropicVerifier(config, api_key=api_key)


def build_extract_deps(environ: dict[str, str] | None = None) -> StageDeps:
    """Adapters for the extract task: spans and the session log in DynamoDB, the LLM if any."""
    import boto3

    from memwrite.adapters.dynamodb import DynamoSessionLog, DynamoSpanStore
    from memwrite.adapters.emf_metrics import EmfMetrics
    from memwrite.extract import ExtractDeps

    env = os.environ if environ is None else environ
    settings = load_settings(dict(env))
    dynamodb: DynamoDBClient = boto3.client("dynamodb", **_client_kwargs(env))
    extract = ExtractDeps(
        spans=DynamoSpanStore(dynamodb, _required(env, "SPANS_TABLE")),
        metrics=EmfMetrics(),
        session_log=DynamoSessionLog(dynamodb, _required(env, "TURNS_TABLE")),
        llm=build_llm(settings.pipeline.extract, env),
        verifier=build_verifier(settings, env),
    )
    return StageDeps(settings=settings, extract=extract)


@dataclass
class StoreDeps:
    settings: Settings
    stage: StoreStageDeps


def build_store_deps(environ: dict[str, str] | None = None) -> StoreDeps:
    """Adapters for the dedupe, conflict and persist tasks."""
    import boto3

    from memwrite.adapters.dynamodb import DynamoSpanStore
    from memwrite.adapters.dynamodb_store import DynamoMemoryStore, StoreTables
    from memwrite.adapters.emf_metrics import EmfMetrics
    from memwrite.embedder import HashingEmbedder
    from memwrite.persist import PersistDeps
    from memwrite.store_stages import StoreStageDeps

    env = os.environ if environ is None else environ
    settings = load_settings(dict(env))
    dynamodb: DynamoDBClient = boto3.client("dynamodb", **_client_kwargs(env))
    tables = StoreTables(
        memories=_required(env, "MEMORIES_TABLE"),
        entity_facts=_required(env, "ENTITY_FACTS_TABLE"),
        outbox=_required(env, "OUTBOX_TABLE"),
        turns=_required(env, "TURNS_TABLE"),
    )
    config = settings.pipeline.extract
    judge = None
    if config.provider == "bedrock" or env.get("ANTHROPIC_API_KEY"):
        from memwrite.adapters.anthropic_dedupe_judge import AnthropicDedupeJudge

        judge = AnthropicDedupeJudge(config, api_key=env.get("ANTHROPIC_API_KEY"))
    stage = StoreStageDeps(
        persist=PersistDeps(
            store=DynamoMemoryStore(dynamodb, tables), embedder=HashingEmbedder(), judge=judge
        ),
        spans=DynamoSpanStore(dynamodb, _required(env, "SPANS_TABLE")),
        metrics=EmfMetrics(),
    )
    return StoreDeps(settings=settings, stage=stage)


@dataclass
class ResolveStageDeps:
    settings: Settings
    resolve: ResolveDeps


def build_resolve_deps(environ: dict[str, str] | None = None) -> ResolveStageDeps:
    """Adapters for the resolve-refs task: entities, session log, spans, the judge if any."""
    import boto3

    from memwrite.adapters.dynamodb import DynamoSessionLog, DynamoSpanStore
    from memwrite.adapters.dynamodb_store import DynamoEntityStore
    from memwrite.adapters.emf_metrics import EmfMetrics
    from memwrite.resolve_stage import ResolveDeps

    env = os.environ if environ is None else environ
    settings = load_settings(dict(env))
    dynamodb: DynamoDBClient = boto3.client("dynamodb", **_client_kwargs(env))
    config = settings.pipeline.extract
    judge = None
    if config.provider == "bedrock" or env.get("ANTHROPIC_API_KEY"):
        from memwrite.adapters.anthropic_judge import AnthropicResolveJudge

        judge = AnthropicResolveJudge(config, api_key=env.get("ANTHROPIC_API_KEY"))
    resolve = ResolveDeps(
        entities=DynamoEntityStore(dynamodb, _required(env, "ENTITIES_TABLE")),
        session_log=DynamoSessionLog(dynamodb, _required(env, "TURNS_TABLE")),
        spans=DynamoSpanStore(dynamodb, _required(env, "SPANS_TABLE")),
        metrics=EmfMetrics(),
        judge=judge,
    )
    return ResolveStageDeps(settings=settings, resolve=resolve)
