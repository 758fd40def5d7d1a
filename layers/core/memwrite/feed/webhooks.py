"""Webhook delivery: a tenant's `webhooks` (`url`, `secret`, `events`) get each event they
subscribe to as an HTTPS POST, its raw JSON body signed
(`X-Memwrite-Signature: sha256=<hex HMAC-SHA256 of the body with the secret>`) and carrying its
event id (`X-Memwrite-Event-Id`, for dedupe: delivery is at least once). A failed attempt (a
transport error, a 429 or a 5xx) is retried with exponential backoff and full jitter up to
`attempts` times; every attempt is reported (status, attempt, latency) for the trace. A
delivery that still fails is `delivered=False`: the caller leaves its outbox row pending, and
the next drain (locally) or the stream's retry (AWS) delivers it again.
"""

from __future__ import annotations

import hashlib
import hmac
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import httpx

from memwrite.config import Webhook
from memwrite.feed.change_events import ChangeEvent

__all__ = [
    "DEFAULT_ATTEMPTS",
    "EVENT_ID_HEADER",
    "SIGNATURE_HEADER",
    "DeliveryAttempt",
    "Webhook",
    "WebhookDelivery",
    "deliver",
    "sign",
]

SIGNATURE_HEADER = "X-Memwrite-Signature"
EVENT_ID_HEADER = "X-Memwrite-Event-Id"
DEFAULT_ATTEMPTS = 4
BASE_DELAY_SECS = 0.5
MAX_DELAY_SECS = 8.0
TIMEOUT_SECS = 5.0


def sign(secret: str, body: bytes) -> str:
    """`sha256=<hex>`: HMAC-SHA256 of the raw body with the webhook's secret."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class DeliveryAttempt:
    url: str
    attempt: int  # 1-based
    status: int | None  # None: no answer (transport error)
    latency_ms: float
    error: str | None = None


@dataclass(frozen=True)
class WebhookDelivery:
    event_id: str
    url: str
    delivered: bool
    attempts: tuple[DeliveryAttempt, ...]


def _retryable(status: int) -> bool:
    return status == 429 or status >= 500


def deliver(
    event: ChangeEvent,
    hooks: Sequence[Webhook],
    client: httpx.Client,
    *,
    attempts: int = DEFAULT_ATTEMPTS,
    base_delay: float = BASE_DELAY_SECS,
    sleep: Callable[[float], None] = time.sleep,
) -> list[WebhookDelivery]:
    """POST `event` to every hook subscribed to its type; one `WebhookDelivery` each."""
    body = event.model_dump_json().encode()
    results = []
    for hook in hooks:
        if event.type not in hook.events:
            continue
        url = str(hook.url)
        headers = {
            "Content-Type": "application/json",
            SIGNATURE_HEADER: sign(hook.secret, body),
            EVENT_ID_HEADER: event.event_id,
        }
        tried: list[DeliveryAttempt] = []
        delivered = False
        for attempt in range(1, attempts + 1):
            started = time.perf_counter()
            try:
                response = client.post(url, content=body, headers=headers, timeout=TIMEOUT_SECS)
            except httpx.HTTPError as exc:
                latency = (time.perf_counter() - started) * 1000
                tried.append(DeliveryAttempt(url, attempt, None, latency, type(exc).__name__))
            else:
                latency = (time.perf_counter() - started) * 1000
                tried.append(DeliveryAttempt(url, attempt, response.status_code, latency))
                if response.is_success:
                    delivered = True
                    break
                if not _retryable(response.status_code):
                    break  # a 4xx other than 429: the receiver refuses it, retrying won't help
            if attempt < attempts:
                # Full jitter: a random wait up to the exponential bound.
                sleep(random.uniform(0, min(MAX_DELAY_SECS, base_delay * 2 ** (attempt - 1))))
        results.append(WebhookDelivery(event.event_id, url, delivered, tuple(tried)))
    return results
