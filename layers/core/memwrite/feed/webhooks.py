"""One webhook attempt: a tenant's webhook (`url`, `secret`, `events`) gets an event as an
HTTPS POST, its raw JSON body signed (`X-Memwrite-Signature: sha256=<hex HMAC-SHA256 of the
body with the secret>`) and carrying its event id (`X-Memwrite-Event-Id`, for dedupe: delivery
is at least once). Any 2xx accepts it; anything else (no answer, a timeout, another status) is
a failed attempt, which the delivery lane (`memwrite.feed.delivery`) retries through its queue.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from dataclasses import dataclass

import httpx

from memwrite.change_events import ChangeEvent
from memwrite.config import Webhook
from memwrite.ids import content_hash

__all__ = [
    "EVENT_ID_HEADER",
    "SIGNATURE_HEADER",
    "TIMEOUT_SECS",
    "AttemptResult",
    "Webhook",
    "hook_id",
    "post_event",
    "sign",
]

SIGNATURE_HEADER = "X-Memwrite-Signature"
EVENT_ID_HEADER = "X-Memwrite-Event-Id"
TIMEOUT_SECS = 5.0


def sign(secret: str, body: bytes) -> str:
    """`sha256=<hex>`: HMAC-SHA256 of the raw body with the webhook's secret."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def hook_id(url: str) -> str:
    """A webhook's id: its URL's hash (a queued delivery names its webhook by it, never by the
    URL or the secret, which are read from the tenant's settings when the attempt is made)."""
    return content_hash("webhook", url)


@dataclass(frozen=True)
class AttemptResult:
    status: int | None  # None: no answer (transport error or timeout)
    latency_ms: float
    error: str | None = None  # the transport error's type name

    @property
    def delivered(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


def post_event(event: ChangeEvent, hook: Webhook, client: httpx.Client) -> AttemptResult:
    """POST `event` to `hook` once, signed with its secret; waits at most `TIMEOUT_SECS`."""
    body = event.model_dump_json().encode()
    headers = {
        "Content-Type": "application/json",
        SIGNATURE_HEADER: sign(hook.secret, body),
        EVENT_ID_HEADER: event.event_id,
    }
    started = time.perf_counter()
    try:
        response = client.post(str(hook.url), content=body, headers=headers, timeout=TIMEOUT_SECS)
    except httpx.HTTPError as exc:
        return AttemptResult(None, (time.perf_counter() - started) * 1000, type(exc).__name__)
    return AttemptResult(response.status_code, (time.perf_counter() - started) * 1000)
