"""The webhook queue's contract (`WebhookQueue`, both ends), run against SQS on moto (a
standard queue with a redrive policy, as deployed) and the SQLite queue of the embedded mode:
one suite, the same answers. Each test makes its own queue."""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import boto3
import pytest

from memwrite.adapters.aws.sqs_webhooks import SqsWebhookQueue
from memwrite.adapters.sqlite.database import SqliteDatabase
from memwrite.adapters.sqlite.webhook_queue import SqliteWebhookQueue
from memwrite.feed import MAX_ATTEMPTS, hook_id
from memwrite.payloads import OutboxChange
from memwrite.ports import WebhookQueue
from memwrite.records.change_events import WebhookDelivery, event_for_change
from memwrite_local.runtime.aws import LocalAws

NOW = 1_790_000_000.0  # the consumer's clock (SQLite keeps time by it; SQS by its own)
AT = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
_ids = itertools.count()


NewQueue = Callable[[int], WebhookQueue]  # a fresh queue dead-lettering after that many receives


@pytest.fixture(scope="module", params=["moto", "sqlite"])
def new_queue(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[NewQueue]:
    if request.param == "sqlite":
        directory = Path(tmp_path_factory.mktemp("sqlite"))

        def sqlite_queue(max_receives: int) -> WebhookQueue:
            database = SqliteDatabase(directory / uuid.uuid4().hex[:12])
            return SqliteWebhookQueue(database, max_receives=max_receives)

        yield sqlite_queue
        return
    with LocalAws():
        sqs = boto3.client("sqs")

        def sqs_queue(max_receives: int) -> WebhookQueue:
            suffix = uuid.uuid4().hex[:12]
            dead_url = sqs.create_queue(QueueName=f"webhooks-dead-{suffix}")["QueueUrl"]
            dead_arn = sqs.get_queue_attributes(QueueUrl=dead_url, AttributeNames=["QueueArn"])[
                "Attributes"
            ]["QueueArn"]
            redrive = {"deadLetterTargetArn": dead_arn, "maxReceiveCount": max_receives}
            queue_url = sqs.create_queue(
                QueueName=f"webhooks-{suffix}",
                Attributes={"RedrivePolicy": json.dumps(redrive)},
            )["QueueUrl"]
            return SqsWebhookQueue(sqs, queue_url, dead_url)

        yield sqs_queue


def delivery(url: str = "https://hooks.example.com/memwrite") -> WebhookDelivery:
    change = OutboxChange(
        tenant="acme", user_id="dana", memory_id=f"m{next(_ids):031d}", rev=1, trace_id="t-1"
    )
    return WebhookDelivery(event=event_for_change(change, None, AT), hook_id=hook_id(url), rev=1)


def test_a_queued_delivery_is_received_as_sent_and_hidden_while_in_flight(
    new_queue: NewQueue,
) -> None:
    # Given two deliveries handed over
    queue = new_queue(25)
    sent = [delivery(), delivery()]
    queue.enqueue(sent)

    # When they are received / Then each comes once, as sent, on its first receive
    received = queue.receive(10, 30, now=NOW)
    assert sorted(m.delivery.delivery_id for m in received) == sorted(d.delivery_id for d in sent)
    assert {m.delivery for m in received} == set(sent)
    assert [m.receive_count for m in received] == [1, 1]
    # And while in flight they are hidden from another receive
    assert queue.receive(10, 30, now=NOW) == []


def test_a_deleted_delivery_is_gone(new_queue: NewQueue) -> None:
    queue = new_queue(25)
    queue.enqueue([delivery()])
    # Given it received with no visibility timeout (visible again at once)
    [message] = queue.receive(10, 0, now=NOW)
    # When deleted by its receipt / Then nothing is left to receive
    queue.delete([message])
    assert queue.receive(10, 0, now=NOW) == []


def test_retry_later_hides_a_delivery_for_its_backoff_then_it_comes_again(
    new_queue: NewQueue,
) -> None:
    # Given a delivery received once, whose attempt failed
    queue = new_queue(25)
    sent = delivery()
    queue.enqueue([sent])
    [first] = queue.receive(10, 30, now=NOW)

    # When its message is hidden for 15 minutes / Then a receive now does not see it
    queue.retry_later(first, 900, now=NOW)
    assert queue.receive(10, 30, now=NOW) == []

    # When the backoff has passed (here: set to end now) / Then it comes again, counted
    queue.retry_later(first, 0, now=NOW)
    [second] = queue.receive(10, 30, now=NOW)
    assert second.delivery == sent
    assert second.receive_count == 2


def test_a_delivery_received_as_often_as_allowed_goes_to_the_dead_letters(
    new_queue: NewQueue,
) -> None:
    # Given a queue that dead-letters after two receives, and a delivery received twice
    queue = new_queue(2)
    sent = delivery()
    queue.enqueue([sent])
    assert [m.receive_count for m in queue.receive(10, 0, now=NOW)] == [1]
    assert [m.receive_count for m in queue.receive(10, 0, now=NOW)] == [2]

    # When it is due a third time / Then it is not delivered but kept in the dead letters
    assert queue.receive(10, 0, now=NOW) == []
    assert queue.dead_letters(10) == [sent]
    assert queue.dead_letters(10) == [sent]  # reading leaves it there


def test_a_delivery_handed_over_twice_keeps_its_delivery_and_event_ids(
    new_queue: NewQueue,
) -> None:
    # Given one outbox row's delivery handed over twice (its stage-7 run retried)
    queue = new_queue(25)
    sent = delivery()
    queue.enqueue([sent])
    queue.enqueue([sent])

    # When everything queued is received / Then at most two copies, all the same delivery
    received = queue.receive(10, 30, now=NOW)
    assert 1 <= len(received) <= 2
    assert {m.delivery.delivery_id for m in received} == {sent.delivery_id}
    assert {m.delivery.event.event_id for m in received} == {sent.event.event_id}


def test_the_sqlite_queue_keeps_time_by_the_callers_clock(tmp_path: Path) -> None:
    # Given a delivery whose first attempt failed at NOW, hidden for 15 minutes
    queue = SqliteWebhookQueue(SqliteDatabase(tmp_path), max_receives=MAX_ATTEMPTS)
    queue.enqueue([delivery()])
    [first] = queue.receive(10, 30, now=NOW)
    queue.retry_later(first, 900, now=NOW)
    # Then a receive a second before the backoff ends sees nothing, one at its end sees it
    assert queue.receive(10, 30, now=NOW + 899) == []
    [again] = queue.receive(10, 30, now=NOW + 900)
    assert again.receive_count == 2
