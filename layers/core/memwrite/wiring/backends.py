"""The adapters of each backend: `Adapters.of(env)` picks DynamoDB/SQS or SQLite for every store
and the queue at once (`MEMWRITE_BACKEND`), and, from the settings, the model clients, the
embedder and the search index. A stage's `build_deps` asks the bundle for what it uses
(`memwrite.ports.StageAdapters`); `memwrite.wiring.function_deps` gives each function its deps
from it.

Every adapter is imported inside the method that builds it, when the first invocation does:
a handler's module import loads no SDK (the pre_filter Lambda never loads the extractors, numpy
or boto3 at import), and tests can set the environment before anything is built.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar

from memwrite.config.environment import Backend, LambdaEnvironment
from memwrite.config.model_limits import ModelTask
from memwrite.config.settings import ExtractConfig, Settings
from memwrite.schema import TENANT_SETTINGS
from memwrite.tenants import SETTINGS_CACHE_SECS, TenantConfigs
from memwrite.wiring.search import build_embedder, build_index, offline_embedder

if TYPE_CHECKING:
    from pathlib import Path

    from memwrite.adapters.anthropic.client import ClientOptions
    from memwrite.adapters.aws.bedrock_converse import ConverseOptions
    from memwrite.adapters.aws.dynamodb_store import DynamoMemoryStore, StoreTables
    from memwrite.adapters.in_memory import InMemoryBackfillJobs
    from memwrite.adapters.sqlite.queue import SqliteTurnQueue
    from memwrite.adapters.sqlite.store import SqliteMemoryStore
    from memwrite.backfill.ports import BackfillStarter, EpisodeBatches, ModelBatches
    from memwrite.budget import BudgetStore, ModelBudget
    from memwrite.edit.ports import MemoryDeletion, TopicSweeps, TopicSweepStore
    from memwrite.edit.topic_sweep import TopicSweepDeps
    from memwrite.metering import Metering, UsageMeter
    from memwrite.model_ports import (
        CandidateVerifier,
        DedupeJudge,
        Embedder,
        ExtractionLlm,
        QuestionGenerator,
        ResolveJudge,
    )
    from memwrite.ports import (
        EntityStore,
        EpisodeStore,
        EventPublisher,
        ExpiryFinder,
        ExportSpill,
        MemoryIndex,
        MemoryReader,
        MemoryStore,
        MetricsSink,
        Outbox,
        RateStore,
        SessionLog,
        SpanStore,
        TenantSettingsStore,
        TraceRollback,
        TurnConsumer,
        TurnLedger,
        TurnQueue,
        UserEraser,
        UserPortability,
        WebhookQueue,
    )
    from memwrite.stages import StageDef

__all__ = [
    "Adapters",
    "build_llm",
    "local_backfill_jobs",
]

_T = TypeVar("_T")


class Adapters(ABC):
    """What every builder shares (the environment, spans, metrics), the stores of one backend
    and the model clients of the deployment: a stage's `build_deps` asks for what it uses
    (`memwrite.ports.StageAdapters`), nothing else is created. The model clients and the index
    are built once per bundle: builders that ask again (a backfill's stages, every dry run of
    a replay) share them."""

    def __init__(self, env: LambdaEnvironment) -> None:
        from memwrite.adapters.aws.emf_metrics import EmfMetrics

        self.env = env
        self.metrics: MetricsSink = EmfMetrics()
        self._kept: dict[str, Any] = {}

    def _once(self, name: str, build: Callable[[], _T]) -> _T:
        """`build()` on the first call for `name`, then the same object."""
        if name not in self._kept:
            self._kept[name] = build()
        kept: _T = self._kept[name]
        return kept

    @staticmethod
    def of(env: LambdaEnvironment) -> Adapters:
        return _SqliteAdapters(env) if env.backend is Backend.SQLITE else _DynamoAdapters(env)

    @property
    def settings(self) -> Settings:
        return self.env.settings

    def _api_key(self) -> str | None:
        """The model's API key: from Secrets Manager at run time on AWS (the environment names
        the secret), else the local environment's `ANTHROPIC_API_KEY`."""
        if self.env.anthropic_api_key_secret:
            from memwrite.adapters.aws.secrets import read_secret

            return read_secret(self.env.anthropic_api_key_secret)
        return self.env.api_key()

    def _has_llm(self) -> bool:
        """Bedrock needs only IAM; the Anthropic API needs a key (without one: offline)."""
        return self.settings.pipeline.extract.provider != "anthropic" or bool(self._api_key())

    def _converse(self) -> bool:
        """Every model call goes through Bedrock's Converse API (`bedrock_converse`)."""
        return self.settings.pipeline.extract.provider == "bedrock-converse"

    def extraction_llm(self) -> ExtractionLlm | None:
        return self._once(
            "extraction_llm",
            lambda: build_llm(
                self.settings.pipeline.extract,
                self._api_key(),
                self.env.llm_record_dir,
                budget=self.model_budget(),
                converse=self._converse_options() if self._converse() else None,
            ),
        )

    def _task_config(self, task: ModelTask) -> ExtractConfig:
        """The extraction model's settings with `task`'s own model (`pipeline.model.tasks`)."""
        pipeline = self.settings.pipeline
        return pipeline.extract.model_copy(update={"model": pipeline.task_model(task)})

    def _converse_options(self) -> ConverseOptions:
        """What every Converse adapter is given: one `bedrock-runtime` client for all of them
        and the model budget."""
        from memwrite.adapters.aws.bedrock_converse import converse_runtime_client

        extract = self.settings.pipeline.extract
        client = self._once(
            "bedrock_runtime",
            lambda: converse_runtime_client(
                extract,
                aws_region=extract.aws_region or self.env.aws_region,
                endpoint_url=self.env.aws_endpoint_url,
            ),
        )
        return {"client": client, "budget": self.model_budget()}

    def _llm_options(self) -> ClientOptions:
        """What every model adapter is given: the key, where to record (if anywhere) and the
        model budget its calls are charged to."""
        return {
            "api_key": self._api_key(),
            "record_dir": self.env.llm_record_dir,
            "budget": self.model_budget(),
        }

    def model_budget(self) -> ModelBudget | None:
        """The model budget every model client of this bundle charges (`pipeline.model`),
        built once; None when it is turned off or has no store (DynamoDB without
        `BUDGET_TABLE`)."""
        return self._once("model_budget", self._model_budget)

    def _model_budget(self) -> ModelBudget | None:
        config = self.settings.pipeline.model
        store = self.budget_store() if config.budget_enabled else None
        if store is None:
            return None
        from memwrite.budget import ModelBudget

        return ModelBudget(config, store)

    def verifier(self) -> CandidateVerifier | None:
        """Built when some tenant (or the deployment) turns the verifier on and a model is
        reachable; which candidates it checks is per tenant (`Settings.for_request`)."""
        return self._once("verifier", self._verifier)

    def _verifier(self) -> CandidateVerifier | None:
        # A tenant may turn it on through the API: with stored settings, always built.
        wanted = self.settings.verifier_wanted() or self._stores_tenant_settings()
        if not wanted or not self._has_llm():
            return None
        config = self._task_config("verify")
        if self._converse():
            from memwrite.adapters.aws.bedrock_converse import ConverseVerifier

            return ConverseVerifier(config, **self._converse_options())
        from memwrite.adapters.anthropic.verifier import AnthropicVerifier

        return AnthropicVerifier(config, **self._llm_options())

    def resolve_judge(self) -> ResolveJudge | None:
        return self._once("resolve_judge", self._resolve_judge)

    def _resolve_judge(self) -> ResolveJudge | None:
        if not self._has_llm():
            return None
        # The stage names the model of each call (`PipelineConfig.task_model`).
        config = self._task_config("resolve_judge")
        if self._converse():
            from memwrite.adapters.aws.bedrock_converse import ConverseResolveJudge

            return ConverseResolveJudge(config, **self._converse_options())
        from memwrite.adapters.anthropic.resolve_judge import AnthropicResolveJudge

        return AnthropicResolveJudge(config, **self._llm_options())

    def dedupe_judge(self) -> DedupeJudge | None:
        return self._once("dedupe_judge", self._dedupe_judge)

    def _dedupe_judge(self) -> DedupeJudge | None:
        if not self._has_llm():
            return None
        config = self._task_config("dedupe_judge")
        if self._converse():
            from memwrite.adapters.aws.bedrock_converse import ConverseDedupeJudge

            return ConverseDedupeJudge(config, **self._converse_options())
        from memwrite.adapters.anthropic.dedupe_judge import AnthropicDedupeJudge

        return AnthropicDedupeJudge(config, **self._llm_options())

    def questions(self) -> QuestionGenerator:
        config = self._task_config("questions")
        if self._has_llm() and self._converse():
            from memwrite.adapters.aws.bedrock_converse import ConverseQuestions

            return ConverseQuestions(config, **self._converse_options())
        if self._has_llm():
            from memwrite.adapters.anthropic.questions import AnthropicQuestions

            return AnthropicQuestions(config, **self._llm_options())
        from memwrite.adapters.template_questions import TemplateQuestions

        return TemplateQuestions()

    def embedder(self) -> Embedder:
        """The index's embedder, built once (`build_embedder`), each text it embeds counted
        on the tenant's usage."""
        from memwrite.metering import MeteredEmbedder

        return self._once("embedder", lambda: MeteredEmbedder(build_embedder(self.env)))

    def metering(self) -> Metering:
        """Where the tenants' usage goes (`memwrite.metering`), built once."""
        from memwrite.metering import Metering

        return self._once("metering", lambda: Metering(self.usage_meter(), self.metrics))

    @abstractmethod
    def usage_meter(self) -> UsageMeter | None: ...

    def similarity_embedder(self) -> Embedder:
        """Dedupe's embedder (`pipeline.dedupe.embedder`), built once."""
        return self._once(
            "similarity_embedder",
            lambda: offline_embedder(self.settings.pipeline.dedupe.embedder, None),
        )

    def search_index(self) -> MemoryIndex:
        return self._once("search_index", lambda: build_index(self.env, self.embedder().dimension))

    def _stores_tenant_settings(self) -> bool:
        return self.env.backend is Backend.SQLITE or self.env.tenant_settings_table is not None

    def configs(self, stage: StageDef | None = None, *, writes: bool = False) -> TenantConfigs:
        """The request configs of a function: with the tenants' stored settings when it may
        read them (`stage` declares the table, or `writes`: the api function)."""
        readable = writes or (stage is not None and TENANT_SETTINGS.logical_name in stage.tables)
        return self._configs(readable=readable)

    def tenant_webhooks(self) -> TenantConfigs:
        """The tenants' webhooks, for hype (its StageDef declares `tenant_settings` read, which
        grants the read on AWS) and the webhook delivery lane (`infra/access.py`)."""
        return self._configs(readable=True)

    def event_publisher(self) -> EventPublisher | None:
        """The change feed's EventBridge bus, when the environment names one (on AWS, the hype
        function's `EVENT_BUS_NAME`); locally there is none and events go to webhooks only."""
        if self.env.event_bus_name is None:
            return None
        from memwrite.adapters.aws.clients import events_client
        from memwrite.adapters.aws.eventbridge import EventBridgePublisher

        return EventBridgePublisher(
            events_client(self.env.aws_endpoint_url), self.env.event_bus_name
        )

    def export_spill(self) -> ExportSpill | None:
        """Where large exports go, when the environment names an exports bucket (on AWS, the
        api function's `EXPORTS_BUCKET`); locally there is none and exports stay inline."""
        if self.env.exports_bucket is None:
            return None
        from memwrite.adapters.aws.clients import s3_client
        from memwrite.adapters.aws.s3_exports import S3ExportSpill

        return S3ExportSpill(s3_client(self.env.aws_endpoint_url), self.env.exports_bucket)

    def backfill_starter(self, *, own: bool = False) -> BackfillStarter:
        """Where a user's backfill is handed: the backfill function (the api function's
        `BACKFILL_FUNCTION_NAME`; with `own`, the backfill function itself, fanning out) by
        an asynchronous invoke, else this process's backfill jobs (`memwrite serve`)."""
        name = self.env.lambda_function_name if own else self.env.backfill_function_name
        if name is None:
            return local_backfill_jobs()
        from memwrite.adapters.aws.clients import lambda_client
        from memwrite.adapters.aws.lambda_backfill import LambdaBackfillStarter

        return LambdaBackfillStarter(lambda_client(self.env.aws_endpoint_url), name)

    def model_batches(self) -> ModelBatches | None:
        """The batch lane's provider (`pipeline.backfill.mode = batch`): the Message Batches
        API, or Bedrock batch inference through the environment's batch bucket when the
        provider is Bedrock; None offline."""
        return self._once("model_batches", self._model_batches)

    def _model_batches(self) -> ModelBatches | None:
        if not self._has_llm():
            return None
        extract = self.settings.pipeline.extract
        backfill = self.settings.pipeline.backfill
        if extract.provider == "anthropic":
            from memwrite.adapters.anthropic.batches import AnthropicMessageBatches

            return AnthropicMessageBatches(
                extract, price_factor=backfill.batch_price_factor, **self._llm_options()
            )
        from memwrite.adapters.aws.bedrock_batches import BedrockBatchInference, BedrockJobs
        from memwrite.adapters.aws.clients import bedrock_client, s3_client

        endpoint = self.env.aws_endpoint_url
        jobs = BedrockJobs(
            bedrock=bedrock_client(extract.aws_region or self.env.aws_region, endpoint),
            s3=s3_client(endpoint),
            bucket=self.env.batch_bucket(),
            role_arn=self.env.batch_role_arn(),
        )
        return BedrockBatchInference(extract, backfill, jobs)

    @abstractmethod
    def episode_batches(self) -> EpisodeBatches:
        """Which episodes are in which provider batch: the episode store's other side."""

    def _configs(self, *, readable: bool) -> TenantConfigs:
        store = self.tenant_settings() if readable else None
        cache_secs = self.env.settings_cache_secs
        if cache_secs is None:
            cache_secs = 0.0 if self.env.backend is Backend.SQLITE else SETTINGS_CACHE_SECS
        return TenantConfigs(self.settings, store, cache_secs=cache_secs)

    @abstractmethod
    def tenant_settings(self) -> TenantSettingsStore | None: ...

    @abstractmethod
    def budget_store(self) -> BudgetStore | None: ...

    @property
    @abstractmethod
    def spans(self) -> SpanStore: ...

    @abstractmethod
    def ledger(self) -> TurnLedger: ...

    @abstractmethod
    def rate_store(self) -> RateStore: ...

    @abstractmethod
    def queue(self) -> TurnQueue: ...

    @abstractmethod
    def consumer(self) -> TurnConsumer: ...

    @abstractmethod
    def session_log(self) -> SessionLog: ...

    @abstractmethod
    def episodes(self) -> EpisodeStore: ...

    @abstractmethod
    def entities(self) -> EntityStore: ...

    @abstractmethod
    def memory_store(self) -> MemoryStore: ...

    @abstractmethod
    def memory_reader(self) -> MemoryReader: ...

    @abstractmethod
    def expiry_finder(self) -> ExpiryFinder: ...

    @abstractmethod
    def outbox(self) -> Outbox: ...

    @abstractmethod
    def webhook_queue(self) -> WebhookQueue: ...

    @abstractmethod
    def eraser(self) -> UserEraser: ...

    @abstractmethod
    def rollbacks(self) -> TraceRollback: ...

    @abstractmethod
    def deletions(self) -> MemoryDeletion: ...

    @abstractmethod
    def topic_sweep_store(self) -> TopicSweepStore: ...

    def topic_sweeps(
        self, configs: TenantConfigs, deps: Callable[[], TopicSweepDeps]
    ) -> TopicSweeps:
        """The expire function, invoked asynchronously, where the deployment names it
        (`TOPIC_SWEEP_FUNCTION`, on AWS); else the sweep runs in the request."""
        if self.env.topic_sweep_function is not None:
            from memwrite.adapters.aws.clients import lambda_client
            from memwrite.adapters.aws.lambda_jobs import LambdaTopicSweeps

            client = lambda_client(self.env.aws_endpoint_url)
            return LambdaTopicSweeps(client, self.env.topic_sweep_function)
        from memwrite.edit.topic_sweep import InlineTopicSweeps

        return InlineTopicSweeps(configs, deps)

    @abstractmethod
    def portability(self) -> UserPortability: ...


class _DynamoAdapters(Adapters):
    """The tables and queue named in the environment (AWS, moto or any emulator)."""

    def __init__(self, env: LambdaEnvironment) -> None:
        from memwrite.adapters.aws.clients import dynamodb_client
        from memwrite.adapters.aws.dynamodb_ledger import DynamoSpanStore

        super().__init__(env)
        self.dynamodb = dynamodb_client(env.aws_endpoint_url)
        self._spans = DynamoSpanStore(self.dynamodb, env.spans_table)

    @property
    def spans(self) -> SpanStore:
        return self._spans

    def tenant_settings(self) -> TenantSettingsStore | None:
        if self.env.tenant_settings_table is None:
            return None
        from memwrite.adapters.aws.dynamodb_tenant_settings import DynamoTenantSettingsStore

        return DynamoTenantSettingsStore(self.dynamodb, self.env.tenant_settings_table)

    def budget_store(self) -> BudgetStore | None:
        if self.env.budget_table is None:
            return None
        from memwrite.adapters.aws.dynamodb_budget import DynamoBudgetStore

        return DynamoBudgetStore(self.dynamodb, self.env.budget_table)

    def usage_meter(self) -> UsageMeter | None:
        if self.env.usage_table is None:
            return None
        from memwrite.adapters.aws.dynamodb_usage import DynamoUsageMeter

        return DynamoUsageMeter(self.dynamodb, self.env.usage_table)

    def ledger(self) -> TurnLedger:
        from memwrite.adapters.aws.dynamodb_ledger import DynamoTurnLedger

        return DynamoTurnLedger(self.dynamodb, self.env.turns_table)

    def rate_store(self) -> RateStore:
        from memwrite.adapters.aws.dynamodb_ledger import DynamoRateStore

        return DynamoRateStore(self.dynamodb, self.env.turns_table)

    def queue(self) -> TurnQueue:
        from memwrite.adapters.aws.clients import sqs_client
        from memwrite.adapters.aws.sqs import SqsTurnQueue

        return SqsTurnQueue(sqs_client(self.env.aws_endpoint_url), self.env.queue_url())

    def consumer(self) -> TurnConsumer:
        from memwrite.adapters.aws.clients import sqs_client
        from memwrite.adapters.aws.sqs import SqsTurnConsumer

        client = sqs_client(self.env.aws_endpoint_url)
        return SqsTurnConsumer(client, self.env.queue_url(), self.env.dead_letter_url())

    def session_log(self) -> SessionLog:
        from memwrite.adapters.aws.dynamodb_ledger import DynamoSessionLog

        return DynamoSessionLog(self.dynamodb, self.env.turns_table, self.env.outbox_table or None)

    def episodes(self) -> EpisodeStore:
        from memwrite.adapters.aws.dynamodb_episodes import DynamoEpisodeStore

        return DynamoEpisodeStore(self.dynamodb, self.env.turns_table)

    def episode_batches(self) -> EpisodeBatches:
        from memwrite.adapters.aws.dynamodb_episodes import DynamoEpisodeStore

        return DynamoEpisodeStore(self.dynamodb, self.env.turns_table)

    def entities(self) -> EntityStore:
        from memwrite.adapters.aws.dynamodb_store import DynamoEntityStore

        return DynamoEntityStore(self.dynamodb, self.env.entities_table, self.env.turns_table)

    def _store_tables(self) -> StoreTables:
        from memwrite.adapters.aws.dynamodb_store import StoreTables

        env = self.env
        return StoreTables(
            memories=env.memories_table,
            entity_facts=env.entity_facts_table,
            outbox=env.outbox_table,
            turns=env.turns_table,
        )

    def memory_store(self) -> DynamoMemoryStore:
        from memwrite.adapters.aws.dynamodb_store import DynamoMemoryStore

        return DynamoMemoryStore(self.dynamodb, self._store_tables())

    def memory_reader(self) -> MemoryReader:
        return self.memory_store()

    def expiry_finder(self) -> ExpiryFinder:
        from memwrite.adapters.aws.dynamodb_expiry import DynamoExpiryFinder

        return DynamoExpiryFinder(self.dynamodb, self.env.memories_table)

    def outbox(self) -> Outbox:
        from memwrite.adapters.aws.dynamodb_outbox import DynamoOutbox

        return DynamoOutbox(self.dynamodb, self.env.outbox_table)

    def webhook_queue(self) -> WebhookQueue:
        from memwrite.adapters.aws.clients import sqs_client
        from memwrite.adapters.aws.sqs_webhooks import SqsWebhookQueue

        client, env = sqs_client(self.env.aws_endpoint_url), self.env
        return SqsWebhookQueue(client, env.webhook_queue(), env.webhook_dead_letter_url)

    def eraser(self) -> UserEraser:
        from memwrite.adapters.aws.dynamodb_erase import DynamoUserEraser, EraseTables

        env = self.env
        tables = EraseTables(
            memories=env.memories_table,
            entity_facts=env.entity_facts_table,
            entities=env.entities_table,
            outbox=env.outbox_table,
            turns=env.turns_table,
            spans=env.spans_table,
        )
        return DynamoUserEraser(self.dynamodb, tables)

    def rollbacks(self) -> TraceRollback:
        from memwrite.adapters.aws.dynamodb_rollback import DynamoTraceRollback

        return DynamoTraceRollback(self.dynamodb, self._store_tables(), self.env.spans_table)

    def deletions(self) -> MemoryDeletion:
        from memwrite.adapters.aws.dynamodb_delete import DynamoMemoryDeletion

        return DynamoMemoryDeletion(self.dynamodb, self._store_tables(), self.env.spans_table)

    def topic_sweep_store(self) -> TopicSweepStore:
        from memwrite.adapters.aws.dynamodb_topic_sweep import DynamoTopicSweepStore

        env = self.env
        return DynamoTopicSweepStore(
            self.dynamodb,
            memories_table=env.memories_table,
            turns_table=env.turns_table,
            outbox_table=env.outbox_table,
        )

    def portability(self) -> UserPortability:
        from memwrite.adapters.aws.dynamodb_portability import (
            DynamoPortability,
            PortabilityTables,
        )

        env = self.env
        tables = PortabilityTables(
            memories=env.memories_table,
            entity_facts=env.entity_facts_table,
            entities=env.entities_table,
            outbox=env.outbox_table,
            turns=env.turns_table,
        )
        return DynamoPortability(self.dynamodb, tables)


class _SqliteAdapters(Adapters):
    """The embedded mode: every store and the queue in one SQLite file under the data dir."""

    def __init__(self, env: LambdaEnvironment) -> None:
        from memwrite.adapters.sqlite.database import open_database
        from memwrite.adapters.sqlite.ledger import SqliteSpanStore

        super().__init__(env)
        self.database = open_database(env.sqlite_dir())
        self._spans = SqliteSpanStore(self.database)

    @property
    def spans(self) -> SpanStore:
        return self._spans

    def tenant_settings(self) -> TenantSettingsStore:
        from memwrite.adapters.sqlite.tenant_settings import SqliteTenantSettingsStore

        return SqliteTenantSettingsStore(self.database)

    def budget_store(self) -> BudgetStore:
        from memwrite.adapters.sqlite.budget import SqliteBudgetStore

        return SqliteBudgetStore(self.database)

    def usage_meter(self) -> UsageMeter:
        from memwrite.adapters.sqlite.usage import SqliteUsageMeter

        return SqliteUsageMeter(self.database)

    def ledger(self) -> TurnLedger:
        from memwrite.adapters.sqlite.ledger import SqliteTurnLedger

        return SqliteTurnLedger(self.database)

    def rate_store(self) -> RateStore:
        from memwrite.adapters.sqlite.ledger import SqliteRateStore

        return SqliteRateStore(self.database)

    def queue(self) -> TurnQueue:
        return self.consumer()

    def consumer(self) -> SqliteTurnQueue:
        from memwrite.adapters.sqlite.queue import SqliteTurnQueue

        return SqliteTurnQueue(self.database)

    def session_log(self) -> SessionLog:
        from memwrite.adapters.sqlite.ledger import SqliteSessionLog

        return SqliteSessionLog(self.database)

    def episodes(self) -> EpisodeStore:
        from memwrite.adapters.sqlite.episodes import SqliteEpisodeStore

        return SqliteEpisodeStore(self.database)

    def episode_batches(self) -> EpisodeBatches:
        from memwrite.adapters.sqlite.episodes import SqliteEpisodeStore

        return SqliteEpisodeStore(self.database)

    def entities(self) -> EntityStore:
        from memwrite.adapters.sqlite.store import SqliteEntityStore

        return SqliteEntityStore(self.database)

    def memory_store(self) -> SqliteMemoryStore:
        from memwrite.adapters.sqlite.store import SqliteMemoryStore

        return SqliteMemoryStore(self.database)

    def memory_reader(self) -> MemoryReader:
        return self.memory_store()

    def expiry_finder(self) -> ExpiryFinder:
        from memwrite.adapters.sqlite.expiry import SqliteExpiryFinder

        return SqliteExpiryFinder(self.database)

    def outbox(self) -> Outbox:
        from memwrite.adapters.sqlite.outbox import SqliteOutbox

        return SqliteOutbox(self.database)

    def webhook_queue(self) -> WebhookQueue:
        from memwrite.adapters.sqlite.webhook_queue import SqliteWebhookQueue
        from memwrite.feed.delivery import MAX_ATTEMPTS

        # SQS's redrive policy, played: the lane's attempts, then the dead letters.
        return SqliteWebhookQueue(self.database, max_receives=MAX_ATTEMPTS)

    def eraser(self) -> UserEraser:
        from memwrite.adapters.sqlite.erase import SqliteUserEraser

        return SqliteUserEraser(self.database)

    def rollbacks(self) -> TraceRollback:
        from memwrite.adapters.sqlite.rollback import SqliteTraceRollback

        return SqliteTraceRollback(self.database)

    def deletions(self) -> MemoryDeletion:
        from memwrite.adapters.sqlite.delete import SqliteMemoryDeletion

        return SqliteMemoryDeletion(self.database)

    def topic_sweep_store(self) -> TopicSweepStore:
        from memwrite.adapters.sqlite.episodes import SqliteTopicSweepStore

        return SqliteTopicSweepStore(self.database)

    def portability(self) -> UserPortability:
        from memwrite.adapters.sqlite.portability import SqlitePortability

        return SqlitePortability(self.database)


def build_llm(
    config: ExtractConfig,
    api_key: str | None,
    record_dir: Path | None = None,
    *,
    budget: ModelBudget | None = None,
    converse: ConverseOptions | None = None,
) -> ExtractionLlm | None:
    """The model client, or None offline: Bedrock uses IAM; the API needs ANTHROPIC_API_KEY.
    With `record_dir`, every exchange is written there (`MEMWRITE_LLM_RECORD`, the anthropic
    SDK's providers); with `budget`, every call is charged to it first. The provider
    `bedrock-converse` calls through Converse (`converse`: where, and the budget)."""
    if config.provider == "bedrock-converse":
        from memwrite.adapters.aws.bedrock_converse import ConverseExtractor

        return ConverseExtractor(config, **(converse or {"budget": budget}))
    if config.provider != "bedrock" and not api_key:
        return None
    from memwrite.adapters.anthropic.extractor import AnthropicExtractorClient

    return AnthropicExtractorClient(config, api_key=api_key, record_dir=record_dir, budget=budget)


@cache
def local_backfill_jobs() -> InMemoryBackfillJobs:
    """The backfills handed over in this process, for `memwrite serve`'s backfill worker."""
    from memwrite.adapters.in_memory import InMemoryBackfillJobs

    return InMemoryBackfillJobs()
