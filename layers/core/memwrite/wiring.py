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
from memwrite.errors import ConfigError

if TYPE_CHECKING:
    from memwrite.adapters.opensearch_index import OpenSearchIndex
    from memwrite.ingest import IngestDeps
    from memwrite.ports import (
        CandidateVerifier,
        DedupeJudge,
        Embedder,
        ExtractionLlm,
        MemoryIndex,
        MetricsSink,
        PipelineRunner,
        QuestionGenerator,
        SearchIndexSetup,
        SpanStore,
        TurnLedger,
    )
    from memwrite.query import QueryDeps

__all__ = [
    "ApiDeps",
    "DeadLetterDeps",
    "IndexSetupDeps",
    "QueryApiDeps",
    "build_api_deps",
    "build_dead_letter_deps",
    "build_embedder",
    "build_index",
    "build_index_setup",
    "build_llm",
    "build_pipeline_runner",
    "build_query_deps",
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
        index=_search_index(aws),
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
        index=_search_index(aws),
    )


def _search_index(aws: _Aws) -> MemoryIndex:
    """The search index, read by dedupe for events and tasks already indexed."""
    return build_index(aws.env, build_embedder(aws.env).dimension)


def build_embedder(env: LambdaEnvironment) -> Embedder:
    """The index's embedder: Titan v2 on Bedrock, or the hashing embedder offline."""
    search = env.settings.pipeline.search
    if search.embedder == "bedrock":
        from memwrite.adapters.bedrock_embedder import BedrockEmbedder, bedrock_runtime_client

        return BedrockEmbedder(
            bedrock_runtime_client(env.aws_region, env.aws_endpoint_url),
            model_id=search.bedrock_model,
            dimension=search.embedding_dimension,
            normalize=search.embedding_normalize,
        )
    from memwrite.embedder import HashingEmbedder

    return HashingEmbedder()


def build_index(env: LambdaEnvironment, dimension: int) -> MemoryIndex:
    """OpenSearch when an endpoint is configured, else the embedded index at `index_path`."""
    if env.opensearch_endpoint:
        return _opensearch_index(env, env.opensearch_endpoint, dimension)
    from memwrite.adapters.embedded_index import EmbeddedIndex

    return EmbeddedIndex(env.index_path, dimension=dimension)


def _opensearch_index(env: LambdaEnvironment, endpoint: str, dimension: int) -> OpenSearchIndex:
    from memwrite.adapters.opensearch_index import OpenSearchIndex, signed_client

    client = signed_client(endpoint, env.aws_region, env.opensearch_service)
    return OpenSearchIndex(
        client,
        env.opensearch_index,
        dimension=dimension,
        serverless=env.opensearch_service == "aoss",
    )


@dataclass
class IndexSetupDeps:
    """The deploy-time index step: the index the handlers will use, and its fusion weight."""

    index: SearchIndexSetup
    index_name: str
    bm25_weight: float


def build_index_setup(environ: Mapping[str, str] | None = None) -> IndexSetupDeps:
    """The OpenSearch index of `OPENSEARCH_ENDPOINT`, named and dimensioned exactly as the
    hype and query functions build it (the same environment, the same settings)."""
    env = LambdaEnvironment.load(environ)
    if not env.opensearch_endpoint:
        raise ConfigError("environment variable OPENSEARCH_ENDPOINT is not set")
    index = _opensearch_index(env, env.opensearch_endpoint, build_embedder(env).dimension)
    return IndexSetupDeps(
        index=index,
        index_name=env.opensearch_index,
        bm25_weight=env.settings.pipeline.search.bm25_weight,
    )


def _questions(aws: _Aws) -> QuestionGenerator:
    if _has_llm(aws):
        from memwrite.adapters.anthropic_questions import AnthropicQuestions

        return AnthropicQuestions(aws.env.settings.pipeline.extract, api_key=aws.env.api_key())
    from memwrite.questions import TemplateQuestions

    return TemplateQuestions()


def _hype(aws: _Aws) -> Any:
    from memwrite.adapters.dynamodb_outbox import DynamoOutbox
    from memwrite.hype import HypeDeps

    embedder = build_embedder(aws.env)
    return HypeDeps(
        store=_memory_store(aws),
        index=build_index(aws.env, embedder.dimension),
        embedder=embedder,
        questions=_questions(aws),
        outbox=DynamoOutbox(aws.dynamodb, aws.env.outbox_table),
        spans=aws.spans,
        metrics=aws.metrics,
    )


@dataclass
class QueryApiDeps:
    """The read API: traces (ledger and spans) and search, memories and erasure."""

    settings: Settings
    ledger: TurnLedger
    spans: SpanStore
    query: QueryDeps


def build_query_deps(environ: Mapping[str, str] | None = None) -> QueryApiDeps:
    from memwrite.adapters.dynamodb import DynamoTurnLedger
    from memwrite.adapters.dynamodb_erase import DynamoUserEraser, EraseTables
    from memwrite.query import QueryDeps

    aws = _Aws(LambdaEnvironment.load(environ))
    env = aws.env
    store = _memory_store(aws)
    embedder = build_embedder(env)
    eraser = DynamoUserEraser(
        aws.dynamodb,
        EraseTables(
            memories=env.memories_table,
            entity_facts=env.entity_facts_table,
            entities=env.entities_table,
            outbox=env.outbox_table,
            turns=env.turns_table,
            spans=env.spans_table,
        ),
    )
    query = QueryDeps(
        store=store,
        reader=store,
        index=build_index(env, embedder.dimension),
        embedder=embedder,
        eraser=eraser,
    )
    return QueryApiDeps(
        settings=env.settings,
        ledger=DynamoTurnLedger(aws.dynamodb, env.turns_table),
        spans=aws.spans,
        query=query,
    )


_BUILDERS: dict[str, Callable[[_Aws], Any]] = {
    "extract": _extract,
    "resolve_refs": _resolve_refs,
    "dedupe": _dedupe,
    "conflict": _conflict,
    "persist": _persist,
    "hype": _hype,
}


def build_stage_deps(stage: str, environ: Mapping[str, str] | None = None) -> tuple[Settings, Any]:
    """The settings and the deps a pipeline or stream stage's `run` takes, from the
    environment."""
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
