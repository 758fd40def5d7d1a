"""One exception per error code of the API, under one root (`MemwriteApiError`).

Each carries the HTTP status, the API's `error` code, its field errors (`errors`: which field,
what is wrong), the whole JSON body and, on 429 and 503, the `Retry-After` the server asked
for. `ServiceUnreachable` is raised when no answer came back at all.
"""

from __future__ import annotations

from typing import Any

from memwrite.client.models import FieldError

__all__ = [
    "ERRORS_BY_CODE",
    "Forbidden",
    "IdempotencyKeyReused",
    "InvalidRequest",
    "MemwriteApiError",
    "MemwriteClientError",
    "MethodNotAllowed",
    "NotFound",
    "PayloadTooLarge",
    "RollbackRefused",
    "ServiceUnreachable",
    "Throttled",
    "TraceNotFinished",
    "TraceWithoutInputs",
    "Unauthenticated",
    "Unavailable",
    "UnsupportedMediaType",
    "error_for",
]


class MemwriteClientError(Exception):
    """Root of everything `memwrite.client` raises."""


class ServiceUnreachable(MemwriteClientError):
    """No answer after every retry (connection refused, reset, timed out)."""


class TraceNotFinished(MemwriteClientError):
    """`wait` ran out of time; `trace` is the last state seen."""

    def __init__(self, trace_id: str, timeout: float, trace: Any) -> None:
        super().__init__(f"trace {trace_id} still {trace.status} after {timeout:g}s")
        self.trace_id = trace_id
        self.trace = trace


class MemwriteApiError(MemwriteClientError):
    """An answer of the API that is not a success."""

    status: int = 0
    code: str = ""

    def __init__(
        self,
        status: int,
        body: dict[str, Any],
        retry_after: float | None = None,
    ) -> None:
        self.status = status
        self.body = body
        self.code = str(body.get("error") or type(self).code)
        self.message = str(body.get("message") or "")
        raw_errors = body.get("errors")
        self.errors = [
            FieldError.model_validate(error)
            for error in (raw_errors if isinstance(raw_errors, list) else [])
            if isinstance(error, dict) and {"field", "message"} <= set(error)
        ]
        self.retry_after = retry_after
        detail = "; ".join(f"{e.field}: {e.message}" for e in self.errors) or self.message
        super().__init__(f"{status} {self.code}" + (f": {detail}" if detail else ""))


class InvalidRequest(MemwriteApiError):
    """400: the request is invalid; `errors` names each field at fault."""

    code = "invalid_request"


class Unauthenticated(MemwriteApiError):
    """401: missing or unknown API key."""

    code = "unauthenticated"


class Forbidden(MemwriteApiError):
    """403: the credential is not allowed (API Gateway)."""

    code = "forbidden"


class NotFound(MemwriteApiError):
    """404: no such trace or memory for this tenant."""

    code = "not_found"


class MethodNotAllowed(MemwriteApiError):
    code = "method_not_allowed"


class RollbackRefused(MemwriteApiError):
    """409: the rollback would undo later work (`body["memory_ids"]`, `body["trace_ids"]`)."""

    code = "rollback_refused"


class TraceWithoutInputs(MemwriteApiError):
    """409: the trace was recorded before traces kept their inputs: nothing to replay."""

    code = "trace_without_inputs"


class PayloadTooLarge(MemwriteApiError):
    """413: over a limit (`body["limit"]`)."""

    code = "payload_too_large"


class UnsupportedMediaType(MemwriteApiError):
    code = "unsupported_media_type"


class IdempotencyKeyReused(MemwriteApiError):
    """422: the same Idempotency-Key was sent earlier with another body."""

    code = "idempotency_key_reused"


class Throttled(MemwriteApiError):
    """429: too many requests (retried with backoff before this is raised)."""

    code = "throttled"


class Unavailable(MemwriteApiError):
    """503: unavailable for now (retried, honouring Retry-After, before this is raised)."""

    code = "unavailable"


ERRORS_BY_CODE: dict[str, type[MemwriteApiError]] = {
    cls.code: cls
    for cls in (
        InvalidRequest,
        Unauthenticated,
        NotFound,
        MethodNotAllowed,
        RollbackRefused,
        TraceWithoutInputs,
        PayloadTooLarge,
        UnsupportedMediaType,
        IdempotencyKeyReused,
        Unavailable,
    )
}
# API Gateway's own answers have no `error` code: the status decides.
_ERRORS_BY_STATUS: dict[int, type[MemwriteApiError]] = {
    400: InvalidRequest,
    401: Unauthenticated,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    413: PayloadTooLarge,
    415: UnsupportedMediaType,
    422: IdempotencyKeyReused,
    429: Throttled,
    503: Unavailable,
}


def error_for(status: int, body: Any, retry_after: float | None = None) -> MemwriteApiError:
    """The exception of an error answer: by its `error` code, else by its status."""
    if not isinstance(body, dict):
        body = {"message": str(body)}
    cls = ERRORS_BY_CODE.get(str(body.get("error"))) or _ERRORS_BY_STATUS.get(
        status, MemwriteApiError
    )
    return cls(status, body, retry_after)
