"""Picks concrete adapters for each handler from the validated Lambda environment: the one
place outside handlers that does.

Everything a builder needs is imported inside it, when the first invocation builds its clients:
a handler's module import pulls in only its own stage (the ingest Lambda never loads the
extractors, numpy or boto3 at import), and tests can set the environment before anything is
built.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memwrite.config import ExtractConfig, Settings
from memwrite.environment import LambdaEnvironment

if TYPE_CHECKING:
    from memwrite.ingest import IngestDeps
    from memwrite.ports import (
        CandidateVerifier,
        DedupeJudge,
        ExtractionLlm,
        MetricsSink,
        PipelineRunner,
        SpanStore,
    )

__all__ = [
    "ApiDeps",
    "DeadLetterDeps",
    "build_api_deps",
    "build_dead_letter_deps",
    "build_llm",
    "build_pipeline_runner",
    "build_stage_deps",
]


@dataclass
class ApiDeps:
    settings: Settings
    ingest: IngestDeps


class _Aws:
    """What every builder shares: the environment, one DynamoDB client, spans and metrics."""

    def __init__(self, env: LambdaEnvironment) -> None:
        from memwrite.adapters.aws_clients import dynamodb_client
        from memwrite.adapters.dynamodb import DynamoSpanStore
        from memwrite.adapters.emf_metrics import EmfMetrics

        self.env = env
        self.dynamodb = dynamodb_client(env.aws_endpoint_url)
        self.spans: SpanStore = DynamoSpanStore(self.dynamodb, env.spans_table)
        self.metrics: MetricsSink = EmfMetrics()


def build_api_deps(environ: Mapping[str, str] | None = None) -> ApiDeps:
    """Adapters for the API Lambdas: DynamoDB tables and the SQS queue named in the environment."""
    from memwrite.adapters.aws_clients import sqs_client
    from memwrite.adapters.dynamodb import DynamoRateStore, DynamoTurnLedger
    from memwrite.adapters.sqs import SqsTurnQueue
    from memwrite.ingest import IngestDeps
    from memwrite.rate_gate import RateGate

    aws = _Aws(LambdaEnvironment.load(environ))
    env, settings = aws.env, aws.env.settings
    ingest = IngestDeps(
        queue=SqsTurnQueue(sqs_client(env.aws_endpoint_url), env.queue_url()),
        ledger=DynamoTurnLedger(aws.dynamodb, env.turns_table),
        spans=aws.spans,
        metrics=aws.metrics,
        rate_gate=RateGate(
            settings.pipeline.prefilter.rate_map_max_entries,
            shared=DynamoRateStore(aws.dynamodb, env.turns_table),
        ),
    )
    return ApiDeps(settings=settings, ingest=ingest)


def build_llm(config: ExtractConfig, api_key: str | None) -> ExtractionLlm | None:
    """The model client, or None offline: Bedrock uses IAM; the API needs ANTHROPIC_API_KEY."""
    if config.provider != "bedrock" and not api_key:
        return None
    from memwrite.adapters.anthropic_llm import AnthropicExtractorClient

    return AnthropicExtractorClient(config, api_key=api_key)


def _has_llm(aws: _Aws) -> bool:
    """Bedrock needs only IAM; the Anthropic API needs a key (without one: offline)."""
    return aws.env.settings.pipeline.extract.provider == "bedrock" or bool(aws.env.api_key())


def _dedupe_judge(aws: _Aws) -> DedupeJudge | None:
    if not _has_llm(aws):
        return None
    from memwrite.adapters.anthropic_dedupe_judge import AnthropicDedupeJudge

    return AnthropicDedupeJudge(aws.env.settings.pipeline.extract, api_key=aws.env.api_key())


def _verifier(aws: _Aws) -> CandidateVerifier | None:
    """Built when some tenant (or the deployment) turns the verifier on and a model is
    reachable; which candidates it checks is per tenant (`Settings.for_request`)."""
    if not aws.env.settings.verifier_wanted() or not _has_llm(aws):
        return None
    from memwrite.adapters.anthropic_verifier import AnthropicVerifier

    return AnthropicVerifier(aws.env.settings.pipeline.extract, api_key=aws.env.api_key())


def _extract(aws: _Aws) -> Any:
    from memwrite.adapters.dynamodb import DynamoSessionLog
    from memwrite.extract import ExtractDeps

    return ExtractDeps(
        spans=aws.spans,
        metrics=aws.metrics,
        session_log=DynamoSessionLog(aws.dynamodb, aws.env.turns_table),
        llm=build_llm(aws.env.settings.pipeline.extract, aws.env.api_key()),
        verifier=_verifier(aws),
    )


def _resolve_refs(aws: _Aws) -> Any:
    from memwrite.adapters.dynamodb import DynamoSessionLog
    from memwrite.adapters.dynamodb_store import DynamoEntityStore
    from memwrite.resolve import ResolveDeps

    judge = None
    if _has_llm(aws):
        from memwrite.adapters.anthropic_judge import AnthropicResolveJudge

        judge = AnthropicResolveJudge(aws.env.settings.pipeline.extract, api_key=aws.env.api_key())
    return ResolveDeps(
        entities=DynamoEntityStore(aws.dynamodb, aws.env.entities_table),
        session_log=DynamoSessionLog(aws.dynamodb, aws.env.turns_table),
        spans=aws.spans,
        metrics=aws.metrics,
        judge=judge,
    )


def _memory_store(aws: _Aws) -> Any:
    from memwrite.adapters.dynamodb_store import DynamoMemoryStore, StoreTables

    env = aws.env
    tables = StoreTables(
        memories=env.memories_table,
        entity_facts=env.entity_facts_table,
        outbox=env.outbox_table,
        turns=env.turns_table,
    )
    return DynamoMemoryStore(aws.dynamodb, tables)


def _dedupe(aws: _Aws) -> Any:
    from memwrite.dedupe import DedupeDeps
    from memwrite.embedder import HashingEmbedder

    return DedupeDeps(
        store=_memory_store(aws),
        embedder=HashingEmbedder(),
        spans=aws.spans,
        metrics=aws.metrics,
        judge=_dedupe_judge(aws),
    )


def _conflict(aws: _Aws) -> Any:
    from memwrite.conflict import ConflictDeps

    return ConflictDeps(store=_memory_store(aws), spans=aws.spans, metrics=aws.metrics)


def _persist(aws: _Aws) -> Any:
    from memwrite.embedder import HashingEmbedder
    from memwrite.persist import PersistDeps

    return PersistDeps(
        store=_memory_store(aws),
        embedder=HashingEmbedder(),
        spans=aws.spans,
        metrics=aws.metrics,
        judge=_dedupe_judge(aws),
    )


_BUILDERS: dict[str, Callable[[_Aws], Any]] = {
    "extract": _extract,
    "resolve_refs": _resolve_refs,
    "dedupe": _dedupe,
    "conflict": _conflict,
    "persist": _persist,
}


def build_stage_deps(stage: str, environ: Mapping[str, str] | None = None) -> tuple[Settings, Any]:
    """The settings and the deps a pipeline stage's `run` takes, from the environment."""
    aws = _Aws(LambdaEnvironment.load(environ))
    return aws.env.settings, _BUILDERS[stage](aws)


def build_pipeline_runner(environ: Mapping[str, str] | None = None) -> PipelineRunner:
    """The dispatcher's state machine client (it needs no table)."""
    from memwrite.adapters.aws_clients import stepfunctions_client
    from memwrite.adapters.stepfunctions import StepFunctionsPipeline

    env = LambdaEnvironment.load(environ)
    return StepFunctionsPipeline(
        stepfunctions_client(env.aws_endpoint_url), env.state_machine_arn()
    )


@dataclass
class DeadLetterDeps:
    spans: SpanStore
    metrics: MetricsSink


def build_dead_letter_deps(environ: Mapping[str, str] | None = None) -> DeadLetterDeps:
    """The failure path's adapters: it writes spans and metrics only."""
    aws = _Aws(LambdaEnvironment.load(environ))
    return DeadLetterDeps(spans=aws.spans, metrics=aws.metrics)
