"""The webhook delivery lane against a receiver that is down (issue 28): stage 7 makes no HTTP
call, so a memory is searchable as soon as with no webhook at all; the lane retries on its own
schedule through its queue, and once the receiver is back every event arrives, under the ids
of its first attempts. The hour passes on the lane's clock (the SQLite queue keeps time by the
`now` the runner hands it), never in a sleep. Last, the AWS consumer function on moto."""

from __future__ import annotations

import itertools
import time
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import boto3
import httpx
import pytest

from functions.webhook_delivery import handler as delivery_handler
from memwrite.adapters.sqlite.webhook_queue import SqliteWebhookQueue
from memwrite.feed.delivery import LANE, MAX_RETRY_SECS, RETRY_WINDOW_SECS, retry_delay
from memwrite.wiring import build_webhook_delivery_deps
from memwrite_local.runtime.runner import LocalContext
from tests.integration.conftest import Local, MakeLocal
from tests.integration.webhook_receiver import Receiver

SECRET = "lane-secret-0123456789"
KEYS = {"key-a": "tenant-a", "key-b": "tenant-b"}  # tenant-b has no webhook
HOUR = 3_600
STEP = 30  # the lane's passes, as `memwrite serve`'s delivery worker polls (there: 1 s)
LISBON = {"role": "user", "content": "I live in Lisbon.", "timestamp": "2026-03-01T09:00:00Z"}
BERLIN = {"role": "user", "content": "I moved to Berlin.", "timestamp": "2026-03-09T09:00:00Z"}


def subscribe(local: Local, receiver: Receiver) -> None:
    hook = {
        "url": receiver.url,
        "secret": SECRET,
        "events": ["memory.created", "memory.superseded"],
    }
    stored = local.runner.call("PUT", "/v1/settings", {"webhooks": [hook]}, api_key="key-a")
    assert stored.status == 200, stored.body


def post(local: Local, key: str, turn: dict[str, Any]) -> str:
    body = {"session_id": "s-1", "user_id": "dana", "turns": [turn]}
    posted = local.post_turns(body, api_key=key)
    assert posted.status == 202, posted.body
    trace_id: str = posted.body["trace_id"]
    return trace_id


def searchable(local: Local, key: str, query: str) -> bool:
    body = {"user_id": "dana", "query": query, "k": 3, "kinds": ["memory"]}
    found = local.runner.call("POST", "/v1/search", body, api_key=key)
    assert found.status == 200, found.body
    return any(query in hit["text"] for hit in found.body["results"])


@pytest.fixture
def no_http_from_the_pipeline(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every HTTP request any httpx client sends, recorded (none is expected)."""
    sent: list[str] = []
    real_send = httpx.Client.send

    def recording_send(self: httpx.Client, request: httpx.Request, **kwargs: Any) -> Any:
        sent.append(str(request.url))
        return real_send(self, request, **kwargs)

    monkeypatch.setattr(httpx.Client, "send", recording_send)
    yield sent


def attempts_by_delivery(local: Local, trace_ids: list[str]) -> dict[str, list[tuple[int, int]]]:
    """The lane's attempts on the traces: delivery -> [(attempt, lane-clock ms)], in order."""
    attempts: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for trace_id in trace_ids:
        trace = local.get_trace(trace_id, api_key="key-a").body
        for span in trace["spans"]:
            if span["kind"] == "webhook":
                assert span["stage"] == LANE
                delivery, _, when = span["item_id"].partition("@")
                at_ms, _, attempt = when.partition("#")
                attempts[delivery].append((int(attempt), int(at_ms)))
    return {delivery: sorted(found) for delivery, found in attempts.items()}


def test_a_receiver_down_for_an_hour_slows_no_indexing_and_loses_no_event(
    make_local: MakeLocal, receiver: Receiver, no_http_from_the_pipeline: list[str]
) -> None:
    # Given tenant-a's webhook on a receiver that is down, and tenant-b with no webhook
    local = make_local(api_keys=KEYS, backend="sqlite")
    subscribe(local, receiver)
    receiver.down = True

    # When both tenants' facts go through the pipeline and stage 7, without the lane
    traces = {key: [post(local, key, LISBON)] for key in ("key-a", "key-b")}
    assert not local.runner.drain(deliver_webhooks=False).index_failed
    for key, trace_ids in traces.items():
        trace_ids.append(post(local, key, BERLIN))
    assert not local.runner.drain(deliver_webhooks=False).index_failed

    # Then stage 7 made no HTTP call at all: it only queued the deliveries
    assert no_http_from_the_pipeline == [] and receiver.requests == []
    # And both tenants' memories are searchable at once, the webhook's as the other's
    for key, trace_ids in traces.items():
        assert searchable(local, key, "Berlin"), key
        for trace_id in trace_ids:
            assert local.get_trace(trace_id, api_key=key).body["status"] == "complete"

    # When the lane runs for an hour on its clock while the receiver stays down
    start = time.time()
    for elapsed in range(0, HOUR + 1, STEP):
        assert local.runner.deliver_webhooks(now=start + elapsed).delivered == 0

    # Then every delivery (Lisbon created, Berlin created, Lisbon superseded) was tried and
    # failed, on the backoff's schedule, and nothing reached the dead letters
    first_ids = [h["X-Memwrite-Event-Id"] for h, _ in receiver.requests[:3]]
    assert len(set(first_ids)) == 3
    attempts = attempts_by_delivery(local, traces["key-a"])
    assert len(attempts) == 3
    for tried in attempts.values():
        numbers = [number for number, _ in tried]
        assert numbers == list(range(1, len(tried) + 1))
        assert 7 <= len(tried) <= 9  # 30, 60, 120, 240, 480 s, then every 15 minutes
        for (number, at), (_, then) in itertools.pairwise(tried):
            waited = (then - at) / 1000
            assert retry_delay(number) <= waited < retry_delay(number) + STEP
    queue = build_webhook_delivery_deps().queue  # the lane's queue, as wiring gives it
    assert isinstance(queue, SqliteWebhookQueue)
    assert queue.dead_letters(10) == []
    assert HOUR < RETRY_WINDOW_SECS  # an hour down is well inside the retries

    # When the receiver is back and the lane goes on
    receiver.down = False
    for elapsed in range(HOUR + STEP, HOUR + MAX_RETRY_SECS + 2 * STEP, STEP):
        local.runner.deliver_webhooks(now=start + elapsed)

    # Then every event arrived once, under the id of its first attempt
    accepted = [event["event_id"] for event in receiver.accepted]
    assert sorted(accepted) == sorted(first_ids)
    assert sorted(e["type"] for e in receiver.accepted) == [
        "memory.created",
        "memory.created",
        "memory.superseded",
    ]
    assert {h["X-Memwrite-Event-Id"] for h, _ in receiver.requests} == set(first_ids)
    # And the queue is empty, nothing dead-lettered, each trace complete again (a failed
    # attempt no longer fails it once a later one delivered the same event)
    assert queue.receive(10, 0, now=start + 2 * HOUR) == []
    assert queue.dead_letters(10) == []
    for trace_id in traces["key-a"]:
        assert local.get_trace(trace_id, api_key="key-a").body["status"] == "complete"


def sqs_record(message: dict[str, Any], queue_arn: str) -> dict[str, Any]:
    """A received SQS message as Lambda's event source hands it to the function."""
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": {
            key: message["Attributes"][key]
            for key in (
                "ApproximateReceiveCount",
                "SentTimestamp",
                "SenderId",
                "ApproximateFirstReceiveTimestamp",
            )
        },
        "messageAttributes": {},
        "md5OfBody": message["MD5OfBody"],
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": "us-east-1",
    }


def test_on_aws_the_consumer_reports_a_failed_delivery_left_for_its_backoff(
    make_local: MakeLocal, receiver: Receiver
) -> None:
    # Given a delivery stage 7 sent to the SQS webhook queue (moto), its receiver down
    local = make_local(api_keys=KEYS, backend="moto")
    subscribe(local, receiver)
    receiver.down = True
    post(local, "key-a", LISBON)
    assert not local.runner.drain(deliver_webhooks=False).index_failed
    sqs = boto3.client("sqs")
    assert local.aws.resources is not None
    url = local.aws.resources.webhook_queue_url
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]

    def receive() -> list[dict[str, Any]]:
        # As the event source receives (every attribute), but visible again at once: only
        # the function's backoff can hide a message here
        return sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=10,
            VisibilityTimeout=0,
            MessageSystemAttributeNames=["All"],
        ).get("Messages", [])

    [message] = receive()
    delivery_handler.deps.cache_clear()

    # When the function gets it / Then it reports the record failed (the event source leaves
    # it in the queue), and the function hid the message for its backoff
    answer = delivery_handler.lambda_handler(
        {"Records": [sqs_record(message, arn)]}, LocalContext()
    )
    assert answer == {"batchItemFailures": [{"itemIdentifier": message["MessageId"]}]}
    assert receive() == []
    assert len(receiver.requests) == 1

    # When the backoff has passed (here: ended by hand) and the receiver is back
    sqs.change_message_visibility(
        QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
    )
    receiver.down = False
    [again] = receive()
    assert again["Attributes"]["ApproximateReceiveCount"] == "2"
    answer = delivery_handler.lambda_handler({"Records": [sqs_record(again, arn)]}, LocalContext())

    # Then the record succeeded (the event source deletes it) and the receiver got the event
    # under the id of the first attempt
    assert answer == {"batchItemFailures": []}
    [event] = receiver.accepted
    assert {h["X-Memwrite-Event-Id"] for h, _ in receiver.requests} == {event["event_id"]}
    assert build_webhook_delivery_deps().queue.dead_letters(10) == []
