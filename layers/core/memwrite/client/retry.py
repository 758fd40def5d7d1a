"""When and how long the client waits before trying a request again.

Retried: connection errors (the request never got an answer) and 429 / 503 answers, the only
refusals that say "later". The wait is exponential backoff with full jitter (AWS architecture
blog, "Exponential Backoff And Jitter"), but never shorter than the server's `Retry-After`.
A request that may have reached the server (a read timeout, a reset) is retried only when
repeating it is safe: reads, and writes that carry an `Idempotency-Key`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import httpx

__all__ = ["RETRYABLE_STATUSES", "RetryPolicy", "parse_retry_after"]

RETRYABLE_STATUSES = frozenset({429, 503})
MAX_RETRY_AFTER_SECS = 60.0  # a larger Retry-After is not waited out: the error is raised


@dataclass(frozen=True)
class RetryPolicy:
    """`attempts` in all (1 = never retry); waits grow from `base_delay` up to `max_delay`."""

    attempts: int = 4
    base_delay: float = 0.25
    max_delay: float = 8.0
    rng: random.Random = field(default_factory=random.Random, compare=False, repr=False)

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait before attempt number `attempt + 1` (`attempt` counts from 0)."""
        backoff = self.rng.uniform(0, min(self.max_delay, self.base_delay * 2**attempt))
        if retry_after is None:
            return backoff
        # The server named its time: wait that, plus a little jitter so clients spread out.
        return retry_after + self.rng.uniform(0, self.base_delay)

    def retries_error(self, error: httpx.TransportError, *, repeatable: bool) -> bool:
        """A connection that never opened is always safe to retry; anything later only when
        the request may be repeated."""
        never_sent = isinstance(
            error, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout
        )
        return never_sent or repeatable

    def retries_status(self, status: int, retry_after: float | None) -> bool:
        return status in RETRYABLE_STATUSES and (
            retry_after is None or retry_after <= MAX_RETRY_AFTER_SECS
        )


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """`Retry-After` in seconds: delta-seconds or an HTTP date (RFC 9110 10.2.3)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())
