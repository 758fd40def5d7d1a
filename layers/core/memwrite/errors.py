"""Every error memwrite raises, under one root.

`TransientError` subclasses are worth a retry (Step Functions `Retry` matches them by name);
`PermanentError` subclasses are not (they go to `Catch` and the DLQ). HTTP statuses for these
live only in the API handler.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memwrite.costs.usage import LlmUsage

__all__ = [
    "ApiKeyExists",
    "BackfillNotStarted",
    "BudgetExhausted",
    "BudgetWait",
    "ConfigError",
    "EmbedderUnavailable",
    "EventsUnpublished",
    "ExportUnstored",
    "ExtractionFailed",
    "IdempotencyKeyReused",
    "ImportConflict",
    "ImportRejected",
    "IndexUnavailable",
    "IngestLimitExceeded",
    "InvalidQuery",
    "LlmRefused",
    "LlmRequestRejected",
    "LlmUnavailable",
    "MalformedLlmOutput",
    "MemwriteError",
    "ModelRequired",
    "PermanentError",
    "QueueUnavailable",
    "RollbackRefused",
    "SourceErased",
    "SourceRolledBack",
    "StageInputError",
    "StoreUnavailable",
    "TimestampInFuture",
    "TraceWithoutInputs",
    "TransientError",
    "TruncatedLlmOutput",
    "Unauthenticated",
    "UnknownMemory",
    "UnknownTrace",
    "UnknownUser",
    "VerificationFailed",
    "WebhookUndelivered",
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


class ApiKeyExists(PermanentError):
    """A new API key's hash or id is already stored (a collision: issue another key)."""


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


class SourceErased(PermanentError):
    """A commit's source trace is gone: its user was erased while the turn was in flight.

    Not a `WriteConflict`: reading again cannot bring the trace back, and writing would bring
    the erased user's memories back."""

    def __init__(self, tenant: str, trace_id: str) -> None:
        super().__init__(f"trace {trace_id} was erased; nothing of it is written")
        self.tenant = tenant
        self.trace_id = trace_id


class SourceRolledBack(SourceErased):
    """A memory commit's source trace was rolled back meanwhile (a retry of its failed turn
    after `POST /v1/traces/{trace_id}/rollback`): storing it would silently undo the rollback.

    A `SourceErased`: the stages that catch that one write nothing of this one either."""

    def __init__(self, tenant: str, trace_id: str) -> None:
        PermanentError.__init__(self, f"trace {trace_id} was rolled back; nothing of it is stored")
        self.tenant = tenant
        self.trace_id = trace_id


class StoreUnavailable(TransientError):
    """DynamoDB refused or failed a call after the SDK's own retries."""


class ExportUnstored(TransientError):
    """S3 refused or failed storing an export too large to answer inline (after the SDK's own
    retries): the caller gets a 503, never a truncated export."""


class QueueUnavailable(TransientError):
    """SQS refused or failed a call after the SDK's own retries."""


class BackfillNotStarted(TransientError):
    """Lambda refused or failed the asynchronous invoke of the backfill function (after the
    SDK's own retries): nothing was started, the episodes stay pending."""


class WebhookUndelivered(TransientError):
    """One attempt of a change-feed event at one webhook failed (no answer, or not a 2xx): its
    message waits in the webhook queue for `retry_in_secs`, then is attempted again."""

    def __init__(self, event_id: str, host: str, attempt: int, retry_in_secs: int) -> None:
        super().__init__(
            f"event {event_id} undelivered to {host} (attempt {attempt}), "
            f"again in {retry_in_secs} s"
        )
        self.event_id = event_id
        self.host = host
        self.attempt = attempt
        self.retry_in_secs = retry_in_secs


class EventsUnpublished(TransientError):
    """Change-feed events did not reach the environment's EventBridge bus (a failed
    `PutEvents` call or rejected entries): the outbox row stays pending and the stream's retry
    publishes them again under the same event ids."""

    def __init__(self, bus: str, failures: list[str]) -> None:
        super().__init__(f"{len(failures)} event(s) not put on {bus}: {'; '.join(failures)}")
        self.bus = bus
        self.failures = failures


class StageInputError(PermanentError):
    """A stage got a payload an earlier stage should have annotated (stages out of order)."""


class LlmUnavailable(TransientError):
    """The model API throttled, failed or timed out after the SDK's own retries."""


class BudgetExhausted(LlmUnavailable):
    """The model budget has no room for the call now (`memwrite.budget`): no request was
    sent; room is expected in `retry_after_s`. A judge treats it as the model unavailable;
    extraction makes its batch wait in the queue (`BudgetWait`) or defers it."""

    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class BudgetWait(TransientError):
    """A live batch waits for the model budget until its place in line, `delay_s` from now
    (nothing of the batch was written): locally hidden in the turn queue that long; on AWS
    the state machine waits `wait_s`, the delay in whole seconds (a Wait state's unit), then
    runs extraction again. Its message is a JSON object the state machine reads from the
    Lambda error's `Cause` (`{"wait_s": 3, "delay_s": 2.4, "waited_s": 12.0}`)."""

    def __init__(self, delay_s: float, waited_s: float) -> None:
        self.delay_s = delay_s
        self.waited_s = waited_s
        self.wait_s = max(1, math.ceil(delay_s))
        super().__init__(
            json.dumps(
                {
                    "wait_s": self.wait_s,
                    "delay_s": round(delay_s, 1),
                    "waited_s": round(waited_s, 1),
                }
            )
        )


class LlmRequestRejected(PermanentError):
    """The model API refused the request itself (bad request, auth); a retry cannot help."""

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class MalformedLlmOutput(PermanentError):
    """The model answered, but not with a valid `ExtractionResult`; `usage` is what it cost."""

    def __init__(self, message: str, usage: LlmUsage) -> None:
        super().__init__(message)
        self.usage = usage


class TruncatedLlmOutput(MalformedLlmOutput):
    """The answer stopped at max_tokens, and again when asked once more with more room."""


class LlmRefused(MalformedLlmOutput):
    """The model declined to answer, or a content filter or guardrail stopped it: there is no
    answer to read, and asking again cannot help. Extraction keeps the turns as episodes."""


class ExtractionFailed(PermanentError):
    """A pass stayed malformed after its retry: the batch fails visibly, never as []."""

    def __init__(self, batch: str, malformed: int, calls: tuple[LlmUsage, ...]) -> None:
        super().__init__(
            f"{batch}: extraction output malformed {malformed} times; {len(calls)} calls, giving up"
        )
        self.batch = batch
        self.malformed = malformed
        self.calls = calls


class VerificationFailed(PermanentError):
    """A verifier answer stayed malformed after its retry: the batch fails visibly."""

    def __init__(self, turn_id: str | None, attempts: int, calls: tuple[LlmUsage, ...]) -> None:
        super().__init__(f"turn {turn_id}: verifier output malformed {attempts} times, giving up")
        self.calls = calls


class TimestampInFuture(PermanentError):
    """A turn is dated further past the receive time than the allowed clock skew."""

    def __init__(self, field: str, max_skew_secs: int) -> None:
        super().__init__(
            f"{field}: more than {max_skew_secs} s after the time the request was received"
        )
        self.field = field
        self.max_skew_secs = max_skew_secs


class IndexUnavailable(TransientError):
    """The search index (OpenSearch) refused or failed a call after the client's retries."""


class EmbedderUnavailable(TransientError):
    """The embedding model (Bedrock) throttled or failed after the SDK's retries."""


class InvalidQuery(PermanentError):
    """A read request asks for something it may not (e.g. quarantined memories); `field`
    names the part at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class UnknownUser(PermanentError):
    """The tenant has no trace of this user (unknown, or another tenant's): `field` names the
    part of the request at fault."""

    def __init__(self, user_id: str, field: str = "user_id") -> None:
        super().__init__(f"{field}: no such user")
        self.user_id = user_id
        self.field = field


class ModelRequired(PermanentError):
    """The operation needs a model (a backfill) and none is configured: nothing was changed."""


class UnknownMemory(PermanentError):
    """No memory with this id exists for the caller's tenant."""


class UnknownTrace(PermanentError):
    """No trace with this id exists for the caller's tenant."""


class RollbackRefused(PermanentError):
    """A trace cannot be rolled back exactly (yet): `reason` says why (`in_progress`,
    `merged_into_existing`, `later_trace_depends`, `too_large`), `memory_ids` and `trace_ids`
    name what blocks it. Nothing was changed."""

    def __init__(
        self,
        reason: str,
        message: str,
        *,
        memory_ids: list[str] | None = None,
        trace_ids: list[str] | None = None,
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.memory_ids = memory_ids or []
        self.trace_ids = trace_ids or []


class TraceWithoutInputs(PermanentError):
    """The trace was recorded before traces kept their inputs: there is nothing to replay."""


class ImportRejected(PermanentError):
    """A line of an import (`POST /v1/users/{user_id}/import`) is not what an export writes:
    `line` (1-based) and `field` (dotted, inside the line's JSON) name the fault. Nothing of
    the import was written."""

    def __init__(self, line: int, field: str, message: str) -> None:
        super().__init__(f"line {line}: {field}: {message}")
        self.line = line
        self.field = field
        self.message = message


class ImportConflict(PermanentError):
    """An imported item exists already with other content (the user wrote since the export):
    `line` names the first such line, `item_id` the item. Nothing of the import was written,
    unless a write raced the import (then the units written so far stay; a repeat after
    resolving the conflict completes it)."""

    def __init__(self, line: int, item_id: str, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line
        self.item_id = item_id
