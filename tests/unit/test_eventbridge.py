"""The EventBridge adapter on moto: a rule on the environment's bus routes the change feed's
events (source "memwrite", detail-type the event type) to an SQS queue, read back here; an
entry EventBridge rejects raises a transient error, so the outbox row stays pending."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from moto import mock_aws

from memwrite.adapters.aws.clients import events_client
from memwrite.adapters.aws.eventbridge import SOURCE, EventBridgePublisher
from memwrite.errors import EventsUnpublished, TransientError
from memwrite.records.change_events import ChangeEvent, EventType

BUS = "memwrite-test"


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        events = boto3.client("events")
        sqs = boto3.client("sqs")
        events.create_event_bus(Name=BUS)
        queue_url = sqs.create_queue(QueueName="feed")["QueueUrl"]
        queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        # A subscriber's rule: every memwrite event on the bus, to its queue
        events.put_rule(
            Name="to-queue", EventBusName=BUS, EventPattern=json.dumps({"source": [SOURCE]})
        )
        events.put_targets(
            Rule="to-queue", EventBusName=BUS, Targets=[{"Id": "queue", "Arn": queue_arn}]
        )
        yield {"sqs": sqs, "queue_url": queue_url}


def change_event(n: int, kind: EventType = EventType.MEMORY_CREATED) -> ChangeEvent:
    return ChangeEvent(
        event_id=f"evt-{n:02d}",
        type=kind,
        tenant="tenant-a",
        user_id="user-1",
        memory_id=f"mem-{n:02d}",
        trace_id=f"trace-{n:02d}",
        at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
    )


def received(aws: dict[str, Any]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    while True:
        batch = aws["sqs"].receive_message(QueueUrl=aws["queue_url"], MaxNumberOfMessages=10)
        if not batch.get("Messages"):
            return messages
        messages.extend(json.loads(m["Body"]) for m in batch["Messages"])


def test_published_events_reach_a_rule_on_the_bus_in_batches_of_ten(
    aws: dict[str, Any],
) -> None:
    client = events_client()
    calls: list[int] = []
    put_events = client.put_events

    def counting(**kwargs: Any) -> Any:
        calls.append(len(kwargs["Entries"]))
        return put_events(**kwargs)

    client.put_events = counting
    events = [change_event(n) for n in range(11)] + [change_event(11, EventType.MEMORY_ERASED)]

    # When twelve events are published
    EventBridgePublisher(client, BUS).publish(events)

    # Then they went in two calls (PutEvents takes ten at most)
    assert calls == [10, 2]
    # And the rule delivered every one: source memwrite, detail-type the event type, the
    # event's JSON as the detail
    messages = sorted(received(aws), key=lambda m: m["detail"]["event_id"])
    assert [m["detail"]["event_id"] for m in messages] == [e.event_id for e in events]
    assert {m["source"] for m in messages} == {"memwrite"}
    assert [m["detail-type"] for m in messages] == ["memory.created"] * 11 + ["memory.erased"]
    assert [ChangeEvent.model_validate(m["detail"]) for m in messages] == events


def test_a_rejected_entry_raises_a_transient_error_naming_the_event(
    aws: dict[str, Any],
) -> None:
    client = events_client()
    put_events = client.put_events

    def reject_second(**kwargs: Any) -> Any:
        response = put_events(**kwargs)
        response["FailedEntryCount"] = 1
        response["Entries"][1] = {"ErrorCode": "InternalFailure", "ErrorMessage": "try again"}
        return response

    client.put_events = reject_second

    # When one of three entries is rejected
    with pytest.raises(EventsUnpublished) as raised:
        EventBridgePublisher(client, BUS).publish([change_event(n) for n in range(3)])

    # Then the publish raised a transient error naming that event only
    assert isinstance(raised.value, TransientError)
    assert raised.value.failures == ["evt-01: InternalFailure"]


def test_a_bus_that_does_not_exist_raises_a_transient_error(aws: dict[str, Any]) -> None:
    with pytest.raises(EventsUnpublished) as raised:
        EventBridgePublisher(events_client(), "no-such-bus").publish([change_event(1)])
    assert raised.value.bus == "no-such-bus"
