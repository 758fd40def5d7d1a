"""The dashboard (a section per stage) and the alarms, from the same stage list.

Metrics are the library's EMF metrics (namespace `memwrite`: `items{Stage, Outcome, Reason}`,
`latency{Stage}`, `extraction_json_fail`, `prefilter.*`, and `llm.calls`, `llm.input_tokens`,
`llm.output_tokens`, `llm.cache_read_input_tokens`, `llm.cache_creation_input_tokens`,
`llm.cost_usd` by {Stage, Model} for the stages that call a model, and `tenant.cost_usd` by
{Tenant}: the $ per tenant, `memwrite.metering`), the Lambda, SQS and Step Functions service
metrics, and the indexer's `IteratorAge` (the outbox lag).
"""

from __future__ import annotations

import typing
from collections.abc import Mapping, Sequence

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from infra.config import AlarmThresholds
from memwrite.backfill.near_expiry import NEAR_EXPIRY_METRIC
from memwrite.feed.delivery import LANE, MAX_ATTEMPTS, RETRY_WINDOW_SECS
from memwrite.metering.meter import METRICS_STAGE as METERING_STAGE
from memwrite.metering.meter import UNMETERED_METRIC
from memwrite.reasons import SkipReason
from memwrite.stages import StageDef, StagePlacement

__all__ = ["NAMESPACE", "Monitoring", "prefilter_reject_reasons"]

NAMESPACE = "memwrite"
_PERIOD = cdk.Duration.minutes(5)


def prefilter_reject_reasons() -> list[str]:
    """The reason types a pre-filter rejection carries (the library's `SkipReason` union)."""
    union = typing.get_args(SkipReason)[0]
    return sorted(model.model_fields["type"].default for model in typing.get_args(union))


def _items(stage: str, outcome: str, reason: str) -> cw.Metric:
    return cw.Metric(
        namespace=NAMESPACE,
        metric_name="items",
        dimensions_map={"Stage": stage, "Outcome": outcome, "Reason": reason},
        statistic="Sum",
        period=_PERIOD,
    )


def _stage_metric(stage: str, name: str, statistic: str = "Sum") -> cw.Metric:
    return cw.Metric(
        namespace=NAMESPACE,
        metric_name=name,
        dimensions_map={"Stage": stage},
        statistic=statistic,
        period=_PERIOD,
    )


def _by_reason(stage: str, outcome: str) -> cw.MathExpression:
    """Every reason of one stage and outcome, one line each (a SEARCH: reasons are open)."""
    return cw.MathExpression(
        expression=(
            f'SEARCH(\'{{{NAMESPACE},Outcome,Reason,Stage}} MetricName="items" '
            f'Stage="{stage}" Outcome="{outcome}"\', \'Sum\', 300)'
        ),
        label=f"{stage} {outcome} by reason",
        period=_PERIOD,
    )


def _by_outcome(stage: str) -> cw.MathExpression:
    """Every outcome of one stage, one line each (hype counts `indexed` and `removed`)."""
    return cw.MathExpression(
        expression=(
            f'SEARCH(\'{{{NAMESPACE},Outcome,Reason,Stage}} MetricName="items" '
            f"Stage=\"{stage}\"', 'Sum', 300)"
        ),
        label=f"{stage} by outcome",
        period=_PERIOD,
    )


def _llm(metric: str, stage: str | None = None) -> cw.MathExpression:
    """An `llm.*` metric, one line per stage and model family (a SEARCH: the models are the
    deployment's choice); `stage` narrows it to one stage."""
    where = f' Stage="{stage}"' if stage else ""
    return cw.MathExpression(
        expression=(
            f"SEARCH('{{{NAMESPACE},Model,Stage}} MetricName=\"llm.{metric}\"{where}', 'Sum', 300)"
        ),
        label=f"{stage or 'all stages'} {metric}",
        period=_PERIOD,
    )


def _llm_cost_total() -> cw.MathExpression:
    """Every stage's and model's cost summed; the SEARCH takes the widget's period (no third
    argument), so a single-value widget over the time range shows the range's total."""
    search = f"SEARCH('{{{NAMESPACE},Model,Stage}} MetricName=\"llm.cost_usd\"', 'Sum')"
    return cw.MathExpression(
        expression=f"SUM({search})", label="total LLM cost (USD)", period=_PERIOD
    )


def _tenant_cost() -> cw.MathExpression:
    """The model calls' cost of each tenant, one line per tenant (a SEARCH: tenants come and
    go without a redeploy)."""
    search = f'{{{NAMESPACE},Tenant}} MetricName="tenant.cost_usd"'
    return cw.MathExpression(
        expression=f"SEARCH('{search}', 'Sum', 300)",
        label="cost (USD) by tenant",
        period=_PERIOD,
    )


def _iterator_age(function: lambda_.IFunction) -> cw.Metric:
    """The outbox lag: how old the newest record a stream consumer has taken was."""
    return function.metric("IteratorAge", statistic="Maximum", period=_PERIOD)


class Monitoring(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        dashboard_name: str,
        stages: Sequence[StageDef],
        functions: Mapping[str, lambda_.IFunction],
        turn_queue: sqs.IQueue,
        dead_letter_queues: Sequence[sqs.IQueue],
        stream_dead_letter_queues: Sequence[sqs.IQueue],
        state_machine: sfn.IStateMachine,
        thresholds: AlarmThresholds,
        alarm_email: str | None,
        extraction_model: str,
        webhook_queue: sqs.IQueue | None = None,
        webhook_dead_letter_queue: sqs.IQueue | None = None,
    ) -> None:
        """`extraction_model` is the extraction model's family (the `Model` dimension)."""
        super().__init__(scope, construct_id)
        self.topic = sns.Topic(self, "Alarms", enforce_ssl=True)
        if alarm_email:
            self.topic.add_subscription(subscriptions.EmailSubscription(alarm_email))
        self.alarms: list[cw.Alarm] = []
        self.dashboard = cw.Dashboard(self, "Dashboard", dashboard_name=dashboard_name)
        self.dashboard.add_widgets(*self._overview(turn_queue, dead_letter_queues, state_machine))
        self._stream_dlqs = list(stream_dead_letter_queues)
        for stage in stages:
            function = functions[stage.name]
            self.dashboard.add_widgets(*self._stage_section(stage, function, thresholds))
            self._stage_error_alarm(stage, function, thresholds)
            if stage.placement is StagePlacement.STREAM:
                self._outbox_lag_alarm(stage, function, thresholds)
        for queue in dead_letter_queues:
            self._alarm(
                f"{queue.node.id}Depth",
                queue.metric_approximate_number_of_messages_visible(period=_PERIOD),
                threshold=thresholds.dlq_messages,
                evaluation_periods=1,
                description="Messages are waiting in a dead-letter queue.",
            )
        self._prefilter_rate_alarm(thresholds)
        self._alarm(
            "DeferredBudget",
            _stage_metric("extract", "extraction.deferred_budget"),
            threshold=thresholds.deferred_budget_turns,
            evaluation_periods=1,
            description="Live turns waited pipeline.model.max_wait_s for the model budget and "
            "were deferred as episodes (DeferredBudget): demand is above the model's limits.",
        )
        self._cache_reads_idle_alarm(extraction_model, thresholds)
        self._alarm(
            "UsageUnmetered",
            _stage_metric(METERING_STAGE, UNMETERED_METRIC),
            threshold=thresholds.unmetered_usage,
            evaluation_periods=1,
            description="Work was done and paid for but its usage counters could not be "
            "written (the usage table refused): GET /v1/usage and tenant.cost_usd undercount. "
            "The function's log names the tenant and the error.",
        )
        self._alarm(
            "PendingEpisodesNearExpiry",
            # The scheduled backfill counts them hourly: an hour's period holds one count.
            cw.Metric(
                namespace=NAMESPACE,
                metric_name=NEAR_EXPIRY_METRIC,
                dimensions_map={"Stage": "backfill"},
                statistic="Maximum",
                period=cdk.Duration.hours(1),
            ),
            threshold=thresholds.pending_near_expiry_episodes,
            evaluation_periods=1,
            description="Pending episodes are within episodes.expiry_warning_days of their "
            "expiry and no model is configured to distil them: their words go at expiry. "
            "Configure a model (the scheduled backfill then distils them).",
        )
        if webhook_queue is not None and webhook_dead_letter_queue is not None:
            self._webhook_lane(webhook_queue, webhook_dead_letter_queue, thresholds)

    def _alarm(
        self,
        construct_id: str,
        metric: cw.IMetric,
        *,
        threshold: float,
        evaluation_periods: int,
        description: str,
    ) -> cw.Alarm:
        alarm = cw.Alarm(
            self,
            construct_id,
            metric=metric,
            threshold=threshold,
            evaluation_periods=evaluation_periods,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            alarm_description=description,
        )
        alarm.add_alarm_action(cw_actions.SnsAction(self.topic))
        self.alarms.append(alarm)
        return alarm

    def _overview(
        self,
        turn_queue: sqs.IQueue,
        dead_letter_queues: Sequence[sqs.IQueue],
        state_machine: sfn.IStateMachine,
    ) -> list[cw.IWidget]:
        return [
            cw.TextWidget(
                markdown="# memwrite: queue, executions, dead letters", width=24, height=1
            ),
            cw.GraphWidget(
                title="Turn queue depth / oldest message age",
                left=[turn_queue.metric_approximate_number_of_messages_visible(period=_PERIOD)],
                right=[turn_queue.metric_approximate_age_of_oldest_message(period=_PERIOD)],
                width=8,
            ),
            cw.GraphWidget(
                title="DLQ depth",
                left=[
                    q.metric_approximate_number_of_messages_visible(period=_PERIOD, label=q.node.id)
                    for q in dead_letter_queues
                ],
                width=8,
            ),
            cw.GraphWidget(
                title="Executions",
                left=[
                    state_machine.metric_succeeded(period=_PERIOD),
                    state_machine.metric_failed(period=_PERIOD),
                    state_machine.metric_timed_out(period=_PERIOD),
                ],
                width=8,
            ),
            cw.GraphWidget(
                title="Dead-lettered turns",
                left=[_by_reason("dead_letter", "error")],
                width=8,
            ),
            cw.GraphWidget(
                title="LLM cost (USD per 5 min) by stage and model",
                left=[_llm("cost_usd"), _llm_cost_total()],
                width=8,
            ),
            cw.SingleValueWidget(
                title="LLM cost (USD) over the dashboard's time range",
                metrics=[_llm_cost_total()],
                set_period_to_time_range=True,
                width=8,
            ),
            cw.GraphWidget(
                title="Model cost (USD per 5 min) by tenant",
                left=[_tenant_cost()],
                width=8,
            ),
        ]

    def _stage_section(
        self, stage: StageDef, function: lambda_.IFunction, thresholds: AlarmThresholds
    ) -> list[cw.IWidget]:
        name = stage.name
        widgets = self._common_widgets(stage, function)
        if stage.calls_model:
            widgets += [
                cw.GraphWidget(
                    title=f"{name}: LLM calls / cost (USD)",
                    left=[_llm("calls", name)],
                    right=[_llm("cost_usd", name)],
                    width=12,
                ),
                cw.GraphWidget(
                    title=f"{name}: LLM tokens in / out",
                    left=[_llm("input_tokens", name)],
                    right=[_llm("output_tokens", name)],
                    width=12,
                ),
            ]
        if stage.placement is StagePlacement.STREAM:
            widgets += [
                cw.GraphWidget(
                    title=f"{name}: outbox lag (stream iterator age, ms)",
                    left=[_iterator_age(function)],
                    left_annotations=[
                        cw.HorizontalAnnotation(
                            value=thresholds.outbox_lag_secs * 1000, label="alarm"
                        )
                    ],
                    width=8,
                ),
                cw.GraphWidget(
                    title=f"{name}: outbox rows indexed / removed",
                    left=[_by_outcome(name)],
                    width=8,
                ),
                cw.GraphWidget(
                    title=f"{name}: records given up (stream DLQ)",
                    left=[
                        q.metric_approximate_number_of_messages_visible(period=_PERIOD)
                        for q in self._stream_dlqs
                    ],
                    width=8,
                ),
            ]
        return widgets

    def _common_widgets(self, stage: StageDef, function: lambda_.IFunction) -> list[cw.IWidget]:
        name = stage.name
        return [
            cw.TextWidget(markdown=f"## {name} ({stage.placement.value})", width=24, height=1),
            cw.GraphWidget(
                title=f"{name}: rejections per reason",
                left=[_by_reason(name, "reject")],
                width=6,
            ),
            cw.GraphWidget(
                title=f"{name}: latency p50 / p99",
                left=[
                    _stage_metric(name, "latency", "p50"),
                    _stage_metric(name, "latency", "p99"),
                ],
                width=6,
            ),
            cw.GraphWidget(
                title=f"{name}: errors",
                left=[
                    function.metric_errors(period=_PERIOD),
                    function.metric_throttles(period=_PERIOD),
                    _by_reason(name, "error"),
                ],
                width=6,
            ),
            cw.GraphWidget(
                # Only a stage that reads model answers has malformed ones to show.
                title=f"{name}: passed / transformed"
                + (" / malformed LLM output" if stage.malformed_metrics else ""),
                left=[_by_reason(name, "pass"), _by_reason(name, "transform")],
                right=[_stage_metric(name, metric) for metric in stage.malformed_metrics],
                width=6,
            ),
        ]

    def _stage_error_alarm(
        self, stage: StageDef, function: lambda_.IFunction, thresholds: AlarmThresholds
    ) -> None:
        rate = cw.MathExpression(
            expression="100 * errors / MAX([invocations, 1])",
            using_metrics={
                "errors": function.metric_errors(period=_PERIOD),
                "invocations": function.metric_invocations(period=_PERIOD),
            },
            label=f"{stage.name} error rate (%)",
            period=_PERIOD,
        )
        self._alarm(
            f"{stage.name}ErrorRate",
            rate,
            threshold=thresholds.stage_error_rate_pct,
            evaluation_periods=thresholds.evaluation_periods,
            description=f"Stage {stage.name}: Lambda errors above "
            f"{thresholds.stage_error_rate_pct} % of invocations.",
        )

    def _outbox_lag_alarm(
        self, stage: StageDef, function: lambda_.IFunction, thresholds: AlarmThresholds
    ) -> None:
        self._alarm(
            f"{stage.name}OutboxLag",
            _iterator_age(function),
            threshold=thresholds.outbox_lag_secs * 1000,
            evaluation_periods=thresholds.evaluation_periods,
            description=f"Outbox lag: {stage.name} is more than "
            f"{thresholds.outbox_lag_secs} s behind the outbox stream.",
        )

    def _cache_reads_idle_alarm(self, model: str, thresholds: AlarmThresholds) -> None:
        """Extraction calls flow but none reads the prompt cache: the cached prefix is under
        the model's minimum cacheable length (the API says nothing), or every call changed it.
        Alarms cannot use SEARCH: the model is the deployed extraction model's family."""

        def metric(name: str) -> cw.Metric:
            return cw.Metric(
                namespace=NAMESPACE,
                metric_name=name,
                dimensions_map={"Stage": "extract", "Model": model},
                statistic="Sum",
                period=_PERIOD,
            )

        self._alarm(
            "CacheReadsIdle",
            cw.MathExpression(
                expression=f"IF(calls >= {thresholds.cache_idle_min_calls} AND "
                "FILL(reads, 0) == 0, 1, 0)",
                using_metrics={
                    "calls": metric("llm.calls"),
                    "reads": metric("llm.cache_read_input_tokens"),
                },
                label="extraction calls without a cache read",
                period=_PERIOD,
            ),
            threshold=1,
            evaluation_periods=thresholds.evaluation_periods,
            description="Extraction calls flow but none reads the prompt cache "
            "(llm.cache_read_input_tokens stays 0): the cached prefix is under the model's "
            "minimum cacheable length, or it changes between calls. Every call pays the full "
            "input price (docs/operations.md).",
        )

    def _prefilter_rate_alarm(self, thresholds: AlarmThresholds) -> None:
        """A sudden change of the pre-filter rejection rate: the upstream agents changed style.

        An anomaly-detection band around `rejected / screened` (every rejection reason summed;
        alarms cannot use SEARCH, so the reasons come from the library's `SkipReason`)."""
        reasons = prefilter_reject_reasons()
        metrics = [
            {
                "id": f"r{index}",
                "metricStat": {
                    "metric": {
                        "namespace": NAMESPACE,
                        "metricName": "items",
                        "dimensions": [
                            {"name": "Stage", "value": "pre_filter"},
                            {"name": "Outcome", "value": "reject"},
                            {"name": "Reason", "value": reason},
                        ],
                    },
                    "period": 300,
                    "stat": "Sum",
                },
                "returnData": False,
            }
            for index, reason in enumerate(reasons)
        ]
        screened = {
            "id": "screened",
            "metricStat": {
                "metric": {
                    "namespace": NAMESPACE,
                    "metricName": "prefilter.screened",
                    "dimensions": [{"name": "Stage", "value": "pre_filter"}],
                },
                "period": 300,
                "stat": "Sum",
            },
            "returnData": False,
        }
        total = " + ".join(f"FILL(r{index}, 0)" for index in range(len(reasons)))
        rate = {
            "id": "rate",
            "expression": f"100 * ({total}) / screened",
            "label": "pre-filter rejection rate (%)",
            "returnData": True,
        }
        band = {
            "id": "band",
            "expression": f"ANOMALY_DETECTION_BAND(rate, {thresholds.prefilter_rate_band_stddevs})",
            "label": "expected band",
            "returnData": True,
        }
        alarm = cw.CfnAlarm(
            self,
            "PrefilterRejectionRateShift",
            alarm_description="The pre-filter rejection rate left its usual band: the upstream "
            "agents' style may have changed (check the per-rule rates on the dashboard).",
            comparison_operator="LessThanLowerOrGreaterThanUpperThreshold",
            evaluation_periods=thresholds.evaluation_periods,
            threshold_metric_id="band",
            treat_missing_data="notBreaching",
            metrics=[*metrics, screened, rate, band],
            alarm_actions=[self.topic.topic_arn],
        )
        self.prefilter_rate_alarm = alarm

    def _webhook_lane(
        self, queue: sqs.IQueue, dlq: sqs.IQueue, thresholds: AlarmThresholds
    ) -> None:
        """The webhook delivery lane's section, and the alarm of a receiver that keeps failing:
        a delivery in its DLQ failed every one of its attempts over about 5 hours."""
        self.dashboard.add_widgets(
            cw.TextWidget(markdown=f"## {LANE} (lane)", width=24, height=1),
            cw.GraphWidget(
                title=f"{LANE}: queue depth / oldest delivery age",
                left=[queue.metric_approximate_number_of_messages_visible(period=_PERIOD)],
                right=[queue.metric_approximate_age_of_oldest_message(period=_PERIOD)],
                width=8,
            ),
            cw.GraphWidget(
                title=f"{LANE}: attempts by outcome",
                left=[_by_outcome(LANE)],
                width=8,
            ),
            cw.GraphWidget(
                title=f"{LANE}: deliveries given up (DLQ)",
                left=[dlq.metric_approximate_number_of_messages_visible(period=_PERIOD)],
                width=8,
            ),
        )
        hours = RETRY_WINDOW_SECS / 3600
        self.webhook_dlq_alarm = self._alarm(
            "WebhookDeliveryDlqDepth",
            dlq.metric_approximate_number_of_messages_visible(period=_PERIOD),
            threshold=thresholds.dlq_messages,
            evaluation_periods=1,
            description=f"A webhook receiver keeps failing: a change-feed delivery failed all "
            f"{MAX_ATTEMPTS} attempts (over {hours:.0f} h) and waits in the webhook DLQ "
            "(14 days; docs/change-feed.md says how to redrive it).",
        )
