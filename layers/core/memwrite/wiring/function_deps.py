"""What each function is given: its deps, built from the environment through the backend's
adapters (`memwrite.wiring.backends.Adapters`). A stage's deps are built by its own
`build_deps` (named by its `StageDef`); the functions that are no stage (the API, the
authorizer, the dispatcher, the failure path, backfill, expiry, index setup, webhook delivery)
are built here.

Everything a builder needs is imported inside it, when the first invocation builds its clients:
a handler's module import pulls in only its own stage, and tests can set the environment before
anything is built.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from memwrite.config.environment import Backend, LambdaEnvironment
from memwrite.config.settings import Settings
from memwrite.errors import ConfigError
from memwrite.stages import STAGES, StagePlacement, stage_named
from memwrite.tenants import TenantConfigs
from memwrite.wiring.backends import Adapters
from memwrite.wiring.search import opensearch_index

if TYPE_CHECKING:
    from memwrite.backfill import BackfillDeps, BatchDeps
    from memwrite.backfill.ports import BackfillStarter
    from memwrite.edit.delete import DeleteDeps
    from memwrite.edit.erase import EraseDeps
    from memwrite.edit.ports import TopicSweeps
    from memwrite.edit.rollback import RollbackDeps
    from memwrite.edit.topic_sweep import TopicSweepDeps
    from memwrite.expiry import ExpiryDeps
    from memwrite.feed.delivery import WebhookDeliveryDeps
    from memwrite.index import Fusion
    from memwrite.metering import Metering
    from memwrite.ports import (
        ApiKeyStore,
        ExportSpill,
        MemoryStore,
        MetricsSink,
        PipelineRunner,
        SearchIndexSetup,
        SpanStore,
        TurnConsumer,
        TurnLedger,
        UserPortability,
    )
    from memwrite.pre_filter.stage import IngestDeps
    from memwrite.read.query import QueryDeps
    from memwrite.replay import ReplayDeps

__all__ = [
    "ApiFunctionDeps",
    "DeadLetterDeps",
    "DispatchDeps",
    "IndexSetupDeps",
    "PreFilterFunctionDeps",
    "build_api_function_deps",
    "build_api_key_store",
    "build_api_key_table",
    "build_backfill_deps",
    "build_backfill_starter",
    "build_batch_deps",
    "build_dead_letter_deps",
    "build_dispatch_deps",
    "build_expiry_deps",
    "build_index_setup",
    "build_memory_store",
    "build_metering",
    "build_pre_filter_function_deps",
    "build_queue_consumer",
    "build_replay_deps",
    "build_stage_deps",
    "build_topic_sweep_deps",
    "build_webhook_delivery_deps",
]


@dataclass
class PreFilterFunctionDeps:
    """The pre_filter function's (`POST /v1/turns`, direct memories): stage 1's deps and each
    request's config."""

    settings: Settings
    configs: TenantConfigs
    ingest: IngestDeps
    metering: Metering  # each request's usage: its turns (`GET /v1/usage`)


def build_pre_filter_function_deps(
    environ: Mapping[str, str] | None = None,
) -> PreFilterFunctionDeps:
    """Adapters for the pre_filter function: what the ingest-placed stage declares it needs."""
    (ingest_stage,) = (s for s in STAGES if s.placement is StagePlacement.INGEST)
    adapters = Adapters.of(LambdaEnvironment.load(environ))
    return PreFilterFunctionDeps(
        settings=adapters.settings,
        configs=adapters.configs(ingest_stage),
        ingest=ingest_stage.build_deps(adapters),
        metering=adapters.metering(),
    )


def build_metering(environ: Mapping[str, str] | None = None) -> Metering:
    """Where a function's units of work meter the tenants' usage (`memwrite.metering`): the
    pipeline and stream stages' handlers, beside their deps."""
    return Adapters.of(LambdaEnvironment.load(environ)).metering()


def build_api_key_store(environ: Mapping[str, str] | None = None) -> ApiKeyStore | None:
    """The authorizer's key table: the data directory's with the sqlite backend, the one
    `API_KEYS_TABLE` names on DynamoDB (None when unset: configured keys only)."""
    env = LambdaEnvironment.load(environ)
    if env.backend is Backend.SQLITE:
        from memwrite.adapters.sqlite.api_keys import SqliteApiKeyStore
        from memwrite.adapters.sqlite.database import open_database

        return SqliteApiKeyStore(open_database(env.sqlite_dir()))
    if env.api_keys_table is None:
        return None
    return build_api_key_table(env.api_keys_table, env.aws_endpoint_url)


def build_api_key_table(table_name: str, endpoint_url: str | None = None) -> ApiKeyStore:
    """A deployed environment's key table, for `memwrite keys` (the operator's credentials)."""
    from memwrite.adapters.aws.clients import dynamodb_client
    from memwrite.adapters.aws.dynamodb_api_keys import DynamoApiKeyStore

    return DynamoApiKeyStore(dynamodb_client(endpoint_url), table_name)


def build_queue_consumer(environ: Mapping[str, str] | None = None) -> TurnConsumer:
    """The consuming side of the work queue, for the local runner (on AWS: the event source)."""
    return Adapters.of(LambdaEnvironment.load(environ)).consumer()


def build_memory_store(environ: Mapping[str, str] | None = None) -> MemoryStore:
    """The memory store of the environment's backend, to read what the pipeline stored."""
    return Adapters.of(LambdaEnvironment.load(environ)).memory_store()


@dataclass
class IndexSetupDeps:
    """The deploy-time index step: the index the handlers will use, and memories' fusion."""

    index: SearchIndexSetup
    index_name: str
    fusion: Fusion


def build_index_setup(environ: Mapping[str, str] | None = None) -> IndexSetupDeps:
    """The OpenSearch index of `OPENSEARCH_ENDPOINT`, named and dimensioned exactly as the
    hype and api functions build it (the same environment, the same settings)."""
    env = LambdaEnvironment.load(environ)
    if not env.opensearch_endpoint:
        raise ConfigError("environment variable OPENSEARCH_ENDPOINT is not set")
    from memwrite.read.query import memory_fusion

    index = opensearch_index(env, env.opensearch_endpoint, env.settings.pipeline.search.dimension)
    return IndexSetupDeps(
        index=index,
        index_name=env.opensearch_index,
        fusion=memory_fusion(env.settings.pipeline),
    )


@dataclass
class ApiFunctionDeps:
    """The api function's (every route but the ingest routes): traces (ledger and spans), their
    replay and rollback, search, memories (deletion included) and erasure, export and import,
    backfill, settings."""

    settings: Settings
    # Every route's request config; the settings routes read and write through it.
    configs: TenantConfigs
    ledger: TurnLedger
    spans: SpanStore
    query: QueryDeps
    rollback: RollbackDeps
    delete: DeleteDeps
    erase: EraseDeps
    portability: UserPortability  # export and import
    export_spill: ExportSpill | None  # exports too large to answer inline; None: always inline
    # Built on the first replay, not at cold start: it may load the model client.
    replay: Callable[[], ReplayDeps]
    # Built on the first backfill: every pipeline stage's deps, models included.
    backfill: Callable[[], BackfillDeps]
    backfill_starter: BackfillStarter  # where a backfill is handed (the backfill function)
    # Where a settings change that excludes a topic hands its sweep (docs/reference/api.md).
    topic_sweeps: TopicSweeps
    # Each request's usage (replays' model calls, search queries' embeddings) and the usage
    # report's counters (`GET /v1/usage`).
    metering: Metering


def build_api_function_deps(environ: Mapping[str, str] | None = None) -> ApiFunctionDeps:
    from memwrite.edit.delete import DeleteDeps
    from memwrite.edit.erase import EraseDeps
    from memwrite.edit.rollback import RollbackDeps
    from memwrite.edit.topic_sweep import TopicSweepDeps
    from memwrite.read.query import QueryDeps

    adapters = Adapters.of(LambdaEnvironment.load(environ))
    configs = adapters.configs(writes=True)
    query = QueryDeps(
        store=adapters.memory_store(),
        reader=adapters.memory_reader(),
        index=adapters.search_index(),
        embedder=adapters.embedder(),
        episodes=adapters.episodes(),
        has_model=adapters.extraction_llm() is not None,
    )
    ledger = adapters.ledger()
    rollback = RollbackDeps(
        ledger=ledger,
        spans=adapters.spans,
        store=query.store,
        rollbacks=adapters.rollbacks(),
        index=query.index,
        metrics=adapters.metrics,
        episodes=query.episodes,
    )
    delete = DeleteDeps(
        store=query.store,
        reader=query.reader,
        deletions=adapters.deletions(),
        index=query.index,
        metrics=adapters.metrics,
    )
    sweep_deps = TopicSweepDeps(
        sweeps=adapters.topic_sweep_store(), episodes=adapters.episodes(), delete=delete
    )
    return ApiFunctionDeps(
        settings=adapters.settings,
        configs=configs,
        ledger=ledger,
        spans=adapters.spans,
        query=query,
        rollback=rollback,
        delete=delete,
        erase=EraseDeps(eraser=adapters.eraser(), index=query.index),
        portability=adapters.portability(),
        export_spill=adapters.export_spill(),
        replay=cache(lambda: build_replay_deps(environ)),
        backfill=cache(lambda: build_backfill_deps(environ)),
        backfill_starter=adapters.backfill_starter(),
        topic_sweeps=adapters.topic_sweeps(configs, lambda: sweep_deps),
        metering=adapters.metering(),
    )


def build_backfill_deps(environ: Mapping[str, str] | None = None) -> BackfillDeps:
    """A backfill runs the pipeline stages in-process: their deps, built as their Lambdas
    build them (each once), and whether a model is configured at all."""
    from memwrite.backfill import BackfillDeps

    adapters = Adapters.of(LambdaEnvironment.load(environ))
    built: dict[str, Any] = {}

    def stage_deps(name: str) -> Any:
        if name not in built:
            built[name] = stage_named(name).build_deps(adapters)
        return built[name]

    return BackfillDeps(
        episodes=adapters.episodes(),
        ledger=adapters.ledger(),
        spans=adapters.spans,
        stage_deps=stage_deps,
        has_model=adapters.extraction_llm() is not None,
        # Extraction's settings: the tenant's stored instructions, topics and verifier apply.
        configs=adapters.configs(stage_named("extract")),
        metrics=adapters.metrics,
        metering=adapters.metering(),
    )


def build_backfill_starter(environ: Mapping[str, str] | None = None) -> BackfillStarter:
    """The backfill function's own fan-out: one asynchronous invoke of itself per user."""
    return Adapters.of(LambdaEnvironment.load(environ)).backfill_starter(own=True)


def build_batch_deps(environ: Mapping[str, str] | None = None) -> BatchDeps:
    """The batch lane's (`pipeline.backfill.mode = batch`): the backfill's deps, the
    provider's batch API (None offline: a round refuses, `ModelRequired`, as a live backfill
    does) and the episode store's batch side."""
    from memwrite.backfill import BatchDeps

    adapters = Adapters.of(LambdaEnvironment.load(environ))
    return BatchDeps(
        backfill=build_backfill_deps(environ),
        batches=adapters.model_batches(),
        store=adapters.episode_batches(),
        session_log=adapters.session_log(),
        metrics=adapters.metrics,
        max_requests=adapters.settings.pipeline.backfill.max_batch_requests,
    )


def build_expiry_deps(environ: Mapping[str, str] | None = None) -> ExpiryDeps:
    """The expiry sweep's: the due memories' index, the store it commits to and the search
    index it takes expired documents out of."""
    from memwrite.expiry import ExpiryDeps

    adapters = Adapters.of(LambdaEnvironment.load(environ))
    return ExpiryDeps(
        finder=adapters.expiry_finder(),
        store=adapters.memory_store(),
        index=adapters.search_index(),
    )


def build_topic_sweep_deps(
    environ: Mapping[str, str] | None = None,
) -> tuple[TenantConfigs, TopicSweepDeps]:
    """The topic sweep's (the expire function's, on an asynchronous invocation): the tenants'
    configs (their own topic terms) and what it reads and removes through."""
    from memwrite.edit.delete import DeleteDeps
    from memwrite.edit.topic_sweep import TopicSweepDeps

    adapters = Adapters.of(LambdaEnvironment.load(environ))
    delete = DeleteDeps(
        store=adapters.memory_store(),
        reader=adapters.memory_reader(),
        deletions=adapters.deletions(),
        index=adapters.search_index(),
        metrics=adapters.metrics,
    )
    sweep = TopicSweepDeps(
        sweeps=adapters.topic_sweep_store(), episodes=adapters.episodes(), delete=delete
    )
    # The tenant's stored settings are read (its own topic terms): as the api function does.
    return adapters.configs(writes=True), sweep


def build_replay_deps(environ: Mapping[str, str] | None = None) -> ReplayDeps:
    """What a replay reads the trace from, and the adapters bundle each of its dry runs wraps:
    the stages build their deps from it as their Lambdas do (offline: the rule extractor
    only)."""
    from memwrite.replay import ReplayDeps

    adapters = Adapters.of(LambdaEnvironment.load(environ))
    return ReplayDeps(ledger=adapters.ledger(), adapters=adapters)


def build_stage_deps(
    stage: str, environ: Mapping[str, str] | None = None
) -> tuple[TenantConfigs, Any]:
    """The request configs (with the tenants' stored settings when the stage declares their
    table) and the deps a pipeline or stream stage's `run` takes, from the environment."""
    adapters = Adapters.of(LambdaEnvironment.load(environ))
    definition = stage_named(stage)
    return adapters.configs(definition), definition.build_deps(adapters)


@dataclass
class DispatchDeps:
    """The dispatcher's: the state machine client, and (with `extract.coalesce_window_s`) the
    turn queue, where it hides a batch that waits for its user's next turns."""

    pipeline: PipelineRunner
    coalesce_window_s: float
    queue: TurnConsumer | None


def build_dispatch_deps(environ: Mapping[str, str] | None = None) -> DispatchDeps:
    """The dispatcher's adapters (it needs no table)."""
    from memwrite.adapters.aws.clients import stepfunctions_client
    from memwrite.adapters.aws.stepfunctions import StepFunctionsPipeline

    env = LambdaEnvironment.load(environ)
    window = env.settings.pipeline.extract.coalesce_window_s
    return DispatchDeps(
        pipeline=StepFunctionsPipeline(
            stepfunctions_client(env.aws_endpoint_url), env.state_machine_arn()
        ),
        coalesce_window_s=window,
        queue=Adapters.of(env).consumer() if window > 0 else None,
    )


@dataclass
class DeadLetterDeps:
    spans: SpanStore
    metrics: MetricsSink


def build_dead_letter_deps(environ: Mapping[str, str] | None = None) -> DeadLetterDeps:
    """The failure path's adapters: it writes spans and metrics only."""
    adapters = Adapters.of(LambdaEnvironment.load(environ))
    return DeadLetterDeps(spans=adapters.spans, metrics=adapters.metrics)


def build_webhook_delivery_deps(environ: Mapping[str, str] | None = None) -> WebhookDeliveryDeps:
    """The webhook delivery lane's, built by its own builder (as a stage's are)."""
    from memwrite.feed.delivery import build_deps

    return build_deps(Adapters.of(LambdaEnvironment.load(environ)))
