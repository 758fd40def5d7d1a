"""The webhook delivery lane as deployed: its own standard queue whose redrive outlasts the
retries, a DLQ with an alarm, the consumer function on it (partial batch responses), and
grants that let stage 7 only send and the consumer only consume, read the webhooks and write
spans."""

from __future__ import annotations

from typing import Any

import pytest

from infra.stack import construct_id
from infra.webhooks import DELIVERY_BATCH, DELIVERY_SIZE
from memwrite.config.environment import LambdaEnvironment
from memwrite.feed.delivery import MAX_ATTEMPTS, RETRY_WINDOW_SECS
from memwrite.stages import stream_stages
from tests.infrastructure.conftest import Synthesized
from tests.infrastructure.test_function_wiring import (
    ENVS,
    _actions,
    _statements,
    environment,
    our_functions,
)
from tests.infrastructure.test_stacks import _actions_on, resources

LANE_FUNCTION = "webhook_delivery"
CONSUME = {
    "sqs:ReceiveMessage",
    "sqs:ChangeMessageVisibility",
    "sqs:GetQueueUrl",
    "sqs:DeleteMessage",
    "sqs:GetQueueAttributes",
}


def lane_queues(synth: Synthesized) -> tuple[str, dict[str, Any], str, dict[str, Any]]:
    """(queue id, queue, DLQ id, DLQ) of the lane."""
    queues = resources(synth, "AWS::SQS::Queue")
    (queue_id,) = [k for k in queues if k.startswith("WebhookLaneQueue")]
    (dlq_id,) = [k for k in queues if k.startswith("WebhookLaneDlq")]
    return queue_id, queues[queue_id], dlq_id, queues[dlq_id]


def on_queue(synth: Synthesized, function: str, queue_id: str) -> set[str]:
    """What a function's role may do to the queue."""
    return {
        action
        for statement in _statements(synth, construct_id(function))
        if statement["Resource"] == {"Fn::GetAtt": [queue_id, "Arn"]}
        for action in _actions(statement)
    }


@pytest.mark.parametrize("env", ENVS)
def test_the_lane_queue_dead_letters_after_the_retries_and_keeps_messages_longer(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    synth = synthesized[env]
    _, queue, dlq_id, dlq = lane_queues(synth)
    props = queue["Properties"]
    # A standard queue (no FIFO group may hold one receiver's deliveries behind another's)
    assert "FifoQueue" not in props
    # That gives up after MAX_ATTEMPTS receives, into its own DLQ
    assert props["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [dlq_id, "Arn"]},
        "maxReceiveCount": MAX_ATTEMPTS,
    }
    # And keeps a message well past the retries (5 h), the DLQ for SQS's longest
    assert props["MessageRetentionPeriod"] > RETRY_WINDOW_SECS + 86_400
    assert dlq["Properties"]["MessageRetentionPeriod"] == 14 * 86_400
    # A crashed invocation's batch comes back after six function timeouts
    assert props["VisibilityTimeout"] == 6 * DELIVERY_SIZE.timeout_secs
    for queue_props in (props, dlq["Properties"]):
        assert queue_props["SqsManagedSseEnabled"] is True


@pytest.mark.parametrize("env", ENVS)
def test_the_consumer_function_takes_the_queue_in_batches_with_partial_failures(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    synth = synthesized[env]
    queue_id, *_ = lane_queues(synth)
    (mapping,) = [
        m["Properties"]
        for m in resources(synth, "AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["EventSourceArn"] == {"Fn::GetAtt": [queue_id, "Arn"]}
    ]
    assert mapping["FunctionName"]["Ref"].startswith(construct_id(LANE_FUNCTION))
    assert mapping["BatchSize"] == DELIVERY_BATCH
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    # Each attempt waits at most 5 s: a whole batch fits in the function's timeout
    (function,) = [props for name, props in our_functions(synth).items() if name == LANE_FUNCTION]
    assert function["Timeout"] == DELIVERY_SIZE.timeout_secs >= DELIVERY_BATCH * 5 + 30
    assert function["Handler"] == "functions.webhook_delivery.handler.lambda_handler"


@pytest.mark.parametrize("env", ENVS)
def test_stage_7_may_only_send_and_the_consumer_only_consume(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    synth = synthesized[env]
    queue_id, _, dlq_id, _ = lane_queues(synth)
    producers = {stage.name for stage in stream_stages()}
    assert producers == {"hype"}
    for name, props in our_functions(synth).items():
        loaded = LambdaEnvironment.load(environment(synth, props))
        allowed = on_queue(synth, name, queue_id)
        if name in producers:
            assert allowed == {"sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"}
        elif name == LANE_FUNCTION:
            assert allowed == CONSUME
        else:
            assert allowed == set(), name
        # Only those two know the queue; nobody is given the DLQ
        expected = f"resolved-{queue_id}" if name in {*producers, LANE_FUNCTION} else None
        assert loaded.webhook_queue_url == expected, name
        assert loaded.webhook_dead_letter_url is None, name
        assert on_queue(synth, name, dlq_id) == set(), name


def test_the_consumer_reads_webhooks_and_traces_and_writes_spans_only(
    synthesized: dict[str, Synthesized],
) -> None:
    synth = synthesized["dev"]
    function = construct_id(LANE_FUNCTION)
    assert "dynamodb:PutItem" not in _actions_on(synth, function, "TablesTenantSettings")
    assert "dynamodb:GetItem" in _actions_on(synth, function, "TablesTenantSettings")
    assert "dynamodb:PutItem" not in _actions_on(synth, function, "TablesTurns")
    assert "dynamodb:GetItem" in _actions_on(synth, function, "TablesTurns")
    assert "dynamodb:BatchWriteItem" in _actions_on(synth, function, "TablesSpans")
    for table in ("TablesMemories", "TablesOutbox", "TablesEntit", "TablesApiKeys"):
        assert _actions_on(synth, function, table) == set(), table
    # And no model, no search index
    statements = _statements(synth, function)
    assert not any(a.startswith(("bedrock:", "aoss:")) for s in statements for a in _actions(s))


@pytest.mark.parametrize("env", ENVS)
def test_a_delivery_in_the_dlq_pages_someone_and_the_lane_has_its_dashboard_section(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    synth = synthesized[env]
    _, _, dlq_id, _ = lane_queues(synth)
    alarms = resources(synth, "AWS::CloudWatch::Alarm")
    (alarm,) = [a["Properties"] for k, a in alarms.items() if "WebhookDeliveryDlqDepth" in k]
    assert alarm["MetricName"] == "ApproximateNumberOfMessagesVisible"
    assert alarm["Dimensions"] == [
        {"Name": "QueueName", "Value": {"Fn::GetAtt": [dlq_id, "QueueName"]}}
    ]
    assert alarm["Threshold"] == synth.config.alarms.dlq_messages
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert len(alarm["AlarmActions"]) == 1
    assert "receiver keeps failing" in alarm["AlarmDescription"]
    (dashboard,) = resources(synth, "AWS::CloudWatch::Dashboard").values()
    body = str(dashboard["Properties"]["DashboardBody"])
    for title in ("queue depth / oldest delivery age", "attempts by outcome", "(DLQ)"):
        assert f"{LANE_FUNCTION}: " in body and title in body
