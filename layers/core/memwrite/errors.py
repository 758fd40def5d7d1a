"""Every error memwrite raises, under one root.

`TransientError` subclasses are worth a retry (Step Functions `Retry` matches them by name);
`PermanentError` subclasses are not (they go to `Catch` and the DLQ). HTTP statuses for these
live only in the API handler.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "IdempotencyKeyReused",
    "IngestLimitExceeded",
    "MemwriteError",
    "PermanentError",
    "QueueUnavailable",
    "StoreUnavailable",
    "TimestampInFuture",
    "TransientError",
    "Unauthenticated",
    "WriteConflict",
]


class MemwriteError(Exception):
    """Root of every memwrite error."""


class TransientError(MemwriteError):
    """A downstream fault that may go away on retry (throttling, timeouts, index down)."""


class PermanentError(MemwriteError):
    """A fault a retry cannot fix (bad input, malformed data after retries)."""


class ConfigError(PermanentError):
    """The pipeline configuration is invalid."""


class Unauthenticated(PermanentError):
    """The request carries no credential that maps to a tenant."""


class IngestLimitExceeded(PermanentError):
    """A request exceeds a size limit; `field` names the part at fault."""

    def __init__(self, field: str, limit: int, actual: int) -> None:
        super().__init__(f"{field}: {actual} exceeds the limit of {limit}")
        self.field = field
        self.limit = limit
        self.actual = actual


class IdempotencyKeyReused(PermanentError):
    """An Idempotency-Key already names a trace of a different request."""


class WriteConflict(TransientError):
    """A conditional write lost a race (a version moved); re-read and try again."""


class StoreUnavailable(TransientError):
    """DynamoDB refused or failed a call after the SDK's own retries."""


class QueueUnavailable(TransientError):
    """SQS refused or failed a call after the SDK's own retries."""


class TimestampInFuture(PermanentError):
    """A turn is dated further past the receive time than the allowed clock skew."""

    def __init__(self, field: str, max_skew_secs: int) -> None:
        super().__init__(
            f"{field}: more than {max_skew_secs} s after the time the request was received"
        )
        self.field = field
        self.max_skew_secs = max_skew_secs
