"""The webhook delivery lane: change-feed events reach the tenants' webhooks here, never inside
stage 7, so a receiver that is down delays nothing but its own deliveries.

Stage 7 (`memwrite.hype`) turns each outbox row into its event and hands one `WebhookDelivery`
per subscribed webhook to the webhook queue (`memwrite.ports.WebhookQueue`), then marks the row
done. A delivery's id is a function of the row and the webhook (`delivery_id`), and its event
keeps the row's event id, so the receiver sees one id on every attempt, and a row handed over
twice (its stage-7 run retried before the row was marked done) queues the same ids again.

The lane's consumer (on AWS the `webhook_delivery` function on its own SQS queue; locally the
delivery worker of `memwrite serve` and the local drain) makes one attempt per receive
(`attempt_delivery`). A failed attempt hides its message for `retry_delay(attempt)`: 30 s, then
doubling, at most 15 minutes. The queue moves a message received `MAX_ATTEMPTS` times to its
dead letters (AWS: a DLQ with an alarm). So the last attempt comes `RETRY_WINDOW_SECS` (about
5 hours) after the first: a receiver down for less than that loses nothing.

Each attempt is a span (stage `webhook_delivery`, kind `webhook`) on the trace that wrote the
change, while that trace exists (an erased user's traces stay gone), and a metric.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from typing import TYPE_CHECKING

import httpx

from memwrite.config.tenant_overrides import Webhook
from memwrite.errors import WebhookUndelivered
from memwrite.feed.webhooks import AttemptResult, checked_client, hook_id, post_event
from memwrite.models import SpanResult
from memwrite.reasons import WebhookAttempt
from memwrite.records.change_events import ChangeEvent, WebhookDelivery
from memwrite.spans import make_span, store_spans

if TYPE_CHECKING:
    from memwrite.ports import (
        MetricsSink,
        SpanStore,
        StageAdapters,
        TurnLedger,
        WebhookMessage,
        WebhookQueue,
    )

__all__ = [
    "FIRST_RETRY_SECS",
    "LANE",
    "MAX_ATTEMPTS",
    "MAX_RETRY_SECS",
    "RETRY_WINDOW_SECS",
    "DeliveryOutcome",
    "WebhookDeliveryDeps",
    "attempt_delivery",
    "build_deps",
    "deliveries_for",
    "retry_delay",
]

logger = logging.getLogger(__name__)

LANE = "webhook_delivery"  # the attempts' spans and metrics (`Stage`); not a pipeline stage
FIRST_RETRY_SECS = 30  # after the first failed attempt
MAX_RETRY_SECS = 900  # the backoff's cap: a receiver back up waits at most 15 minutes
# Receives of a message before the queue dead-letters it (SQS maxReceiveCount).
MAX_ATTEMPTS = 25


def retry_delay(attempt: int) -> int:
    """Seconds a message waits after its `attempt`-th attempt (1-based) failed."""
    return min(MAX_RETRY_SECS, FIRST_RETRY_SECS << min(attempt - 1, 16))  # x 2 per attempt


# From the first attempt to the last: 30 + 60 + 120 + 240 + 480 + 19 x 900 = 18,030 s (5 h).
RETRY_WINDOW_SECS = sum(retry_delay(attempt) for attempt in range(1, MAX_ATTEMPTS))


def deliveries_for(event: ChangeEvent, rev: int, hooks: Sequence[Webhook]) -> list[WebhookDelivery]:
    """One delivery per webhook subscribed to the event's type (a URL listed twice: once)."""
    ids = dict.fromkeys(hook_id(str(hook.url)) for hook in hooks if event.type in hook.events)
    return [WebhookDelivery(event=event, hook_id=id_, rev=rev) for id_ in ids]


@dataclass
class WebhookDeliveryDeps:
    webhooks_for: Callable[[str], Sequence[Webhook]]
    queue: WebhookQueue  # `retry_later`: the backoff goes through the queue
    ledger: TurnLedger  # an attempt's span only on a trace that still exists
    spans: SpanStore
    metrics: MetricsSink
    client: httpx.Client | None = None  # None: one shared client per process


def build_deps(adapters: StageAdapters) -> WebhookDeliveryDeps:
    """From the same adapters bundle the stages' builders get (`memwrite.wiring`)."""
    return WebhookDeliveryDeps(
        webhooks_for=adapters.tenant_webhooks().webhooks_for,
        queue=adapters.webhook_queue(),
        ledger=adapters.ledger(),
        spans=adapters.spans,
        metrics=adapters.metrics,
    )


class DeliveryOutcome(StrEnum):
    DELIVERED = "delivered"  # a 2xx: done
    DROPPED = "dropped"  # the webhook is gone from the tenant's settings or unsubscribed


def attempt_delivery(
    message: WebhookMessage, deps: WebhookDeliveryDeps, *, now: float
) -> DeliveryOutcome:
    """One attempt of a received delivery. Returns its `DeliveryOutcome` (the caller deletes
    the message); a failed attempt hides the message for `retry_delay` from `now` and raises
    `WebhookUndelivered`, leaving it in the queue."""
    delivery = message.delivery
    event = delivery.event
    hook = next(
        (
            hook
            for hook in deps.webhooks_for(event.tenant)
            if hook_id(str(hook.url)) == delivery.hook_id and event.type in hook.events
        ),
        None,
    )
    if hook is None:
        deps.metrics.count(LANE, "webhook_dropped", None)
        return DeliveryOutcome.DROPPED
    result = post_event(event, hook, deps.client or _default_client())
    host = httpx.URL(str(hook.url)).host
    _record(message, host, result, deps, now=now)
    if result.delivered:
        return DeliveryOutcome.DELIVERED
    delay = retry_delay(message.receive_count)
    deps.queue.retry_later(message, delay, now=now)
    if message.receive_count >= MAX_ATTEMPTS:
        logger.warning(
            "webhook delivery %s to %s failed %d times: the queue dead-letters it",
            delivery.delivery_id,
            host,
            message.receive_count,
        )
    raise WebhookUndelivered(event.event_id, host, message.receive_count, delay)


def _record(
    message: WebhookMessage,
    host: str,
    result: AttemptResult,
    deps: WebhookDeliveryDeps,
    *,
    now: float,
) -> None:
    """The attempt's metric, and its span on the trace that wrote the change (if it still
    exists: an erasure took the user's traces, and an imported memory's trace is elsewhere)."""
    delivery = message.delivery
    event = delivery.event
    deps.metrics.count(LANE, "webhook_ok" if result.delivered else "webhook_error", None)
    if event.trace_id is None or deps.ledger.get_trace(event.tenant, event.trace_id) is None:
        return
    reason = WebhookAttempt(
        event_id=event.event_id,
        event=event.type.value,
        host=host,
        attempt=message.receive_count,
        status=result.status,
        error=result.error,
    )
    span = make_span(
        trace_id=event.trace_id,
        tenant=event.tenant,
        user_id=event.user_id,
        stage=LANE,
        # One span per attempt; the part before "@" names the delivery (`read.traces`).
        item_id=(
            f"{event.memory_id}#{delivery.rev}:webhook:{delivery.hook_id[:8]}"
            f"@{int(now * 1000)}#{message.receive_count}"
        ),
        result=SpanResult.PASS if result.delivered else SpanResult.ERROR,
        reason=reason,
        latency_ms=result.latency_ms,
        kind="webhook",
    )
    store_spans([span], deps.spans)


@cache
def _default_client() -> httpx.Client:
    """One client per process (its connections reused across deliveries)."""
    return checked_client()
