"""The change feed through the local pipeline: a tenant stores a webhook with `PUT
/v1/settings`, a fact is ingested and drained, and a real receiver on 127.0.0.1 gets the
signed `memory.created` event from the delivery lane; failed attempts are retried through the
lane's queue (same event id; on SQLite, whose clock the tests move) and every attempt is a
span on the turn's trace."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from memwrite.errors import EventsUnpublished
from memwrite.feed.delivery import LANE, MAX_RETRY_SECS
from memwrite.records.change_events import ChangeEvent, EventType
from memwrite.wiring import Adapters
from tests.integration.conftest import Local, MakeLocal
from tests.integration.webhook_receiver import Receiver

SECRET = "feed-secret-0123456789"
KEYS = {"key-a": "tenant-a"}


@pytest.fixture(params=["sqlite", "moto"])
def subscribed(request: pytest.FixtureRequest, make_local: MakeLocal, receiver: Receiver) -> Local:
    """A tenant whose stored settings subscribe the receiver to `memory.created`."""
    local = make_local(api_keys=KEYS, backend=request.param)
    hook = {"url": receiver.url, "secret": SECRET, "events": ["memory.created"]}
    stored = local.runner.call("PUT", "/v1/settings", {"webhooks": [hook]}, api_key="key-a")
    assert stored.status == 200, stored.body
    return local


def ingest(local: Local, make_body: Callable[..., dict[str, Any]]) -> str:
    posted = local.post_turns(make_body("I live in Lisbon."), api_key="key-a")
    assert posted.status == 202, posted.body
    report = local.runner.drain()
    assert not report.index_failed
    trace_id: str = posted.body["trace_id"]
    return trace_id


def deliver_later(local: Local, passes: int) -> None:
    """`passes` more passes of the delivery lane, each 15 minutes after the last on the lane's
    clock (no backoff is longer), as `memwrite serve`'s delivery worker would make them. The
    SQLite queue keeps time by that clock; SQS by its own, hence SQLite only."""
    start = time.time()
    for later in range(1, passes + 1):
        local.runner.deliver_webhooks(now=start + later * MAX_RETRY_SECS)


def webhook_spans(local: Local, trace_id: str) -> list[dict[str, Any]]:
    trace = local.get_trace(trace_id, api_key="key-a")
    assert trace.status == 200, trace.body
    spans: list[dict[str, Any]] = trace.body["spans"]
    return sorted((s for s in spans if s["kind"] == "webhook"), key=lambda s: s["item_id"])


def test_a_stored_webhook_gets_memory_created_signed_with_its_secret(
    subscribed: Local, receiver: Receiver, make_body: Callable[..., dict[str, Any]]
) -> None:
    # When a fact is ingested and the pipeline drains
    trace_id = ingest(subscribed, make_body)

    # Then the receiver got one memory.created, signed with the webhook's secret
    [(headers, body)] = receiver.requests
    expected = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(headers["X-Memwrite-Signature"], expected)
    event = json.loads(body)
    assert event["type"] == "memory.created"
    assert event["tenant"] == "tenant-a"
    assert event["user_id"] == "user-1"
    assert event["trace_id"] == trace_id
    assert headers["X-Memwrite-Event-Id"] == event["event_id"]
    # And the attempt is on the trace: the delivery lane's, a pass with its status
    [span] = webhook_spans(subscribed, trace_id)
    assert span["stage"] == LANE == "webhook_delivery"
    assert span["result"] == "pass"
    assert span["reason"]["type"] == "WebhookAttempt"
    assert span["reason"]["status"] == 200
    assert span["reason"]["attempt"] == 1
    assert span["reason"]["event_id"] == event["event_id"]


@pytest.mark.parametrize("subscribed", ["sqlite"], indirect=True)
@pytest.mark.parametrize("fail_first", [1, 5])
def test_a_failing_receiver_gets_the_event_at_least_once_with_the_same_id(
    subscribed: Local,
    receiver: Receiver,
    make_body: Callable[..., dict[str, Any]],
    fail_first: int,
) -> None:
    # Given a receiver that answers 500 first
    receiver.fail_first = fail_first

    # When a fact is ingested and the pipeline drains (the first attempt), and the delivery
    # lane retries as its backoff comes due
    trace_id = ingest(subscribed, make_body)
    assert len(receiver.requests) == 1
    deliver_later(subscribed, fail_first + 1)

    # Then it got the event once accepted, every request carrying the same event id
    assert len(receiver.accepted) == 1
    assert len(receiver.requests) == fail_first + 1
    ids = {headers["X-Memwrite-Event-Id"] for headers, _ in receiver.requests}
    assert ids == {receiver.accepted[0]["event_id"]}
    # And every attempt is a span on the trace: the 500s as errors, the 200 as a pass
    spans = webhook_spans(subscribed, trace_id)
    assert len(spans) == fail_first + 1
    statuses = sorted(s["reason"]["status"] for s in spans)
    assert statuses == [200] + [500] * fail_first
    assert sum(s["result"] == "error" for s in spans) == fail_first
    # And the trace is complete: the failed attempts were retried past
    assert subscribed.get_trace(trace_id, api_key="key-a").body["status"] == "complete"


class _Bus:
    """An `EventPublisher` standing in for the environment's bus: refuses the first
    `fail_first` publishes (transient, as a rejected PutEvents entry), then keeps the events."""

    def __init__(self, fail_first: int = 0) -> None:
        self.fail_first = fail_first
        self.calls = 0
        self.published: list[ChangeEvent] = []

    def publish(self, events: Sequence[ChangeEvent]) -> None:
        self.calls += 1
        if self.calls <= self.fail_first:
            raise EventsUnpublished(
                "memwrite-test", [f"{e.event_id}: InternalFailure" for e in events]
            )
        self.published.extend(events)


@pytest.mark.parametrize("fail_first", [0, 1])
def test_with_an_event_bus_every_memory_row_is_published_after_indexing_and_retried_on_failure(
    subscribed: Local,
    receiver: Receiver,
    make_body: Callable[..., dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
    fail_first: int,
) -> None:
    # Given the environment names a bus (on AWS: EVENT_BUS_NAME), refusing the first publish
    bus = _Bus(fail_first)
    monkeypatch.setattr(Adapters, "event_publisher", lambda self: bus)

    # When a fact is ingested and the pipeline drains
    trace_id = ingest(subscribed, make_body)

    # Then the bus got the row's memory.created once, the same event the webhook got
    [event] = bus.published
    assert event.type is EventType.MEMORY_CREATED
    assert event.trace_id == trace_id
    assert bus.calls == fail_first + 1
    assert [e["event_id"] for e in receiver.accepted] == [event.event_id]
    # And the trace is complete: a refused publish left the row pending for the retry
    assert subscribed.get_trace(trace_id, api_key="key-a").body["status"] == "complete"


def subscribe_to_erasures(local: Local, receiver: Receiver) -> None:
    """Before anything runs (the stages read settings once per cache period): user.erased."""
    hook = {"url": receiver.url, "secret": SECRET, "events": ["user.erased"]}
    stored = local.runner.call("PUT", "/v1/settings", {"webhooks": [hook]}, api_key="key-a")
    assert stored.status == 200, stored.body


@pytest.mark.parametrize(
    ("subscribed", "fail_first"),
    [("sqlite", 0), ("moto", 0), ("sqlite", 5)],
    indirect=["subscribed"],
)
def test_an_erasure_sends_user_erased_at_least_once_and_then_leaves_nothing_of_the_user(
    subscribed: Local,
    receiver: Receiver,
    make_body: Callable[..., dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
    fail_first: int,
) -> None:
    # Given a tenant subscribed to erasures, a bus and a user with a memory
    subscribe_to_erasures(subscribed, receiver)
    bus = _Bus()
    monkeypatch.setattr(Adapters, "event_publisher", lambda self: bus)
    ingest(subscribed, make_body)
    receiver.fail_first = fail_first  # 5: the delivery waits in the lane for its retries

    # When the user is erased, the outbox drains and the lane retries as its backoff is due
    erased = subscribed.runner.call("DELETE", "/v1/users/user-1/memories", api_key="key-a")
    assert erased.status == 200, erased.body
    assert not subscribed.runner.drain().index_failed
    deliver_later(subscribed, fail_first)

    # Then the receiver took one user.erased (each attempt with the same id), signed, and
    # the bus got the same event once (the outbox row was handed over once)
    [event] = receiver.accepted
    assert event["type"] == "user.erased"
    assert (event["tenant"], event["user_id"]) == ("tenant-a", "user-1")
    assert event["memory_id"] is None and event["trace_id"] is None
    assert {h["X-Memwrite-Event-Id"] for h, _ in receiver.requests} == {event["event_id"]}
    headers, body = receiver.requests[-1]
    expected = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(headers["X-Memwrite-Signature"], expected)
    assert [e.event_id for e in bus.published if e.type is EventType.USER_ERASED] == [
        event["event_id"]
    ]
    # And nothing names the user any more: the announcement's row went once it was handed
    # over, its delivery once it was delivered
    assert "user-1" not in subscribed.stored_text()


def test_a_repeated_erasure_is_announced_again_under_a_new_id(
    subscribed: Local, receiver: Receiver, make_body: Callable[..., dict[str, Any]]
) -> None:
    # Given a tenant subscribed to erasures and a user erased once
    subscribe_to_erasures(subscribed, receiver)
    ingest(subscribed, make_body)
    subscribed.runner.call("DELETE", "/v1/users/user-1/memories", api_key="key-a")

    # When the client, not sure the first call went through, erases again before the drain
    again = subscribed.runner.call("DELETE", "/v1/users/user-1/memories", api_key="key-a")
    assert again.status == 200
    assert not subscribed.runner.drain().index_failed

    # Then both erasures are announced (the first's row was not taken by the second), each once
    ids = [event["event_id"] for event in receiver.accepted]
    assert [event["type"] for event in receiver.accepted] == ["user.erased"] * 2
    assert len(set(ids)) == 2
    assert again.body["removed"]["outbox"] == 0
