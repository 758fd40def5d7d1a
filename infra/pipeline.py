"""The pipeline state machine, generated from `memwrite.stages.STAGES`.

Execution input `{"batches": [ExtractInput, ...]}` (the dispatcher's, started asynchronously:
no function waits for a run). A Map runs each batch through one Lambda task per pipeline
stage, in the list's order; the iteration state is `{"batch": <the ExtractInput>, "payload":
<the last stage's output>, "budget": {"waited_s": <s waited for the model budget>}}`, so a
failure path still has the turns to dead-letter. Each task retries transient errors (the
library's `TransientError` subclasses by name, Lambda service errors, throttling, timeouts)
with backoff. The stage that waits for the model budget (extract) catches `BudgetWait`: the
iteration waits the batch's place in its tenant's line, as the error says, then runs the
stage again (`_budget_line`). Each task catches everything else to the failure path:
an error span per turn (`functions/dead_letter`), then the batch to the pipeline DLQ. Should
the Map itself fail (the failure path of an iteration failing after its retries), its Catch
sends every batch of the execution to the pipeline DLQ: the machine routes its own failures,
since nobody waits on it. Every iteration ends in a small status object, so the Map's output
stays small.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import aws_cdk as cdk
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from memwrite import errors
from memwrite.stages import StageDef

__all__ = [
    "EXPRESS_WAIT_LIMIT_SECS",
    "LAMBDA_TRANSIENT_ERRORS",
    "PipelineStateMachine",
    "RetryPolicy",
    "transient_error_names",
]

# What the Lambda service and runtime raise when a retry may succeed.
LAMBDA_TRANSIENT_ERRORS = (
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
    "Lambda.TooManyRequestsException",
    "Lambda.ClientExecutionTimeoutException",
    "Sandbox.Timedout",  # the function's own timeout (a slow LLM call)
)


def transient_error_names() -> list[str]:
    """Every `TransientError` subclass by name (a Python Lambda's error type is its class)
    but `BudgetWait`, which is no fault: the state machine waits its delay (`_budget_line`)."""
    found: list[str] = []
    pending: list[type[errors.MemwriteError]] = [errors.TransientError]
    while pending:
        error = pending.pop()
        if error is not errors.BudgetWait:
            found.append(error.__name__)
        pending.extend(error.__subclasses__())
    return sorted(found)


# An Express execution lasts at most 5 minutes: a batch's waits for the model budget (the
# state machine's `_budget_line`) must leave the stages time to run after them.
EXPRESS_WAIT_LIMIT_SECS = 240


class RetryPolicy:
    def __init__(self, *, interval_secs: int, max_attempts: int) -> None:
        self.interval = cdk.Duration.seconds(interval_secs)
        self.max_attempts = max_attempts


class PipelineStateMachine(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stages: Sequence[StageDef],
        functions: Mapping[str, lambda_.IFunction],
        dead_letter_function: lambda_.IFunction,
        pipeline_dlq: sqs.IQueue,
        retry: RetryPolicy,
        max_budget_wait_secs: float,
        map_concurrency: int,
        log_level: sfn.LogLevel,
        log_retention: logs.RetentionDays,
        removal_policy: cdk.RemovalPolicy,
    ) -> None:
        super().__init__(scope, construct_id)
        if not stages:
            raise ValueError("the pipeline needs at least one stage")
        if max_budget_wait_secs >= EXPRESS_WAIT_LIMIT_SECS:
            # A wait is rounded up to whole seconds: the last one may pass max_wait_s by one.
            raise ValueError(
                f"pipeline.model.max_wait_s {max_budget_wait_secs} s: an Express execution "
                f"lasts at most 5 minutes, so under {EXPRESS_WAIT_LIMIT_SECS} s on AWS"
            )
        failure_path = self._failure_path(dead_letter_function, pipeline_dlq, retry)
        chain: sfn.IChainable | None = None
        last: sfn.INextable | None = None
        for index, stage in enumerate(stages):
            task = tasks.LambdaInvoke(
                self,
                stage.name,
                lambda_function=functions[stage.name],
                payload_response_only=True,
                # The first stage reads the batch; each later one the previous output.
                input_path="$.batch" if index == 0 else "$.payload",
                result_path="$.payload",
                retry_on_service_exceptions=False,  # one Retry, below, covers them
            )
            task.add_retry(
                errors=[*transient_error_names(), *LAMBDA_TRANSIENT_ERRORS],
                interval=retry.interval,
                max_attempts=retry.max_attempts,
                backoff_rate=2,
                jitter_strategy=sfn.JitterType.FULL,
            )
            failed = sfn.Pass(
                self,
                f"{stage.name} failed",
                parameters={
                    "stage": stage.name,
                    "batch.$": "$.batch",
                    "failure.$": "$.failure",
                },
            )
            failed.next(failure_path)
            if stage.waits_for_budget:
                # Before the catch-all: a catcher matches by the first that names the error.
                task.add_catch(
                    self._budget_line(stage.name, task, failed),
                    errors=[errors.BudgetWait.__name__],
                    result_path="$.budget.error",
                )
            task.add_catch(failed, errors=[sfn.Errors.ALL], result_path="$.failure")
            if last is None:
                chain = task
            else:
                last.next(task)
            last = task
        assert chain is not None and last is not None
        last.next(
            sfn.Pass(
                self,
                "Done",
                parameters={"status": "done", "turn_ids.$": "$.batch.turns[*].turn_id"},
            )
        )
        batches = sfn.Map(
            self,
            "Batches",
            items_path="$.batches",
            item_selector={"batch.$": "$$.Map.Item.Value", "budget": {"waited_s": 0}},
            max_concurrency=map_concurrency,
        )
        batches.item_processor(chain)
        batches.add_catch(
            self._execution_failure_path(pipeline_dlq, retry),
            errors=[sfn.Errors.ALL],
            result_path="$.failure",
        )
        self.log_group = logs.LogGroup(
            self, "Logs", retention=log_retention, removal_policy=removal_policy
        )
        self.state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            definition_body=sfn.DefinitionBody.from_chainable(batches),
            state_machine_type=sfn.StateMachineType.EXPRESS,
            # Express's longest run (started asynchronously: nobody waits for it).
            timeout=cdk.Duration.minutes(5),
            tracing_enabled=True,
            logs=sfn.LogOptions(
                destination=self.log_group,
                level=log_level,
                include_execution_data=False,  # payloads hold turn text
            ),
        )

        if log_level is not sfn.LogLevel.ALL:
            cdk.Validations.of(self).acknowledge(
                cdk.Acknowledgment(
                    id="AwsSolutions-SF1",
                    reason="ERROR-level execution logs in staging and prod: ALL would log ~20 "
                    "events per execution (~4 GB/day at 1M turns); X-Ray traces every run.",
                )
            )
        cdk.Validations.of(self).acknowledge(
            cdk.Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason="X-Ray and CloudWatch Logs delivery (logs:CreateLogDelivery and the "
                "like) support no resource-level permissions; CDK adds them for tracing and "
                "execution logging.",
            )
        )

    def _budget_line(self, stage: str, task: sfn.IChainable, failed: sfn.Pass) -> sfn.IChainable:
        """A batch waiting for the model budget (`BudgetWait`, docs/budget.md) waits here its
        place in its tenant's line, since nobody holds its queue message (asynchronous
        starts). The Catch's `Cause` is the Lambda's error response as JSON; its
        `errorMessage`, BudgetWait's JSON, gives `wait_s`; a Wait state waits that many
        seconds, then the task runs again on the same iteration state. The loop ends:
        extraction defers the batch as episodes (`DeferredBudget`) once `max_wait_s` has
        passed since its turns were accepted; should it not, an iteration whose waits would
        pass EXPRESS_WAIT_LIMIT_SECS goes to the failure path instead of running out of the
        execution's 5 minutes (which no Catch sees)."""
        read = sfn.Pass(
            self,
            f"{stage} waits for the budget",
            parameters={"response.$": "States.StringToJson($.budget.error.Cause)"},
            result_path="$.budget.error",
        )
        place = sfn.Pass(
            self,
            f"{stage}: its place in line",
            parameters={
                "wait.$": "States.StringToJson($.budget.error.response.errorMessage)",
                "waited_s.$": "$.budget.waited_s",
            },
            result_path="$.budget",
        )
        count = sfn.Pass(
            self,
            f"{stage}: waited in all",
            parameters={
                "wait.$": "$.budget.wait",
                "waited_s.$": "States.MathAdd($.budget.waited_s, $.budget.wait.wait_s)",
            },
            result_path="$.budget",
        )
        too_long = sfn.Pass(
            self,
            f"{stage}: waited too long",
            parameters={
                "Error": errors.BudgetWait.__name__,
                "Cause": f"waits for the model budget past {EXPRESS_WAIT_LIMIT_SECS} s in one "
                "execution (extraction should have deferred the batch: max_wait_s)",
            },
            result_path="$.failure",
        )
        wait = sfn.Wait(
            self,
            f"{stage}: wait its place",
            time=sfn.WaitTime.seconds_path("$.budget.wait.wait_s"),
        )
        within = (
            sfn.Choice(self, f"{stage}: within the execution")
            .when(
                sfn.Condition.number_greater_than("$.budget.waited_s", EXPRESS_WAIT_LIMIT_SECS),
                too_long.next(failed),
            )
            .otherwise(wait.next(task))
        )
        return read.next(place).next(count).next(within)

    def _failure_path(
        self, dead_letter_function: lambda_.IFunction, dlq: sqs.IQueue, retry: RetryPolicy
    ) -> sfn.IChainable:
        record = tasks.LambdaInvoke(
            self,
            "Record failure",
            lambda_function=dead_letter_function,
            payload_response_only=True,
            result_path=sfn.JsonPath.DISCARD,
            retry_on_service_exceptions=False,
        )
        send = tasks.SqsSendMessage(
            self,
            "Send to DLQ",
            queue=dlq,
            message_body=sfn.TaskInput.from_json_path_at("$"),
            result_path=sfn.JsonPath.DISCARD,
        )
        for task in (record, send):
            # Retried on anything: should the failure path itself fail, the Map fails and its
            # Catch sends the execution's batches to the DLQ (`_execution_failure_path`).
            task.add_retry(
                errors=[sfn.Errors.ALL],
                interval=retry.interval,
                max_attempts=retry.max_attempts,
                backoff_rate=2,
            )
        done = sfn.Pass(
            self,
            "Dead-lettered",
            parameters={
                "status": "dead_lettered",
                "stage.$": "$.stage",
                "error.$": "$.failure.Error",
                "turn_ids.$": "$.batch.turns[*].turn_id",
            },
        )
        return record.next(send).next(done)

    def _execution_failure_path(self, dlq: sqs.IQueue, retry: RetryPolicy) -> sfn.IChainable:
        """The Map failed as a whole: every batch of the execution, with the error, to the
        pipeline DLQ (one message: `{"batches": [...], "failure": {...}}`)."""
        send = tasks.SqsSendMessage(
            self,
            "Send execution to DLQ",
            queue=dlq,
            message_body=sfn.TaskInput.from_object(
                {
                    "stage": "execution",
                    "batches": sfn.JsonPath.object_at("$.batches"),
                    "failure": sfn.JsonPath.object_at("$.failure"),
                }
            ),
            result_path=sfn.JsonPath.DISCARD,
        )
        send.add_retry(
            errors=[sfn.Errors.ALL],
            interval=retry.interval,
            max_attempts=retry.max_attempts,
            backoff_rate=2,
        )
        return send.next(
            sfn.Pass(
                self,
                "Execution dead-lettered",
                parameters={"status": "dead_lettered", "error.$": "$.failure.Error"},
            )
        )
