"""One memwrite deployment: the stack composes the constructs and does the grants.

Functions come from `memwrite.stages.STAGES`: the ingest-placed stage is the API's ingest
function, each pipeline stage a task of the state machine, each stream stage a consumer of the
outbox's DynamoDB stream (partial batch responses, an on-failure DLQ) that writes the search
collection. `stages` is a parameter so tests can add a stage and see its wiring appear.
"""

from __future__ import annotations

import typing
from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from infra.access import FUNCTION_ACCESS, Access, access_of_stage
from infra.api import MemwriteApi
from infra.config import EnvConfig, FunctionSize, LlmProvider
from infra.lambdas import MemwriteFunction
from infra.layer import handler_code, layer_code
from infra.monitoring import Monitoring
from infra.pipeline import PipelineStateMachine, RetryPolicy
from infra.search import INDEX_SETUP_HANDLER, SearchCollection
from infra.storage import Queues, Tables
from memwrite.schema import OUTBOX, TABLES
from memwrite.stages import STAGES, StageDef, StagePlacement

__all__ = ["MemwriteStack"]

# Stages that call a model (extract, the resolve and dedupe judges; the indexer's HyPE).
_LLM_STAGES = frozenset({"extract", "resolve_refs", "dedupe", "persist", "hype"})
# Express sync executions last at most 5 minutes; the dispatcher waits for them.
_DISPATCH_SIZE = FunctionSize(memory_mb=256, timeout_secs=330)


def _grant(table: dynamodb.ITable, role: iam.IRole, access: Access) -> None:
    if access is Access.READ:
        table.grant_read_data(role)
    elif access is Access.WRITE:
        table.grant_write_data(role)
    else:
        table.grant_read_write_data(role)


class MemwriteStack(cdk.Stack):
    def __init__(
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
        self.tables = Tables(self, "Tables", retain=config.retain_data)
        self.queues = Queues(
            self,
            "Queues",
            # AWS's advice for an SQS event source: six times the function's timeout.
            visibility_timeout=cdk.Duration.seconds(6 * _DISPATCH_SIZE.timeout_secs),
            max_receives=config.queue_max_receives,
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
            },
            "MEMWRITE_CONFIG": f"/var/task/infra/settings/{config.name}.json",
            "POWERTOOLS_METRICS_NAMESPACE": "memwrite",
            "POWERTOOLS_LOG_LEVEL": "INFO",
        }

        self.functions: dict[str, MemwriteFunction] = {}
        for stage in stages:
            size = config.extract_size if stage.name == "extract" else config.stage_size
            if stage.placement is StagePlacement.INGEST:
                size = config.api_size
            fn = self._function(stage.name, stage.function_dir, size)
            for table, access in access_of_stage(stage.name).items():
                _grant(self.tables.by_name[table], fn.role, access)
            if stage.name in _LLM_STAGES:
                self._grant_llm(fn)
        ingest_stages = [s for s in stages if s.placement is StagePlacement.INGEST]
        pipeline = [s for s in stages if s.placement is StagePlacement.PIPELINE]
        stream = [s for s in stages if s.placement is StagePlacement.STREAM]
        for stage in ingest_stages:
            self.functions[stage.name].function.add_environment(
                "TURN_QUEUE_URL", self.queues.turns.queue_url
            )
            self.queues.turns.grant_send_messages(self.functions[stage.name].role)

        query = self._function("query", "query", config.api_size)
        dead_letter = self._function("dead_letter", "dead_letter", config.stage_size)
        dispatch = self._function("dispatch", "dispatch", _DISPATCH_SIZE)
        authorizer = self._function("authorizer", "authorizer", config.api_size)
        for name in FUNCTION_ACCESS:
            for table, access in FUNCTION_ACCESS[name].items():
                _grant(self.tables.by_name[table], self.functions[name].role, access)

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
            map_concurrency=config.map_concurrency,
            log_level=sfn.LogLevel[config.state_machine_log_level],
            log_retention=self._retention,
            removal_policy=removal,
        )
        machine = self.pipeline.state_machine
        machine.grant_start_sync_execution(dispatch.role)
        dispatch.function.add_environment("PIPELINE_STATE_MACHINE_ARN", machine.state_machine_arn)
        dispatch.function.add_event_source(
            sources.SqsEventSource(
                self.queues.turns, batch_size=10, report_batch_item_failures=True
            )
        )

        if ingest_stages:
            self.api = MemwriteApi(
                self,
                "Api",
                ingest=self.functions[ingest_stages[0].name].function,
                query=query.function,
                authorizer=authorizer.function,
                throttling=config.throttling,
                log_retention=self._retention,
                removal_policy=removal,
            )
            cdk.CfnOutput(self, "ApiUrl", value=self.api.api.url)

        self.search: SearchCollection | None = None
        if stream:
            self._stream_consumers(stream, query)

        self.monitoring = Monitoring(
            self,
            "Monitoring",
            dashboard_name=f"memwrite-{config.name}",
            stages=stages,
            functions={s.name: self.functions[s.name].function for s in stages},
            turn_queue=self.queues.turns,
            dead_letter_queues=self.queues.dead_letter_queues,
            state_machine=machine,
            thresholds=config.alarms,
            alarm_email=config.alarm_email,
        )
        self._acknowledge_generated_wildcards()

    def _function(self, name: str, function_dir: str, size: FunctionSize) -> MemwriteFunction:
        fn = MemwriteFunction(
            self,
            "".join(part.title() for part in name.split("_")) + "Fn",
            handler=f"functions.{function_dir}.handler.lambda_handler",
            code=self._code,
            layer=self._layer,
            size=size,
            environment=dict(self._env),
            log_retention=self._retention,
            removal_policy=self._removal,
        )
        self.functions[name] = fn
        return fn

    def _grant_llm(self, fn: MemwriteFunction) -> None:
        if self.config.llm_provider is LlmProvider.BEDROCK:
            fn.role.add_to_policy(
                iam.PolicyStatement(
                    actions=["bedrock:InvokeModel"],
                    resources=[
                        f"arn:{self.partition}:bedrock:*::foundation-model/anthropic.*",
                        f"arn:{self.partition}:bedrock:{self.region}:{self.account}:"
                        "inference-profile/*anthropic.*",
                    ],
                )
            )
            for resource in (
                "arn:<AWS::Partition>:bedrock:*::foundation-model/anthropic.*",
                "arn:<AWS::Partition>:bedrock:<AWS::Region>:<AWS::AccountId>:"
                "inference-profile/*anthropic.*",
            ):
                cdk.Validations.of(fn).acknowledge(
                    cdk.Acknowledgment(
                        id=f"AwsSolutions-IAM5[Resource::{resource}]",
                        reason="Anthropic models only; cross-region inference profiles route "
                        "to any region's foundation model, hence the region wildcard.",
                    )
                )
            return
        # The key reaches the function as a CloudFormation dynamic reference: the secret's
        # value is resolved at deploy time, never written into the template.
        fn.function.add_environment(
            "ANTHROPIC_API_KEY",
            cdk.SecretValue.secrets_manager(self.config.anthropic_secret_name).unsafe_unwrap(),
        )

    def _stream_consumers(self, stream: Sequence[StageDef], query: MemwriteFunction) -> None:
        outbox = self.tables.by_name[OUTBOX.logical_name]
        consumers = [self.functions[stage.name] for stage in stream]
        for consumer in consumers:
            consumer.function.add_event_source(
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
        index_setup = MemwriteFunction(
            self,
            "IndexSetupFn",
            handler=INDEX_SETUP_HANDLER,
            code=self._code,
            layer=self._layer,
            size=self.config.stage_size,
            environment={},
            log_retention=self._retention,
            removal_policy=self._removal,
        )
        self.search = SearchCollection(
            self,
            "Search",
            config=self.config.search,
            writers=[c.role for c in consumers],
            readers=[query.role],
            admins=[index_setup.role],
            removal_policy=self._removal,
        )
        for function in [*consumers, query]:
            function.function.add_environment("OPENSEARCH_ENDPOINT", self.search.endpoint)
            function.function.add_environment("OPENSEARCH_INDEX", self.config.search.index_name)
        self.search.add_index_setup(index_setup.function, self.config.search)

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
