"""Stage 1's function: the routes `functions/routes.py` gives `pre_filter`. `POST /v1/turns`
runs stage 1 of the funnel in the call and queues the survivors to SQS; direct memories
(`POST /v1/users/{user_id}/memories`) are queued as turns of their own."""

from __future__ import annotations

import base64
import json
from http import HTTPStatus
from typing import Annotated, Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Header
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import RootModel

from functions.api_common import (
    ApiError,
    HttpFunction,
    error_responses,
    json_response,
    parse_json_body,
    path_user,
)
from memwrite.direct_memories import DirectMemoriesRequest, DirectWriteAccepted
from memwrite.errors import IngestLimitExceeded
from memwrite.metering import UsageCounts, count_usage
from memwrite.models import IngestRequest, IngestResponse
from memwrite.pre_filter.direct_memories import write_direct
from memwrite.pre_filter.stage import RETRY_AFTER_SECS, ingest_turns
from memwrite.wiring import PreFilterFunctionDeps, build_pre_filter_function_deps

logger = Logger(service="memwrite-pre-filter")
http = HttpFunction("pre_filter", build_pre_filter_function_deps)
app, deps = http.app, http.deps  # as every handler module names them (runner, tests)


def _enforce_limits(request: IngestRequest, max_turns: int, max_chars: int) -> None:
    if len(request.turns) > max_turns:
        raise IngestLimitExceeded("turns", max_turns, len(request.turns))
    for index, turn in enumerate(request.turns):
        if len(turn.content) > max_chars:
            raise IngestLimitExceeded(f"turns[{index}].content", max_chars, len(turn.content))


class IngestUnavailable(RootModel[IngestResponse | ApiError]):
    """A 503 of `POST /v1/turns`: the ingest answer with the turns that could not be queued
    (`failed`, each with its `retry_after_secs`), or a downstream outage."""


@http.route(
    summary="Ingest conversation turns",
    description="Stage 1 of the funnel; survivors are queued and the rest of the pipeline runs "
    "asynchronously: poll `GET /v1/traces/{trace_id}`. Idempotent: the same body (or the "
    "same `Idempotency-Key`) twice writes once.",
    tags=["ingest"],
    responses={
        **error_responses(
            413,
            415,
            422,
            ok=(HTTPStatus.ACCEPTED, "Accepted: the trace to follow.", IngestResponse),
        ),
        HTTPStatus.SERVICE_UNAVAILABLE: {
            "description": "Some turns could not be queued (retry them after `Retry-After`).",
            "content": {"application/json": {"model": IngestUnavailable}},
        },
    },
)
def post_turns(
    request: IngestRequest,
    idempotency_key: Annotated[
        str | None,
        Header(
            alias="Idempotency-Key",
            description="One logical request: a retry with the same key writes nothing twice.",
        ),
    ] = None,
) -> Response[dict[str, Any]]:
    def ingest(tenant: str, current: PreFilterFunctionDeps) -> IngestResponse | Response[Any]:
        config = current.configs.for_request(tenant, request.agent_id)
        limits = config.ingest
        _enforce_limits(request, limits.max_turns_per_request, limits.max_chars_per_turn)
        result = ingest_turns(
            request,
            tenant=tenant,
            config=config,
            deps=current.ingest,
            idempotency_key=idempotency_key,
        )
        count_usage(UsageCounts.of_intake(result))  # the tenant's turns in and kept
        if result.failed:
            body = result.model_dump(mode="json")
            retry_after = {"Retry-After": str(RETRY_AFTER_SECS)}
            return json_response(HTTPStatus.SERVICE_UNAVAILABLE, body, **retry_after)
        return result

    return http.answer(ingest, status=HTTPStatus.ACCEPTED)


@http.route(
    summary="Write memories directly (no extraction)",
    description="Each memory becomes a candidate as written, with no model call; resolve, "
    "dedupe, conflict, persist and indexing run on it as on any other, so it supersedes, "
    "merges and is traced like the rest (poll `GET /v1/traces/{trace_id}`). Its source is "
    "`direct`: it replaces a pinned memory, which an inferred one does only when the user "
    "states it as an explicit correction. Idempotent: "
    "the same memories (or the same `Idempotency-Key`) twice write once.",
    tags=["memories"],
    responses=error_responses(
        413, 415, ok=(HTTPStatus.ACCEPTED, "Accepted: the trace to follow.", DirectWriteAccepted)
    ),
)
def post_memories(
    user_id: str,
    request: DirectMemoriesRequest,
    idempotency_key: Annotated[
        str | None,
        Header(
            alias="Idempotency-Key",
            description="One logical request: a retry with the same key writes nothing twice.",
        ),
    ] = None,
) -> Response[dict[str, Any]]:
    return http.answer(
        lambda tenant, current: write_direct(
            tenant,
            path_user(user_id),
            request,
            config=current.configs.for_request(tenant),
            deps=current.ingest,
            idempotency_key=idempotency_key,
        ),
        status=HTTPStatus.ACCEPTED,
    )


http.check_routes()


def _refused(status: HTTPStatus, error: str, field: str, message: str) -> dict[str, Any]:
    return {
        "statusCode": status.value,
        "headers": {"Content-Type": "application/json"},
        "body": json.dumps({"error": error, "errors": [{"field": field, "message": message}]}),
    }


def _not_a_json_object(event: dict[str, Any]) -> dict[str, Any] | None:
    headers = event.get("headers") or {}
    content_type = next((v for k, v in headers.items() if k.lower() == "content-type"), None)
    if content_type and content_type.split(";")[0].strip().lower() != "application/json":
        return _refused(
            HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "Content-Type",
            "expected application/json",
        )
    try:
        parsed = parse_json_body(event.get("body") or "null")
    except ValueError:
        return None  # the request validator reports the syntax error
    if parsed is None or isinstance(parsed, dict):
        return None
    # Powertools would validate a list body's first element and ignore the rest.
    return _refused(HTTPStatus.BAD_REQUEST, "invalid_request", "body", "expected a JSON object")


def _body_too_large(event: dict[str, Any], limit: int) -> dict[str, Any] | None:
    body = event.get("body") or ""
    size = len(body.encode("utf-8")) if isinstance(body, str) else len(body)
    if size <= limit:
        return None
    # Checked before routing: the request validator would otherwise parse the whole body.
    return {
        "statusCode": HTTPStatus.REQUEST_ENTITY_TOO_LARGE.value,
        "headers": {"Content-Type": "application/json"},
        "body": json.dumps(
            {
                "error": "payload_too_large",
                "errors": [
                    {"field": "body", "message": f"{size} bytes exceeds the limit of {limit}"}
                ],
                "limit": limit,
            }
        ),
    }


def _as_text_body(event: dict[str, Any]) -> dict[str, Any]:
    """The event with a base64 body (binary media types) decoded, so every check sees text.

    Raises `ValueError` for a body that is not base64 of UTF-8 text.
    """
    if not event.get("isBase64Encoded") or not event.get("body"):
        return event
    text = base64.b64decode(event["body"], validate=True).decode("utf-8")
    return {**event, "body": text, "isBase64Encoded": False}


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    try:
        event = _as_text_body(event)
    except ValueError:  # binascii.Error and UnicodeDecodeError both are
        return _refused(
            HTTPStatus.BAD_REQUEST, "invalid_request", "body", "not base64-encoded UTF-8 text"
        )
    limit = http.deps().settings.pipeline.ingest.max_body_bytes
    return _body_too_large(event, limit) or _not_a_json_object(event) or app.resolve(event, context)
