"""One attempt of the webhook delivery lane (`memwrite.feed.delivery.attempt_delivery`): the
webhook read from the tenant's settings at that moment, one POST, its backoff handed to the
queue, its span on the trace while the trace exists. HTTP goes to an `httpx.MockTransport`."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import httpx
import pytest

from memwrite.adapters.in_memory import CountingMetrics, InMemorySpanStore, InMemoryTurnLedger
from memwrite.errors import WebhookUndelivered
from memwrite.feed import (
    SIGNATURE_HEADER,
    DeliveryOutcome,
    Webhook,
    WebhookDeliveryDeps,
    attempt_delivery,
    deliveries_for,
    retry_delay,
)
from memwrite.feed.delivery import LANE, MAX_ATTEMPTS
from memwrite.payloads import OutboxChange
from memwrite.ports import TraceRecord, WebhookMessage
from memwrite.records.change_events import EventType, WebhookDelivery, event_for_change

AT = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
NOW = AT.timestamp()
URL = "https://hooks.example.com/memwrite"
SECRET = "first-secret-0123456789"


@dataclass
class DelayingQueue:
    """Stands in for the webhook queue: records each backoff it is asked for."""

    delays: list[tuple[str, int, float]] = field(default_factory=list)

    def enqueue(self, deliveries: Sequence[WebhookDelivery]) -> None:
        pass

    def receive(
        self, max_messages: int, visibility_timeout_secs: int, *, now: float
    ) -> list[WebhookMessage]:
        return []

    def delete(self, messages: Sequence[WebhookMessage]) -> None:
        pass

    def retry_later(self, message: WebhookMessage, delay_secs: int, *, now: float) -> None:
        self.delays.append((message.receipt, delay_secs, now))

    def dead_letters(self, limit: int) -> list[WebhookDelivery]:
        return []


@dataclass
class Lane:
    deps: WebhookDeliveryDeps
    consumer: DelayingQueue
    ledger: InMemoryTurnLedger
    spans: InMemorySpanStore
    metrics: CountingMetrics
    hooks: list[Webhook]
    requests: list[httpx.Request]
    statuses: list[int]  # answered in turn; the last one from then on


def make_lane(statuses: list[int], hooks: list[Webhook] | None = None) -> Lane:
    requests: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        return httpx.Response(statuses[min(len(requests), len(statuses)) - 1])

    listed = hooks if hooks is not None else [webhook()]
    consumer, ledger = DelayingQueue(), InMemoryTurnLedger()
    spans, metrics = InMemorySpanStore(), CountingMetrics()
    deps = WebhookDeliveryDeps(
        webhooks_for=lambda tenant: listed if tenant == "acme" else [],
        queue=consumer,
        ledger=ledger,
        spans=spans,
        metrics=metrics,
        client=httpx.Client(transport=httpx.MockTransport(answer)),
    )
    return Lane(deps, consumer, ledger, spans, metrics, listed, requests, statuses)


def webhook(
    secret: str = SECRET, events: Sequence[EventType] = (EventType.MEMORY_CREATED,)
) -> Webhook:
    return Webhook(url=URL, secret=secret, events=list(events))


def message(receive_count: int = 1, trace_id: str | None = "t-1") -> WebhookMessage:
    change = OutboxChange(
        tenant="acme", user_id="dana", memory_id="m" * 32, rev=1, trace_id=trace_id
    )
    memory_created = event_for_change(change, None, AT).model_copy(
        update={"type": EventType.MEMORY_CREATED}
    )
    [delivery] = deliveries_for(memory_created, 1, [webhook()])
    return WebhookMessage(delivery, receipt=f"r-{receive_count}", receive_count=receive_count)


def record_trace(ledger: InMemoryTurnLedger, trace_id: str = "t-1") -> None:
    ledger.put_trace(
        TraceRecord(trace_id, "acme", "dana", "s-1", None, "user_explicit", AT.isoformat(), ())
    )


def test_a_2xx_delivers_it_signed_with_the_secret_and_puts_a_pass_on_the_trace() -> None:
    # Given a receiver that accepts, and the trace that wrote the change
    lane = make_lane([204])
    record_trace(lane.ledger)

    # When the delivery is attempted
    outcome = attempt_delivery(message(), lane.deps, now=NOW)

    # Then it is delivered with one signed POST, and nothing is delayed
    assert outcome is DeliveryOutcome.DELIVERED
    [request] = lane.requests
    expected = "sha256=" + hmac.new(SECRET.encode(), request.content, hashlib.sha256).hexdigest()
    assert request.headers[SIGNATURE_HEADER] == expected
    assert lane.consumer.delays == []
    # And the attempt is a pass on the trace, from the lane, and a metric
    [span] = lane.spans.spans_of("acme", "t-1")
    assert (span.stage, span.kind, span.result.value) == (LANE, "webhook", "pass")
    assert span.reason is not None and span.reason.model_dump()["status"] == 204
    assert lane.metrics.counts[(LANE, "webhook_ok", "none")] == 1


@pytest.mark.parametrize("attempt", [1, 2, 6, MAX_ATTEMPTS])
def test_a_failed_attempt_waits_its_backoff_in_the_queue_and_raises(attempt: int) -> None:
    # Given a receiver that is down, and a delivery on its nth attempt
    lane = make_lane([503])
    record_trace(lane.ledger)

    # When it is attempted / Then it raises (the message stays) after asking for its backoff
    with pytest.raises(WebhookUndelivered) as raised:
        attempt_delivery(message(attempt), lane.deps, now=NOW)
    assert lane.consumer.delays == [(f"r-{attempt}", retry_delay(attempt), NOW)]
    assert raised.value.retry_in_secs == retry_delay(attempt)
    assert raised.value.host == "hooks.example.com"
    # And the failed attempt is an error span naming its number and status
    [span] = lane.spans.spans_of("acme", "t-1")
    assert span.result.value == "error"
    assert span.reason is not None
    assert span.reason.model_dump() | {"event_id": ""} == {
        "type": "WebhookAttempt",
        "event_id": "",
        "event": "memory.created",
        "host": "hooks.example.com",
        "attempt": attempt,
        "status": 503,
        "error": None,
    }
    assert lane.metrics.counts[(LANE, "webhook_error", "none")] == 1


@pytest.mark.parametrize(
    "hooks",
    [[], [webhook(events=[EventType.MEMORY_ERASED])]],
    ids=["webhook removed", "unsubscribed from the event"],
)
def test_a_delivery_whose_webhook_is_gone_is_dropped_without_a_request(
    hooks: list[Webhook],
) -> None:
    lane = make_lane([204], hooks)
    assert attempt_delivery(message(), lane.deps, now=NOW) is DeliveryOutcome.DROPPED
    assert lane.requests == [] and lane.consumer.delays == []
    assert lane.metrics.counts[(LANE, "webhook_dropped", "none")] == 1


def test_a_rotated_secret_signs_the_next_attempt() -> None:
    # Given the tenant changed the webhook's secret after the delivery was queued
    lane = make_lane([204], [webhook(secret="second-secret-0123456789")])
    attempt_delivery(message(), lane.deps, now=NOW)
    [request] = lane.requests
    expected = hmac.new(b"second-secret-0123456789", request.content, hashlib.sha256).hexdigest()
    assert request.headers[SIGNATURE_HEADER] == f"sha256={expected}"


@pytest.mark.parametrize("trace_id", ["t-erased", None], ids=["trace gone", "no trace"])
def test_no_span_is_written_for_a_trace_that_does_not_exist(trace_id: str | None) -> None:
    # Given a delivery whose trace was erased with its user (or that has none: user.erased)
    lane = make_lane([204])
    # When it is attempted / Then it is sent, counted, and leaves nothing naming the user
    assert attempt_delivery(message(trace_id=trace_id), lane.deps, now=NOW) == "delivered"
    assert lane.spans.spans == {}
    assert lane.metrics.counts[(LANE, "webhook_ok", "none")] == 1
