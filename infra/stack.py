"""One memwrite deployment: the stack composes the constructs and does the grants.

Functions come from `memwrite.stages.STAGES`: the ingest-placed stage (pre_filter) is the
function of `POST /v1/turns`, each pipeline stage a task of the state machine, each stream
stage a consumer of the outbox's DynamoDB stream (partial batch responses, an on-failure DLQ)
that writes the search collection and hands webhook deliveries to the delivery lane
(`infra/webhooks.py`: its own queue, DLQ and function). `stages` is a parameter so tests can
add a stage and see its wiring appear.

Every function's environment is what `memwrite.config.environment.LambdaEnvironment` reads (the
tests validate each synthesized environment against it); the model grants follow the
pipeline settings the environment deploys (`infra/settings/<env>.json`).
"""

from __future__ import annotations

import typing
from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from functions.routes import route_functions
from infra.access import (
    FUNCTION_ACCESS,
    embedding_callers,
    llm_callers,
    search_access,
    usage_writers,
)
from infra.api import MemwriteApi
from infra.batch_jobs import BedrockBatchJobs
from infra.config import EnvConfig, FunctionSize, LlmProvider, deployed_settings
from infra.lambdas import MemwriteFunction
from infra.layer import handler_code, layer_code
from infra.monitoring import Monitoring
from infra.pipeline import PipelineStateMachine, RetryPolicy
from infra.scaling import TURN_BATCH, turn_queue_concurrency, webhook_lane_concurrency
from infra.search import INDEX_SETUP_HANDLER, SearchCollection
from infra.storage import ExportsBucket, Queues, Tables
from infra.webhooks import DELIVERY_SIZE, WebhookLane
from memwrite.adapters.aws.s3_exports import KEY_PREFIX
from memwrite.config.model_limits import ModelLimits, ModelTask, budget_provider
from memwrite.config.settings import PipelineConfig, Settings
from memwrite.costs.pricing import model_family
from memwrite.schema import API_KEYS, BUDGET, OUTBOX, TABLES, USAGE, Access, SearchAccess
from memwrite.stages import STAGES, StageDef, StagePlacement

__all__ = [
    "DEPLOYED_CONSTRUCT_IDS",
    "MemwriteStack",
    "bedrock_llm_models",
    "bedrock_model_arns",
    "construct_id",
]

# The dispatcher starts executions and returns: it waits for none of them.
_DISPATCH_SIZE = FunctionSize(memory_mb=256, timeout_secs=30)
# The index step retries while a new collection's data access policy applies.
_INDEX_SETUP_SIZE = FunctionSize(memory_mb=256, timeout_secs=180)
# Bedrock model ids starting with a model provider are foundation models; any other first
# segment ("us.", "eu.", "apac.", "global.") names a cross-region inference profile.
_MODEL_PROVIDERS = frozenset({"anthropic", "amazon", "cohere", "meta", "mistral", "ai21"})
_DELETE_ACTIONS = ("dynamodb:DeleteItem", "dynamodb:BatchWriteItem")


# Construct ids that outlived a rename. A function's construct id makes the logical ids of the
# function, its role, policy, log group and invoke permissions: a new id would replace them all
# (the old log group deleted, or orphaned where data is retained). The API function was deployed
# as "query" (its folder since renamed `functions/api/`), so it keeps that id.
DEPLOYED_CONSTRUCT_IDS = {"api": "QueryFn"}


def construct_id(name: str) -> str:
    """A function's construct id: its name in CamelCase + "Fn" (`pre_filter` -> `PreFilterFn`),
    unless it was deployed under another name."""
    return DEPLOYED_CONSTRUCT_IDS.get(name) or "".join(p.title() for p in name.split("_")) + "Fn"


def _grant(table: dynamodb.ITable, role: iam.IRole, access: Access) -> None:
    if access is Access.READ:
        table.grant_read_data(role)
    elif access is Access.WRITE:
        table.grant_write_data(role)
    elif access is Access.READ_WRITE:
        table.grant_read_write_data(role)
    elif access is Access.READ_PUT:
        table.grant_read_data(role)
        table.grant(role, "dynamodb:PutItem")
    elif access is Access.UPDATE:
        table.grant(role, "dynamodb:UpdateItem")
    else:
        table.grant_read_data(role)
        table.grant(role, *_DELETE_ACTIONS)


def bedrock_model_arns(model_id: str, partition: str, region: str, account: str) -> list[str]:
    """What `bedrock:InvokeModel` must name for one model id: the foundation model in this
    region, or an inference profile plus its foundation model in any region it routes to."""
    prefix, _, rest = model_id.partition(".")
    if prefix in _MODEL_PROVIDERS:
        return [f"arn:{partition}:bedrock:{region}::foundation-model/{model_id}"]
    return [
        f"arn:{partition}:bedrock:{region}:{account}:inference-profile/{model_id}",
        f"arn:{partition}:bedrock:*::foundation-model/{rest}",
    ]


def bedrock_llm_models(pipeline: PipelineConfig) -> list[str]:
    """Every model the model callers may invoke through Bedrock: each task's (the extraction
    model unless `pipeline.model.tasks` names another), once each."""
    return sorted({pipeline.task_model(task) for task in typing.get_args(ModelTask)})


class MemwriteStack(cdk.Stack):
    def __init__(  # noqa: PLR0915 (the stack composes every construct, in order)
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: EnvConfig,
        stages: Sequence[StageDef] = STAGES,
        **kwargs: object,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)  # type: ignore[arg-type]  # StackProps
        self.config = config
        removal = cdk.RemovalPolicy.RETAIN if config.retain_data else cdk.RemovalPolicy.DESTROY
        self._removal = removal
        self._retention = logs.RetentionDays[config.log_retention]
        self.settings: Settings = deployed_settings(config.name)
        self.tables = Tables(self, "Tables", retain=config.retain_data)
        self.queues = Queues(
            self,
            "Queues",
            # AWS's advice for an SQS event source: six times the function's timeout.
            visibility_timeout=cdk.Duration.seconds(6 * _DISPATCH_SIZE.timeout_secs),
            # A turn held for its user's next ones (extract.coalesce_window_s) spends a receive.
            max_receives=config.queue_max_receives
            + (1 if self.settings.pipeline.extract.coalesce_window_s > 0 else 0),
        )
        self._layer = lambda_.LayerVersion(
            self,
            "CoreLayer",
            code=layer_code(),
            compatible_runtimes=[lambda_.Runtime.PYTHON_3_12],
            compatible_architectures=[lambda_.Architecture.ARM_64],
            description="memwrite library and its runtime dependencies (no local tooling)",
        )
        self._code = handler_code()
        self._env = {
            **{
                f"{table.logical_name.upper()}_TABLE": self.tables.by_name[
                    table.logical_name
                ].table_name
                for table in TABLES
                if table is not API_KEYS  # the authorizer's alone
            },
            "MEMWRITE_CONFIG": f"/var/task/infra/settings/{config.name}.json",
            "POWERTOOLS_SERVICE_NAME": "memwrite",
            "POWERTOOLS_METRICS_NAMESPACE": "memwrite",
            "POWERTOOLS_LOG_LEVEL": "INFO",
        }

        self.functions: dict[str, MemwriteFunction] = {}
        for stage in stages:
            size = config.extract_size if stage.name == "extract" else config.stage_size
            if stage.placement is StagePlacement.INGEST:
                size = config.api_size
            fn = self._function(stage.name, stage.function_dir, size)
            for table, access in stage.tables.items():
                _grant(self.tables.by_name[table], fn.role, access)
        ingest_stages = [s for s in stages if s.placement is StagePlacement.INGEST]
        pipeline = [s for s in stages if s.placement is StagePlacement.PIPELINE]
        stream = [s for s in stages if s.placement is StagePlacement.STREAM]
        for stage in ingest_stages:
            self.functions[stage.name].function.add_environment(
                "TURN_QUEUE_URL", self.queues.turns.queue_url
            )
            self.queues.turns.grant_send_messages(self.functions[stage.name].role)

        api = self._function("api", "api", config.api_size)
        self.exports = self._exports_bucket(api)
        dead_letter = self._function("dead_letter", "dead_letter", config.stage_size)
        self._backfill_handoff(api, self._scheduled_functions(api))
        dispatch = self._function("dispatch", "dispatch", _DISPATCH_SIZE)
        authorizer = self._function("authorizer", "authorizer", config.api_size)
        api_keys = self.tables.by_name[API_KEYS.logical_name]
        authorizer.function.add_environment("API_KEYS_TABLE", api_keys.table_name)
        # Where `memwrite keys --table` writes (with the operator's credentials).
        cdk.CfnOutput(self, "ApiKeysTable", value=api_keys.table_name)
        self._function("index_setup", "index_setup", _INDEX_SETUP_SIZE, INDEX_SETUP_HANDLER)
        self.webhooks = self._webhook_lane(stream)
        for name in FUNCTION_ACCESS:
            for table, access in FUNCTION_ACCESS[name].items():
                _grant(self.tables.by_name[table], self.functions[name].role, access)
        calling_model, embedding = llm_callers(stages), embedding_callers(stages)
        metering, usage = usage_writers(stages), self.tables.by_name[USAGE.logical_name]
        for name, fn in self.functions.items():
            if name in calling_model:
                self._grant_llm(fn)
            if name in embedding:
                self._grant_embedder(fn)
            if name in metering:
                _grant(usage, fn.role, Access.UPDATE)  # its units of work's usage, added to

        self.pipeline = PipelineStateMachine(
            self,
            "Pipeline",
            stages=pipeline,
            functions={s.name: self.functions[s.name].function for s in pipeline},
            dead_letter_function=dead_letter.function,
            pipeline_dlq=self.queues.pipeline_dlq,
            retry=RetryPolicy(
                interval_secs=config.retry_interval_secs, max_attempts=config.retry_attempts
            ),
            max_budget_wait_secs=self.settings.pipeline.model.max_wait_s,
            map_concurrency=config.map_concurrency,
            log_level=sfn.LogLevel[config.state_machine_log_level],
            log_retention=self._retention,
            removal_policy=removal,
        )
        machine = self.pipeline.state_machine
        machine.grant_start_execution(dispatch.role)
        dispatch.function.add_environment("PIPELINE_STATE_MACHINE_ARN", machine.state_machine_arn)
        # Where it hides a batch that waits for its user's next turns (its event source's
        # grant covers ChangeMessageVisibility).
        dispatch.function.add_environment("TURN_QUEUE_URL", self.queues.turns.queue_url)
        dispatch.function.add_environment("TURN_DEAD_LETTER_URL", self.queues.turns_dlq.queue_url)
        dispatch.function.add_event_source(
            sources.SqsEventSource(
                self.queues.turns,
                batch_size=TURN_BATCH,
                report_batch_item_failures=True,
                max_concurrency=turn_queue_concurrency(*self._model_limits()),
            )
        )

        if ingest_stages:
            self.api = MemwriteApi(
                self,
                "Api",
                functions={name: self.functions[name].function for name in route_functions()},
                authorizer=authorizer.function,
                throttling=config.throttling,
                plans=config.api_plans,
                api_keys_table=api_keys.table_name,
                log_retention=self._retention,
                removal_policy=removal,
            )
            cdk.CfnOutput(self, "ApiUrl", value=self.api.api.url)

        self.search = self._search_collection(search_access(stages))
        self._stream_consumers(stream)

        self.monitoring = Monitoring(
            self,
            "Monitoring",
            dashboard_name=f"memwrite-{config.name}",
            stages=stages,
            functions={s.name: self.functions[s.name].function for s in stages},
            turn_queue=self.queues.turns,
            dead_letter_queues=self.queues.dead_letter_queues,
            stream_dead_letter_queues=[self.queues.stream_dlq],
            webhook_queue=self.webhooks.queue,
            webhook_dead_letter_queue=self.webhooks.dlq,
            state_machine=machine,
            thresholds=config.alarms,
            alarm_email=config.alarm_email,
            extraction_model=model_family(self.settings.pipeline.extract.model),
        )
        self._acknowledge_generated_wildcards()

    def _model_limits(self) -> tuple[ModelLimits, int]:
        """The model limits the intake is derived from (the model budget's, for the
        extraction's provider and model, as deployed) and the max_tokens each call reserves."""
        pipeline = self.settings.pipeline
        extract = pipeline.extract
        limits = pipeline.model.limits_for(budget_provider(extract.provider), extract.model)
        return limits, extract.max_output_tokens

    def _exports_bucket(self, api: MemwriteFunction) -> ExportsBucket:
        """Where the API function puts exports too large for one response and presigns
        their URL with its own role: it may put and get objects under the key prefix only."""
        exports = ExportsBucket(self, "Exports", retain=self.config.retain_data)
        api.function.add_environment("EXPORTS_BUCKET", exports.bucket.bucket_name)
        objects = exports.bucket.arn_for_objects(f"{KEY_PREFIX}*")
        api.role.add_to_policy(
            iam.PolicyStatement(actions=["s3:PutObject", "s3:GetObject"], resources=[objects])
        )
        bucket_id = self.get_logical_id(
            typing.cast(cdk.CfnElement, exports.bucket.node.default_child)
        )
        cdk.Validations.of(api).acknowledge(
            cdk.Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::<{bucket_id}.Arn>/{KEY_PREFIX}*]",
                reason="Each export is a new object under the prefix (its key names the "
                "tenant, the user and a random id): put and get, no list or delete.",
            )
        )
        return exports

    def _backfill_handoff(self, api: MemwriteFunction, backfill: MemwriteFunction) -> None:
        """`POST /v1/users/{user_id}/backfill` invokes the backfill function asynchronously
        (`BACKFILL_FUNCTION_NAME`), and the scheduled run fans out to the backfill function
        itself, one invoke per user: those two alone may invoke it. The self-grant is a policy
        of its own: in the role's default policy it would make the function depend on itself."""
        api.function.add_environment("BACKFILL_FUNCTION_NAME", backfill.function.function_name)
        invoke = iam.PolicyStatement(
            actions=["lambda:InvokeFunction"], resources=[backfill.function.function_arn]
        )
        api.role.add_to_principal_policy(invoke)
        iam.Policy(self, "BackfillFanOut", roles=[backfill.role], statements=[invoke])

    def _scheduled_functions(self, api: MemwriteFunction) -> MemwriteFunction:
        """The functions EventBridge Scheduler runs: the backfill of pending episodes (on unless
        the environment turns it off, `backfill_schedule_enabled`) and the expiry sweep,
        always on. The api function hands the expire function a topic sweep (a settings change
        that excludes a topic), invoked asynchronously (`TOPIC_SWEEP_FUNCTION`)."""
        config = self.config
        backfill = self._function("backfill", "backfill", config.extract_size)
        if config.llm_provider is LlmProvider.BEDROCK:
            # The batch lane's jobs (`pipeline.backfill.mode = batch`), run as their own role.
            jobs = BedrockBatchJobs(self, "BatchJobs", retain=config.retain_data)
            model = self.settings.pipeline.extract.model
            jobs.grant_submit(
                backfill, bedrock_model_arns(model, self.partition, self.region, self.account)
            )
            self._invoke_models_as(jobs.role, jobs.role, model, "Batch jobs of Claude")
        enabled = config.backfill_schedule_enabled
        self._schedule("Backfill", backfill, config.backfill_schedule, enabled=enabled)
        expire = self._function("expire", "expire", config.stage_size)
        self._schedule("Expiry", expire, config.expiry_schedule, enabled=True)
        api.function.add_environment("TOPIC_SWEEP_FUNCTION", expire.function.function_name)
        expire.function.grant_invoke(api.role)
        return backfill

    def _schedule(
        self, name: str, target: MemwriteFunction, expression: str, *, enabled: bool
    ) -> None:
        """`target` invoked on `expression`, without retries: the next run does the work."""
        role = iam.Role(
            self,
            f"{name}ScheduleRole",
            assumed_by=iam.ServicePrincipal("scheduler.amazonaws.com"),
        )
        target.function.grant_invoke(role)
        scheduler.CfnSchedule(
            self,
            f"{name}Schedule",
            schedule_expression=expression,
            flexible_time_window=scheduler.CfnSchedule.FlexibleTimeWindowProperty(mode="OFF"),
            state="ENABLED" if enabled else "DISABLED",
            target=scheduler.CfnSchedule.TargetProperty(
                arn=target.function.function_arn,
                role_arn=role.role_arn,
                retry_policy=scheduler.CfnSchedule.RetryPolicyProperty(maximum_retry_attempts=0),
            ),
        )

    def _function(
        self, name: str, function_dir: str, size: FunctionSize, handler: str | None = None
    ) -> MemwriteFunction:
        fn = MemwriteFunction(
            self,
            construct_id(name),
            handler=handler or f"functions.{function_dir}.handler.lambda_handler",
            code=self._code,
            layer=self._layer,
            size=size,
            environment=dict(self._env),
            log_retention=self._retention,
            removal_policy=self._removal,
        )
        self.functions[name] = fn
        return fn

    def _invoke_models(self, fn: MemwriteFunction, model_id: str, why: str) -> None:
        self._invoke_models_as(fn.role, fn, model_id, why)

    def _invoke_models_as(self, role: iam.IRole, scope: Construct, model_id: str, why: str) -> None:
        """`role` may invoke one model (`scope`: where its cdk-nag acknowledgment goes)."""
        resources = bedrock_model_arns(model_id, self.partition, self.region, self.account)
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["bedrock:InvokeModel"], resources=resources)
        )
        for resource in bedrock_model_arns(
            model_id, "<AWS::Partition>", "<AWS::Region>", "<AWS::AccountId>"
        ):
            if "bedrock:*:" in resource:
                cdk.Validations.of(scope).acknowledge(
                    cdk.Acknowledgment(
                        id=f"AwsSolutions-IAM5[Resource::{resource}]",
                        reason=f"{why}: one model; a cross-region inference profile routes "
                        "to that model in any of its regions, hence the region wildcard.",
                    )
                )

    def _grant_llm(self, fn: MemwriteFunction) -> None:
        # Every model call is charged to the shared model budget first (`memwrite.budget`):
        # its shards are read and put whole under a version condition, never deleted.
        _grant(self.tables.by_name[BUDGET.logical_name], fn.role, Access.READ_PUT)
        pipeline = self.settings.pipeline
        if self.config.llm_provider is not LlmProvider.ANTHROPIC:
            # Every model a task calls (extract, judges, verifier, HyPE questions: the
            # extraction model unless `pipeline.model.tasks` names another). Converse needs
            # bedrock:InvokeModel too.
            for model in bedrock_llm_models(pipeline):
                self._invoke_models(fn, model, "Models through Bedrock")
            return
        # The function reads the key at run time (`memwrite.adapters.aws.secrets`): its
        # environment holds the secret's name only, and only the model's callers may read it.
        name = self.config.anthropic_secret_name
        secret = self.node.try_find_child(
            "AnthropicSecret"
        ) or secretsmanager.Secret.from_secret_name_v2(self, "AnthropicSecret", name)
        typing.cast(secretsmanager.ISecret, secret).grant_read(fn.role)
        fn.function.add_environment("ANTHROPIC_API_KEY_SECRET", name)

    def _grant_embedder(self, fn: MemwriteFunction) -> None:
        search = self.settings.pipeline.search
        if search.embedder == "bedrock":
            self._invoke_models(fn, search.bedrock_model, "Titan embeddings")

    def _search_collection(self, access: dict[str, SearchAccess]) -> SearchCollection:
        """The collection, its `access` by function, the OPENSEARCH_* environment of the
        functions that use it, and the deploy-time index step."""
        roles = {
            kind: [self.functions[n].role for n, k in access.items() if k is kind]
            for kind in SearchAccess
        }
        search = SearchCollection(
            self,
            "Search",
            config=self.config.search,
            writers=roles[SearchAccess.READ_WRITE],
            readers=roles[SearchAccess.READ],
            admins=roles[SearchAccess.ADMIN],
            removal_policy=self._removal,
        )
        for name in access:
            function = self.functions[name].function
            function.add_environment("OPENSEARCH_ENDPOINT", search.endpoint)
            function.add_environment("OPENSEARCH_INDEX", self.config.search.index_name)
            function.add_environment("OPENSEARCH_SERVICE", "aoss")  # Serverless signs as aoss
        # The index step runs again (an Update) whenever the search settings change.
        search.add_index_setup(
            self.functions["index_setup"].function,
            self.config.search,
            search_settings=self.settings.pipeline.search.model_dump_json(),
        )
        return search

    def _stream_consumers(self, stream: Sequence[StageDef]) -> None:
        """The stream stages on the outbox's stream, publishing to the change-feed bus."""
        self.event_bus = self._change_feed_bus(stream)
        outbox = self.tables.by_name[OUTBOX.logical_name]
        for stage in stream:
            self.functions[stage.name].function.add_event_source(
                sources.DynamoEventSource(
                    outbox,
                    starting_position=lambda_.StartingPosition.TRIM_HORIZON,
                    batch_size=50,
                    bisect_batch_on_error=True,
                    report_batch_item_failures=True,
                    retry_attempts=5,
                    max_record_age=cdk.Duration.days(1),
                    on_failure=sources.SqsDlq(self.queues.stream_dlq),
                )
            )

    def _webhook_lane(self, stream: Sequence[StageDef]) -> WebhookLane:
        """The webhook delivery lane: the stream stages (hype) hand deliveries to its queue,
        its own function makes the HTTP calls (docs/change-feed.md)."""
        consumer = self._function("webhook_delivery", "webhook_delivery", DELIVERY_SIZE)
        producers = [self.functions[stage.name] for stage in stream]
        return WebhookLane(
            self,
            "WebhookLane",
            consumer=consumer,
            producers=producers,
            max_concurrency=webhook_lane_concurrency(*self._model_limits()),
        )

    def _change_feed_bus(self, stream: Sequence[StageDef]) -> events.EventBus:
        """The environment's change-feed bus: the stream stage (hype) puts each memory row's
        event on it after indexing; subscribers add their own rules (docs/change-feed.md)."""
        bus = events.EventBus(self, "ChangeFeedBus", event_bus_name=f"memwrite-{self.config.name}")
        for stage in stream:
            fn = self.functions[stage.name]
            fn.function.add_environment("EVENT_BUS_NAME", bus.event_bus_name)
            bus.grant_put_events_to(fn.role)
        cdk.CfnOutput(self, "EventBusName", value=bus.event_bus_name)
        return bus

    def _acknowledge_generated_wildcards(self) -> None:
        """The wildcards CDK's grants generate, each named (never a blanket `IAM5`)."""
        for table in self.tables.by_name.values():
            table_id = self.get_logical_id(typing.cast(cdk.CfnElement, table.node.default_child))
            cdk.Validations.of(self).acknowledge(
                cdk.Acknowledgment(
                    id=f"AwsSolutions-IAM5[Resource::<{table_id}.Arn>/index/*]",
                    reason="Table grants cover the table's own secondary indexes (the query "
                    "paths of memwrite.schema); no other table is reachable.",
                )
            )
        for fn in self.functions.values():
            function_id = self.get_logical_id(
                typing.cast(cdk.CfnElement, fn.function.node.default_child)
            )
            cdk.Validations.of(self).acknowledge(
                cdk.Acknowledgment(
                    id=f"AwsSolutions-IAM5[Resource::<{function_id}.Arn>:*]",
                    reason="Invoking a function includes its versions and aliases (`:*`); "
                    "the state machine invokes only its stage functions.",
                )
            )
