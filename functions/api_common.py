"""What the API handlers share: their routes from the route table, the one way a route
answers (the tenant of the credential, the library call, JSON), and error -> HTTP mapping.

HTTP statuses live here and only here; the library raises typed errors.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from functools import cache
from http import HTTPStatus
from typing import Any, Generic, Protocol, TypeVar

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from pydantic import BaseModel, ConfigDict, Field

from functions.routes import ROUTES
from memwrite.auth.tenant import resolve_tenant
from memwrite.config.settings import Settings
from memwrite.errors import (
    IdempotencyKeyReused,
    ImportConflict,
    ImportRejected,
    IngestLimitExceeded,
    InvalidQuery,
    MemwriteError,
    ModelRequired,
    RollbackRefused,
    TimestampInFuture,
    TraceWithoutInputs,
    TransientError,
    Unauthenticated,
    UnknownMemory,
    UnknownTrace,
    UnknownUser,
)
from memwrite.ids import is_id
from memwrite.metering import Metering, metering_for

__all__ = [
    "ApiError",
    "FieldError",
    "GatewayError",
    "HttpFunction",
    "error_responses",
    "json_response",
    "parse_json_body",
    "path_id",
    "path_user",
    "register_error_handlers",
    "tenant_of",
]

logger = Logger(service="memwrite-api")


class _WithoutRouteArguments(logging.Filter):
    """Powertools' debug log prints the validated request (raw turns, secrets included)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Calling API Route Handler")


logging.getLogger("aws_lambda_powertools.event_handler.api_gateway").addFilter(
    _WithoutRouteArguments()
)


class FieldError(BaseModel):
    """One field at fault: `turns[0].role`, `body`, `Idempotency-Key`..."""

    field: str
    message: str


class ApiError(BaseModel):
    """Every refusal of the handlers (and of `memwrite serve`): a code in `error`, then what
    names the fault: field errors, a message, or the id that names nothing."""

    model_config = ConfigDict(extra="allow")  # a refusal may add its own (limit, memory_ids)

    error: str = Field(description="invalid_request, unauthenticated, not_found, ...")
    errors: list[FieldError] | None = None
    message: str | None = None


class GatewayError(BaseModel):
    """What API Gateway itself answers (throttled, access denied): a message only."""

    model_config = ConfigDict(extra="allow")

    message: str


_ERROR_DESCRIPTIONS: dict[int, tuple[str, type[BaseModel]]] = {
    HTTPStatus.BAD_REQUEST: ("Invalid request: field-level messages in `errors`.", ApiError),
    HTTPStatus.UNAUTHORIZED: ("Missing or unknown `x-api-key`.", ApiError),
    HTTPStatus.FORBIDDEN: ("Refused by API Gateway (credential not allowed).", GatewayError),
    HTTPStatus.NOT_FOUND: ("No such id for this tenant (or no such route).", ApiError),
    HTTPStatus.CONFLICT: ("Refused as things stand (rollback_refused, ...).", ApiError),
    HTTPStatus.REQUEST_ENTITY_TOO_LARGE: ("Over a size limit (`limit`).", ApiError),
    HTTPStatus.UNSUPPORTED_MEDIA_TYPE: ("The body is not of the route's media type.", ApiError),
    HTTPStatus.UNPROCESSABLE_ENTITY: ("Idempotency-Key reused for another body.", ApiError),
    HTTPStatus.TOO_MANY_REQUESTS: ("Throttled: retry after a while.", GatewayError),
    HTTPStatus.SERVICE_UNAVAILABLE: (
        "Downstream unavailable: retry after `Retry-After`.",
        ApiError,
    ),
}
# Every route may answer these: bad input, credentials, throttling, a downstream outage.
COMMON_ERRORS = (400, 401, 403, 429, 503)


def error_responses(
    *codes: int, ok: tuple[int, str, type[BaseModel]]
) -> dict[int, OpenAPIResponse]:
    """`responses=` of a route: its success (status, description, model) and its refusals,
    each with the JSON body the error handlers below write."""
    status, description, model = ok
    responses: dict[int, OpenAPIResponse] = {
        status: {"description": description, "content": {"application/json": {"model": model}}}
    }
    for code in sorted({*COMMON_ERRORS, *codes}):
        text, body = _ERROR_DESCRIPTIONS[code]
        responses[code] = {"description": text, "content": {"application/json": {"model": body}}}
    return responses


def parse_json_body(raw: str) -> Any:
    """`json.loads`, with the parser's own limits reported as invalid JSON (400), not a crash.

    Powertools turns only `JSONDecodeError` into a validation error; nesting deeper than the
    interpreter's recursion limit raises `RecursionError`, and an integer literal over
    `sys.get_int_max_str_digits()` (4,300) digits a plain `ValueError`.
    """
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply", raw, 0) from None
    except ValueError as exc:
        raise json.JSONDecodeError("a number has too many digits", raw, 0) from exc


def path_id(value: str, unknown: Callable[[str], MemwriteError]) -> str:
    """A trace or memory id from the path. Any other shape names nothing: it is answered as an
    unknown id (`unknown`, a 404), so a wrong shape tells a caller nothing another tenant's id
    would not, and never reaches a store key (DynamoDB refuses keys over 2 KB: a 5xx)."""
    if not is_id(value):
        raise unknown(value)
    return value


# `memwrite.models.Identifier`'s pattern, less "/": a user id in a path is one segment.
_USER_ID = re.compile(r"[A-Za-z0-9_.:@+=-]{1,128}")


def path_user(value: str) -> str:
    """A user id from the path: a 400 naming `user_id` unless 1-128 URL-safe characters (a
    user id is the client's, not ours: a wrong one is the caller's mistake, not an unknown)."""
    if not _USER_ID.fullmatch(value):
        raise InvalidQuery("user_id", "1-128 URL-safe characters")
    return value


def json_response(
    status: HTTPStatus, body: dict[str, Any], **headers: str
) -> Response[dict[str, Any]]:
    return Response(
        status_code=status.value,
        content_type=content_types.APPLICATION_JSON,
        body=body,
        headers=headers or None,
    )


def _field_path(loc: tuple[Any, ...] | list[Any]) -> str:
    # Powertools reports ("body", "turns", 0, "role"); clients want "turns[0].role".
    path = ""
    for part in loc[1:] if loc and loc[0] in {"body", "query"} else loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "body"


def _field_error(
    status: HTTPStatus, error: str, field: str, exc: Exception, **extra: Any
) -> Response[dict[str, Any]]:
    """The body of every refusal that names one field at fault."""
    body = {"error": error, "errors": [{"field": field, "message": str(exc)}], **extra}
    return json_response(status, body)


def tenant_of(app: APIGatewayRestResolver, api_keys: dict[str, str]) -> str:
    context = app.current_event.request_context
    authorizer = context.get("authorizer") if isinstance(context, dict) else None
    if authorizer is None:
        authorizer = app.current_event.raw_event.get("requestContext", {}).get("authorizer")
    return resolve_tenant(authorizer, app.current_event.headers or {}, api_keys)


class _WithSettings(Protocol):
    settings: Settings  # its `api_keys` name the tenants when no authorizer ran (locally)
    metering: Metering  # where each request's usage goes, its tenant's


DepsT = TypeVar("DepsT", bound=_WithSettings)
RouteT = TypeVar("RouteT", bound=Callable[..., Any])
# What a route's library call gives back: a model or a JSON object (answered as JSON with the
# route's status), or a whole response (another status, headers or media type).
Reply = BaseModel | dict[str, Any] | Response[Any]


def _rule(path: str) -> str:
    """A route table path as a Powertools rule: `{user_id}` -> `<user_id>`."""
    return re.sub(r"\{(\w+)\}", r"<\1>", path)


class HttpFunction(Generic[DepsT]):
    """A Lambda behind API Gateway: its resolver, its deps (built on first use, kept while the
    instance lives) and the routes `functions/routes.py` gives it.

    `route` registers a typed route function at the method and path of the table row that
    names it; `check_routes` (at the end of the handler module) fails the import if a row has
    no route function; `answer` is every route's preamble and reply."""

    def __init__(self, function: str, build_deps: Callable[[], DepsT]) -> None:
        self.function = function
        # Every body is parsed within the parser's limits: a hostile one is a 400, never a crash.
        self.app = APIGatewayRestResolver(
            enable_validation=True, json_body_deserializer=parse_json_body
        )
        register_error_handlers(self.app)
        self.deps = cache(build_deps)
        self._rows = {row.route_function: row for row in ROUTES if row.function == function}
        self._registered: set[str] = set()

    def route(
        self,
        *,
        summary: str,
        tags: list[str],
        responses: dict[int, OpenAPIResponse],
        description: str | None = None,
    ) -> Callable[[RouteT], RouteT]:
        """Registers the decorated function at its row's method and path, with its OpenAPI
        summary, description, tags and responses."""

        def register(route_function: RouteT) -> RouteT:
            name = route_function.__name__
            row = self._rows.get(name)
            if row is None:
                raise LookupError(f"no route of functions/routes.py is {self.function}.{name}")
            self._registered.add(name)
            register_on_app = self.app.route(
                _rule(row.path),
                row.method,
                summary=summary,
                description=description,
                tags=tags,
                responses=responses,
            )
            return register_on_app(route_function)

        return register

    def check_routes(self) -> None:
        """Every row of the table this function serves has its route function."""
        missing = sorted(self._rows.keys() - self._registered)
        if missing:
            raise LookupError(f"{self.function} has no route function named {missing}")

    def answer(
        self,
        call: Callable[[str, DepsT], Reply | None],
        *,
        status: HTTPStatus = HTTPStatus.OK,
        unknown: MemwriteError | None = None,
    ) -> Response[Any]:
        """A route's answer: `call(tenant, deps)` with the tenant of the request's credential,
        its reply as JSON with `status` (a whole `Response` as it is). A `None` reply raises
        `unknown`: the id the route names does not exist for this tenant (a 404). The call is
        metered as one unit of work of the tenant (`memwrite.metering`)."""
        current = self.deps()
        tenant = tenant_of(self.app, current.settings.api_keys)
        with metering_for(tenant, current.metering):
            reply = call(tenant, current)
        if reply is None:
            if unknown is None:
                raise TypeError("a route's call returned None without an `unknown` error")
            raise unknown
        if isinstance(reply, Response):
            return reply
        body = reply if isinstance(reply, dict) else reply.model_dump(mode="json")
        return json_response(status, body)


def register_error_handlers(app: APIGatewayRestResolver) -> None:
    @app.exception_handler(RequestValidationError)
    def _invalid(exc: RequestValidationError) -> Response[dict[str, Any]]:
        errors = [
            # A JSON syntax error's loc is ("body", <char offset>): not a list index.
            {"field": "body", "message": f"{err.get('msg', '')}: {err['ctx']['error']}"}
            if err.get("type") == "json_invalid" and "error" in (err.get("ctx") or {})
            else {"field": _field_path(tuple(err.get("loc", ()))), "message": err.get("msg", "")}
            for err in exc.errors()
        ]
        return json_response(HTTPStatus.BAD_REQUEST, {"error": "invalid_request", "errors": errors})

    @app.exception_handler(Unauthenticated)
    def _unauthenticated(exc: Unauthenticated) -> Response[dict[str, Any]]:
        return json_response(
            HTTPStatus.UNAUTHORIZED, {"error": "unauthenticated", "message": str(exc)}
        )

    @app.exception_handler(IngestLimitExceeded)
    def _too_large(exc: IngestLimitExceeded) -> Response[dict[str, Any]]:
        return _field_error(
            HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
            "payload_too_large",
            exc.field,
            exc,
            limit=exc.limit,
        )

    @app.exception_handler(TimestampInFuture)
    def _from_the_future(exc: TimestampInFuture) -> Response[dict[str, Any]]:
        return _field_error(
            HTTPStatus.BAD_REQUEST,
            "invalid_request",
            exc.field,
            exc,
            max_clock_skew_secs=exc.max_skew_secs,
        )

    @app.exception_handler(IdempotencyKeyReused)
    def _key_reused(exc: IdempotencyKeyReused) -> Response[dict[str, Any]]:
        return _field_error(
            HTTPStatus.UNPROCESSABLE_ENTITY, "idempotency_key_reused", "Idempotency-Key", exc
        )

    @app.exception_handler(InvalidQuery)
    def _invalid_query(exc: InvalidQuery) -> Response[dict[str, Any]]:
        return _field_error(HTTPStatus.BAD_REQUEST, "invalid_request", exc.field, exc)

    @app.exception_handler(ImportRejected)
    def _import_rejected(exc: ImportRejected) -> Response[dict[str, Any]]:
        error = {"field": exc.field, "message": exc.message}
        body = {"error": "invalid_request", "line": exc.line, "errors": [error]}
        return json_response(HTTPStatus.BAD_REQUEST, body)

    @app.exception_handler(ImportConflict)
    def _import_conflict(exc: ImportConflict) -> Response[dict[str, Any]]:
        body = {
            "error": "import_conflict",
            "line": exc.line,
            "item_id": exc.item_id,
            "message": str(exc),
        }
        return json_response(HTTPStatus.CONFLICT, body)

    @app.exception_handler(UnknownUser)
    def _unknown_user(exc: UnknownUser) -> Response[dict[str, Any]]:
        return _field_error(HTTPStatus.NOT_FOUND, "not_found", exc.field, exc)

    @app.exception_handler(ModelRequired)
    def _model_required(exc: ModelRequired) -> Response[dict[str, Any]]:
        return json_response(HTTPStatus.CONFLICT, {"error": "model_required", "message": str(exc)})

    @app.exception_handler(UnknownMemory)
    def _unknown_memory(exc: UnknownMemory) -> Response[dict[str, Any]]:
        return json_response(HTTPStatus.NOT_FOUND, {"error": "not_found", "memory_id": str(exc)})

    @app.exception_handler(UnknownTrace)
    def _unknown_trace(exc: UnknownTrace) -> Response[dict[str, Any]]:
        return json_response(HTTPStatus.NOT_FOUND, {"error": "not_found", "trace_id": str(exc)})

    @app.exception_handler(RollbackRefused)
    def _rollback_refused(exc: RollbackRefused) -> Response[dict[str, Any]]:
        body = {
            "error": "rollback_refused",
            "reason": exc.reason,
            "message": str(exc),
            "memory_ids": exc.memory_ids,
            "trace_ids": exc.trace_ids,
        }
        return json_response(HTTPStatus.CONFLICT, body)

    @app.exception_handler(TraceWithoutInputs)
    def _without_inputs(exc: TraceWithoutInputs) -> Response[dict[str, Any]]:
        return json_response(
            HTTPStatus.CONFLICT,
            {
                "error": "trace_without_inputs",
                "trace_id": str(exc),
                "message": "nothing to replay: recorded before traces kept their inputs, or "
                "a direct write (no extraction)",
            },
        )

    @app.exception_handler(TransientError)
    def _unavailable(exc: TransientError) -> Response[dict[str, Any]]:
        logger.exception("downstream unavailable")
        return json_response(
            HTTPStatus.SERVICE_UNAVAILABLE,
            {"error": "unavailable", "message": str(exc)},
            **{"Retry-After": "2"},
        )
