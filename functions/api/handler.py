"""Read side of the API: traces, their replay and rollback, search, memories and erasure
(Powertools REST resolver).

The tenant is the credential's; every route passes it down, so a user id of another tenant
finds nothing. Retrieval counters are bumped after the search answer is built, on a background
thread, so they never slow a response (on Lambda an unfinished update resumes on the next
invocation of the instance; counters are advisory).
"""

from __future__ import annotations

import json
import logging
import re
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from functools import cache
from http import HTTPStatus
from pathlib import Path
from typing import Annotated, Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.api_common import (
    error_responses,
    json_response,
    parse_json_body,
    path_id,
    register_error_handlers,
    tenant_of,
)
from memwrite.config import TenantOverrides
from memwrite.episode import EpisodeStatus
from memwrite.episodes.backfill import BackfillRequest, BackfillResult, backfill_user
from memwrite.errors import InvalidQuery, UnknownMemory, UnknownTrace
from memwrite.portability import (
    INLINE_EXPORT_LIMIT,
    ImportReport,
    SpilledExportView,
    deliver_export,
    import_user,
)
from memwrite.read.patch import EXPIRED_RETENTION_DAYS, MemoryPatch, PatchDeps, patch_memory
from memwrite.read.query import (
    EpisodePageView,
    ErasureReport,
    MemoryDetailView,
    MemoryPage,
    MemoryView,
    SearchRequest,
    SearchResults,
    erase_user,
    list_episodes,
    list_memories,
    memory_detail,
    memory_json,
    search,
)
from memwrite.read.replay import (
    BatchReplay,
    BatchReplayRequest,
    ReplayRequest,
    replay_trace,
    replay_traces_of_user,
)
from memwrite.read.replay_diff import ReplayDiff
from memwrite.read.rollback import rollback_trace
from memwrite.read.traces import (
    MemoryTraces,
    TracePageView,
    TraceView,
    get_trace,
    parse_time_bound,
    traces_of_memory,
    traces_of_user,
)
from memwrite.store import RollbackRecord
from memwrite.wiring import QueryApiDeps, build_query_deps

logger = Logger(service="memwrite-api")
# Every body is parsed within the parser's limits: a hostile one is a 400, never a crash.
app = APIGatewayRestResolver(enable_validation=True, json_body_deserializer=parse_json_body)
register_error_handlers(app)

# `memwrite.models.Identifier`'s pattern, less "/": a user id in a path is one segment.
_USER_ID = re.compile(r"[A-Za-z0-9_.:@+=-]{1,128}")
_FROM = "Traces created at or after this ISO 8601 time (naive: UTC)."
_TO = "Traces created at or before this ISO 8601 time (naive: UTC)."
# The committed OpenAPI document (`make openapi` writes it; a test keeps it current).
OPENAPI_DOCUMENT = Path(__file__).resolve().parents[1] / "openapi.json"
ACCESS_UPDATES = ThreadPoolExecutor(max_workers=1, thread_name_prefix="access")


@cache
def deps() -> QueryApiDeps:
    return build_query_deps()


def _checked_user(user_id: str) -> str:
    if not _USER_ID.fullmatch(user_id):
        raise InvalidQuery("user_id", "1-128 URL-safe characters")
    return user_id


def _record_access(tenant: str, user_id: str, memory_ids: list[str]) -> None:
    try:
        at = datetime.now(UTC).isoformat()
        deps().query.reader.record_access(tenant, user_id, memory_ids, at)
    except Exception:  # advisory counters: a failure is logged, never surfaced
        logging.getLogger(__name__).exception("recording retrievals failed")


@app.get(
    "/v1/traces/<trace_id>",
    summary="A trace: its status, per-stage spans and outcome",
    tags=["traces"],
    responses=error_responses(404, ok=(HTTPStatus.OK, "The trace.", TraceView)),
)
def get_trace_route(trace_id: str) -> Response[dict[str, Any]]:
    current = deps()
    tenant = tenant_of(app, current.settings.api_keys)
    trace_id = path_id(trace_id, UnknownTrace)
    view = get_trace(
        tenant,
        trace_id,
        current.ledger,
        current.spans,
        current.rollback.rollbacks,
        episodes=current.query.episodes,
    )
    if view is None:
        raise UnknownTrace(trace_id)
    return json_response(HTTPStatus.OK, view.model_dump(mode="json"))


@app.post(
    "/v1/traces/<trace_id>/replay",
    summary="Re-run a trace's inputs with a changed config; report the diff, write nothing",
    tags=["traces"],
    responses=error_responses(404, 409, ok=(HTTPStatus.OK, "The diff.", ReplayDiff)),
)
def replay_trace_route(trace_id: str, request: ReplayRequest) -> Response[dict[str, Any]]:
    current = deps()
    tenant = tenant_of(app, current.settings.api_keys)
    trace_id = path_id(trace_id, UnknownTrace)
    settings = current.configs.settings_for(tenant)
    diff = replay_trace(tenant, trace_id, request, settings, current.replay())
    if diff is None:
        raise UnknownTrace(trace_id)
    return json_response(HTTPStatus.OK, diff.model_dump(mode="json"))


@app.get(
    "/v1/memories/<memory_id>/traces",
    summary="The traces that stored or merged into a memory",
    tags=["memories"],
    responses=error_responses(404, ok=(HTTPStatus.OK, "Its traces, oldest first.", MemoryTraces)),
)
def memory_traces_route(memory_id: str) -> Response[dict[str, Any]]:
    current = deps()
    tenant = tenant_of(app, current.settings.api_keys)
    memory_id = path_id(memory_id, UnknownMemory)
    found = traces_of_memory(tenant, memory_id, current.ledger, current.spans, current.query.reader)
    return json_response(HTTPStatus.OK, found.model_dump(mode="json"))


@app.get(
    "/v1/users/<user_id>/traces",
    summary="A user's traces, newest first, page by page (`from`, `to`: ISO times)",
    tags=["traces"],
    responses=error_responses(ok=(HTTPStatus.OK, "One page of traces.", TracePageView)),
)
def user_traces_route(
    user_id: str,
    limit: Annotated[int, Query(ge=1, le=50)] = 20,
    cursor: Annotated[str | None, Query(max_length=200)] = None,
    # `from` is a Python keyword: both bounds are named by alias.
    since_text: Annotated[str | None, Query(alias="from", max_length=64, description=_FROM)] = None,
    until_text: Annotated[str | None, Query(alias="to", max_length=64, description=_TO)] = None,
) -> Response[dict[str, Any]]:
    current = deps()
    tenant = tenant_of(app, current.settings.api_keys)
    since = parse_time_bound("from", since_text)
    until = parse_time_bound("to", until_text)
    page = traces_of_user(
        tenant,
        _checked_user(user_id),
        since=since,
        until=until,
        limit=limit,
        cursor=cursor,
        ledger=current.ledger,
        spans=current.spans,
    )
    return json_response(HTTPStatus.OK, page.model_dump(mode="json"))


@app.post(
    "/v1/users/<user_id>/replay",
    summary="Replay a user's traces with a changed config; write nothing",
    tags=["traces"],
    responses=error_responses(ok=(HTTPStatus.OK, "The diffs and their totals.", BatchReplay)),
)
def replay_user_route(user_id: str, request: BatchReplayRequest) -> Response[dict[str, Any]]:
    current = deps()
    tenant = tenant_of(app, current.settings.api_keys)
    settings = current.configs.settings_for(tenant)
    batch = replay_traces_of_user(
        tenant, _checked_user(user_id), request, settings, current.replay()
    )
    return json_response(HTTPStatus.OK, batch.model_dump(mode="json"))


def _without_body() -> None:
    """A route that takes no body refuses one (an empty JSON object is no body)."""
    raw = (app.current_event.body or "").strip()
    if raw not in ("", "{}"):
        raise InvalidQuery("body", "this route takes no body")


@app.post(
    "/v1/traces/<trace_id>/rollback",
    summary="Remove exactly what a trace produced; restore what it superseded",
    tags=["traces"],
    responses=error_responses(
        404, 409, ok=(HTTPStatus.OK, "The rollback's audit record.", RollbackRecord)
    ),
)
def rollback_trace_route(trace_id: str) -> Response[dict[str, Any]]:
    current = deps()
    tenant = tenant_of(app, current.settings.api_keys)
    _without_body()
    trace_id = path_id(trace_id, UnknownTrace)
    config = current.configs.for_request(tenant)
    record = rollback_trace(tenant, trace_id, config, current.rollback, requested_via="api")
    return json_response(HTTPStatus.OK, record.model_dump(mode="json"))


@app.post(
    "/v1/search",
    summary="Hybrid search of a user's memories (BM25 + kNN over content and questions)",
    tags=["memories"],
    responses=error_responses(ok=(HTTPStatus.OK, "The hits, best first.", SearchResults)),
)
def search_route(request: SearchRequest) -> Response[dict[str, Any]]:
    current = deps()
    tenant = tenant_of(app, current.settings.api_keys)
    found = search(tenant, request, current.configs.for_request(tenant), current.query)
    ids = [memory.memory_id for memory in found.memories]
    if ids:
        ACCESS_UPDATES.submit(_record_access, tenant, request.user_id, ids)
    return json_response(HTTPStatus.OK, found.as_json())


@app.get(
    "/v1/memories/<memory_id>",
    summary="One memory with its supersession chain and links",
    tags=["memories"],
    responses=error_responses(404, ok=(HTTPStatus.OK, "The memory.", MemoryDetailView)),
)
def get_memory_route(memory_id: str) -> Response[dict[str, Any]]:
    current = deps()
    tenant = tenant_of(app, current.settings.api_keys)
    detail = memory_detail(tenant, path_id(memory_id, UnknownMemory), current.query)
    return json_response(HTTPStatus.OK, detail.as_json())


@app.patch(
    "/v1/memories/<memory_id>",
    summary="Pin a memory, or give it an expiry",
    description="`pinned` true: an inferred memory never supersedes it (it is kept beside it "
    "as challenged, with the reason `PinnedMemory`); only a direct write "
    "(`POST /v1/users/{user_id}/memories`) or the user's explicit correction in a turn "
    "('Correction: ...', 'I misspoke, ...') replaces it. `expires_at`: after it the memory "
    "leaves search and the memory list, stays readable here by id, and is deleted "
    f"{EXPIRED_RETENTION_DAYS} days later; null removes the expiry. Either field or both.",
    tags=["memories"],
    responses=error_responses(404, ok=(HTTPStatus.OK, "The memory as stored.", MemoryView)),
)
def patch_memory_route(memory_id: str, patch: MemoryPatch) -> Response[dict[str, Any]]:
    current = deps()
    tenant = tenant_of(app, current.settings.api_keys)
    memory = patch_memory(
        tenant,
        path_id(memory_id, UnknownMemory),
        patch,
        current.configs.for_request(tenant),
        PatchDeps(store=current.query.store, reader=current.query.reader),
    )
    return json_response(HTTPStatus.OK, memory_json(memory))


@app.get(
    "/v1/users/<user_id>/memories",
    summary="A user's memories, page by page",
    tags=["memories"],
    responses=error_responses(ok=(HTTPStatus.OK, "One page of memories.", MemoryPage)),
)
def list_memories_route(
    user_id: str,
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    cursor: Annotated[str | None, Query(max_length=200)] = None,
) -> Response[dict[str, Any]]:
    current = deps()
    tenant = tenant_of(app, current.settings.api_keys)
    page = list_memories(tenant, _checked_user(user_id), limit, cursor, current.query)
    return json_response(HTTPStatus.OK, page)


@app.delete(
    "/v1/users/<user_id>/memories",
    summary="Erase everything of a user, index included",
    tags=["memories"],
    responses=error_responses(ok=(HTTPStatus.OK, "What was removed.", ErasureReport)),
)
def erase_user_route(user_id: str) -> Response[dict[str, Any]]:
    current = deps()
    tenant = tenant_of(app, current.settings.api_keys)
    return json_response(HTTPStatus.OK, erase_user(tenant, _checked_user(user_id), current.query))


NDJSON = "application/x-ndjson"
# A backfill starts no batch later than this before its function's timeout: one batch (an
# extraction call, then the other stages) usually takes a few seconds.
BACKFILL_RESERVE_SECS = 5.0
_EXPORT_OK: OpenAPIResponse = {
    "description": "The export: JSON lines (a header, entities, entity_facts, memories, episodes).",
    "content": {NDJSON: {"schema": {"type": "string"}}},
}
_EXPORT_SPILLED: OpenAPIResponse = {
    "description": f"The export is over one response's limit ({INLINE_EXPORT_LIMIT // 2**20} MB): "
    "the same JSON lines are at "
    "`Location`, a presigned URL valid `expires_in` seconds (fetch it without the API key); "
    "the object is deleted after a day.",
    "headers": {
        "Location": {"description": "The URL of the export.", "schema": {"type": "string"}}
    },
    "content": {"application/json": {"model": SpilledExportView}},
}


@app.get(
    "/v1/users/<user_id>/export",
    summary="Export a user's memories (with their chains), entity facts, entities and episodes",
    tags=["memories"],
    responses={
        **error_responses(ok=(HTTPStatus.OK, "The export.", ImportReport)),
        HTTPStatus.OK: _EXPORT_OK,
        HTTPStatus.SEE_OTHER: _EXPORT_SPILLED,
    },
)
def export_user_route(user_id: str) -> Response[Any]:
    current = deps()
    tenant = tenant_of(app, current.settings.api_keys)
    # Lambda proxy responses are buffered: a large export is stored and answered with its URL.
    export = deliver_export(
        tenant, _checked_user(user_id), current.portability, current.export_spill
    )
    if isinstance(export, str):
        return Response(status_code=HTTPStatus.OK.value, content_type=NDJSON, body=export)
    body = SpilledExportView.of(export).model_dump(mode="json")
    return json_response(HTTPStatus.SEE_OTHER, body, Location=export.url)


@app.post(
    "/v1/users/<user_id>/import",
    summary="Import an export (application/x-ndjson): same ids; a repeat changes nothing",
    tags=["memories"],
    responses=error_responses(
        409, 415, ok=(HTTPStatus.OK, "What was written and what was there already.", ImportReport)
    ),
)
def import_user_route(user_id: str) -> Response[dict[str, Any]]:
    current = deps()
    tenant = tenant_of(app, current.settings.api_keys)
    user_id = _checked_user(user_id)
    content_type = app.current_event.headers.get("content-type") or ""
    if content_type.split(";")[0].strip().lower() != NDJSON:
        return json_response(
            HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
            {
                "error": "unsupported_media_type",
                "errors": [{"field": "Content-Type", "message": f"expected {NDJSON}"}],
            },
        )
    report = import_user(tenant, user_id, app.current_event.body or "", current.portability)
    return json_response(HTTPStatus.OK, report.model_dump(mode="json"))


@app.get(
    "/v1/users/<user_id>/episodes",
    summary="A user's episodes (kept turns), oldest first, page by page",
    tags=["episodes"],
    responses=error_responses(ok=(HTTPStatus.OK, "One page of episodes.", EpisodePageView)),
)
def list_episodes_route(  # noqa: PLR0917 (query parameters, named by Powertools)
    user_id: str,
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    cursor: Annotated[str | None, Query(max_length=200)] = None,
    status: Annotated[EpisodeStatus | None, Query()] = None,
    since_text: Annotated[str | None, Query(alias="since", max_length=64)] = None,
    until_text: Annotated[str | None, Query(alias="until", max_length=64)] = None,
) -> Response[dict[str, Any]]:
    current = deps()
    tenant = tenant_of(app, current.settings.api_keys)
    since = parse_time_bound("since", since_text)
    until = parse_time_bound("until", until_text)
    page = list_episodes(
        tenant,
        _checked_user(user_id),
        status=status,
        since=since,
        until=until,
        limit=limit,
        cursor=cursor,
        deps=current.query,
    )
    return json_response(HTTPStatus.OK, page)


@app.post(
    "/v1/users/<user_id>/backfill",
    summary="Distil a user's pending episodes with the model, in observed_at order",
    tags=["episodes"],
    responses=error_responses(
        404, 409, ok=(HTTPStatus.OK, "What the backfill did (its own trace).", BackfillResult)
    ),
)
def backfill_route(user_id: str, request: BackfillRequest) -> Response[dict[str, Any]]:
    current = deps()
    tenant = tenant_of(app, current.settings.api_keys)
    # What this invocation has left, less the time one more batch may take: the answer is
    # back before the function's timeout, with the episodes not reached left `remaining`.
    left_secs = app.lambda_context.get_remaining_time_in_millis() / 1000
    result = backfill_user(
        tenant,
        _checked_user(user_id),
        request,
        current.configs.for_request(tenant),
        current.backfill(),
        budget_secs=max(0.0, left_secs - BACKFILL_RESERVE_SECS),
    )
    return json_response(HTTPStatus.OK, result.as_json())


_SETTINGS_DESCRIPTION = (
    "The caller's tenant only (the tenant is the credential's). The deployment's config file "
    "stays the default; these settings override it, an agent's (`agents`) override them. "
    "Unset fields keep the file's value. Applies to new requests within a minute."
)


@app.get(
    "/v1/settings",
    summary="The tenant's own settings",
    description=_SETTINGS_DESCRIPTION,
    tags=["settings"],
    responses=error_responses(ok=(HTTPStatus.OK, "The stored settings.", TenantOverrides)),
)
def get_settings_route() -> Response[dict[str, Any]]:
    current = deps()
    tenant = tenant_of(app, current.settings.api_keys)
    stored = current.configs.stored(tenant) or TenantOverrides()
    return json_response(HTTPStatus.OK, stored.model_dump(mode="json"))


@app.put(
    "/v1/settings",
    summary="Replace the tenant's own settings",
    description=_SETTINGS_DESCRIPTION + " Replaced whole: a field left out is unset. Invalid "
    "settings are a 400 naming the field, and nothing is stored.",
    tags=["settings"],
    responses=error_responses(ok=(HTTPStatus.OK, "The settings as stored.", TenantOverrides)),
)
def put_settings_route(settings: TenantOverrides) -> Response[dict[str, Any]]:
    current = deps()
    tenant = tenant_of(app, current.settings.api_keys)
    current.configs.put(tenant, settings, datetime.now(UTC).isoformat())
    return json_response(HTTPStatus.OK, settings.model_dump(mode="json"))


@cache
def _openapi_document() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(OPENAPI_DOCUMENT.read_text(encoding="utf-8"))
    return loaded


@app.get(
    "/v1/openapi.json",
    summary="This document (no key needed)",
    tags=["meta"],
    responses={
        HTTPStatus.OK: {
            "description": "The OpenAPI 3.1 document of this API.",
            "content": {"application/json": {"schema": {"type": "object"}}},
        }
    },
)
def openapi_route() -> Response[dict[str, Any]]:
    # Public (no authorizer on AWS, no key locally): the tenant is never read here.
    return json_response(HTTPStatus.OK, _openapi_document())


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
