"""The API function: every route `functions/routes.py` gives `api` (all but the ingest
routes): traces, their replay and rollback, search, memories (read, pin, expire, delete, erase),
export and import, episodes and their backfill, the tenant's settings, the OpenAPI document.

The tenant is the credential's; every route passes it down, so a user id of another tenant
finds nothing. Retrieval counters are bumped after the search answer is built, on a background
thread, so they never slow a response (on Lambda an unfinished update resumes on the next
invocation of the instance; counters are advisory).
"""

from __future__ import annotations

import json
import logging
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from functools import cache
from http import HTTPStatus
from pathlib import Path
from typing import Annotated, Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.api_common import (
    HttpFunction,
    error_responses,
    json_response,
    path_id,
    path_user,
)
from memwrite.backfill import BackfillRequest, accept_backfill
from memwrite.config.tenant_overrides import TenantOverrides
from memwrite.edit.delete import delete_memory
from memwrite.edit.erase import ErasureReport, erase_user
from memwrite.edit.patch import MemoryPatch, PatchDeps, patch_memory
from memwrite.edit.rollback import rollback_trace
from memwrite.edit.topic_sweep import TopicSweep, added_topics
from memwrite.errors import InvalidQuery, UnknownMemory, UnknownTrace
from memwrite.feed.webhooks import host_refusal
from memwrite.metering import MAX_RANGE_DAYS, UsageReport, usage_report
from memwrite.models import BackfillAccepted
from memwrite.portability import (
    INLINE_EXPORT_LIMIT,
    ImportGuards,
    ImportReport,
    SpilledExportView,
    deliver_export,
    import_user,
)
from memwrite.read.query import (
    EpisodePageView,
    MemoryDetailView,
    MemoryPage,
    MemoryView,
    SearchRequest,
    SearchResults,
    list_episodes,
    list_memories,
    memory_detail,
    memory_json,
    search,
)
from memwrite.read.traces import (
    MemoryTraces,
    TracePageView,
    TraceView,
    get_trace,
    parse_time_bound,
    traces_of_memory,
    traces_of_user,
)
from memwrite.records.episode import EpisodeStatus
from memwrite.records.memory import EXPIRED_RETENTION_DAYS
from memwrite.records.store import DeletionRecord, RollbackRecord
from memwrite.replay import (
    BatchReplay,
    BatchReplayRequest,
    ReplayDiff,
    ReplayRequest,
    replay_trace,
    replay_traces_of_user,
)
from memwrite.wiring import ApiFunctionDeps, build_api_function_deps

logger = Logger(service="memwrite-api")
http = HttpFunction("api", build_api_function_deps)
app, deps = http.app, http.deps  # as every handler module names them (runner, tests)

_FROM = "Traces created at or after this ISO 8601 time (naive: UTC)."
_TO = "Traces created at or before this ISO 8601 time (naive: UTC)."
_USAGE_FROM = "The first day or hour counted (ISO 8601; default: the current month's first day)."
_USAGE_TO = "The last day or hour counted (ISO 8601; default: now)."
# The committed OpenAPI document (`make openapi` writes it; a test keeps it current).
OPENAPI_DOCUMENT = Path(__file__).resolve().parents[1] / "openapi.json"
ACCESS_UPDATES = ThreadPoolExecutor(max_workers=1, thread_name_prefix="access")


def _record_access(tenant: str, user_id: str, memory_ids: list[str]) -> None:
    try:
        at = datetime.now(UTC).isoformat()
        http.deps().query.reader.record_access(tenant, user_id, memory_ids, at)
    except Exception:  # advisory counters: a failure is logged, never surfaced
        logging.getLogger(__name__).exception("recording retrievals failed")


@http.route(
    summary="A trace: its status, per-stage spans and outcome",
    tags=["traces"],
    responses=error_responses(404, ok=(HTTPStatus.OK, "The trace.", TraceView)),
)
def get_trace_route(trace_id: str) -> Response[dict[str, Any]]:
    return http.answer(
        lambda tenant, current: get_trace(
            tenant,
            path_id(trace_id, UnknownTrace),
            current.ledger,
            current.spans,
            current.rollback.rollbacks,
            episodes=current.query.episodes,
        ),
        unknown=UnknownTrace(trace_id),
    )


@http.route(
    summary="Re-run a trace's inputs with a changed config; report the diff, write nothing",
    tags=["traces"],
    responses=error_responses(404, 409, ok=(HTTPStatus.OK, "The diff.", ReplayDiff)),
)
def replay_trace_route(trace_id: str, request: ReplayRequest) -> Response[dict[str, Any]]:
    return http.answer(
        lambda tenant, current: replay_trace(
            tenant,
            path_id(trace_id, UnknownTrace),
            request,
            current.configs.settings_for(tenant),
            current.replay(),
        ),
        unknown=UnknownTrace(trace_id),
    )


@http.route(
    summary="The traces that stored or merged into a memory",
    tags=["memories"],
    responses=error_responses(404, ok=(HTTPStatus.OK, "Its traces, oldest first.", MemoryTraces)),
)
def memory_traces_route(memory_id: str) -> Response[dict[str, Any]]:
    return http.answer(
        lambda tenant, current: traces_of_memory(
            tenant,
            path_id(memory_id, UnknownMemory),
            current.ledger,
            current.spans,
            current.query.reader,
        )
    )


@http.route(
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
    return http.answer(
        lambda tenant, current: traces_of_user(
            tenant,
            path_user(user_id),
            since=parse_time_bound("from", since_text),
            until=parse_time_bound("to", until_text),
            limit=limit,
            cursor=cursor,
            ledger=current.ledger,
            spans=current.spans,
        )
    )


@http.route(
    summary="Replay a user's traces with a changed config; write nothing",
    tags=["traces"],
    responses=error_responses(ok=(HTTPStatus.OK, "The diffs and their totals.", BatchReplay)),
)
def replay_user_route(user_id: str, request: BatchReplayRequest) -> Response[dict[str, Any]]:
    return http.answer(
        lambda tenant, current: replay_traces_of_user(
            tenant,
            path_user(user_id),
            request,
            current.configs.settings_for(tenant),
            current.replay(),
        )
    )


def _without_body() -> None:
    """A route that takes no body refuses one (an empty JSON object is no body)."""
    raw = (app.current_event.body or "").strip()
    if raw not in ("", "{}"):
        raise InvalidQuery("body", "this route takes no body")


@http.route(
    summary="Remove exactly what a trace produced; restore what it superseded",
    tags=["traces"],
    responses=error_responses(
        404, 409, ok=(HTTPStatus.OK, "The rollback's audit record.", RollbackRecord)
    ),
)
def rollback_trace_route(trace_id: str) -> Response[dict[str, Any]]:
    def rollback(tenant: str, current: ApiFunctionDeps) -> RollbackRecord:
        _without_body()
        return rollback_trace(
            tenant,
            path_id(trace_id, UnknownTrace),
            current.configs.for_request(tenant),
            current.rollback,
            requested_via="api",
        )

    return http.answer(rollback)


@http.route(
    summary="Hybrid search of a user's memories (BM25 + kNN over content and questions)",
    tags=["memories"],
    responses=error_responses(ok=(HTTPStatus.OK, "The hits, best first.", SearchResults)),
)
def search_route(request: SearchRequest) -> Response[dict[str, Any]]:
    def search_memories(tenant: str, current: ApiFunctionDeps) -> dict[str, Any]:
        found = search(tenant, request, current.configs.for_request(tenant), current.query)
        ids = [memory.memory_id for memory in found.memories]
        if ids:
            ACCESS_UPDATES.submit(_record_access, tenant, request.user_id, ids)
        return found.as_json()

    return http.answer(search_memories)


@http.route(
    summary="One memory with its supersession chain and links",
    tags=["memories"],
    responses=error_responses(404, ok=(HTTPStatus.OK, "The memory.", MemoryDetailView)),
)
def get_memory_route(memory_id: str) -> Response[dict[str, Any]]:
    return http.answer(
        lambda tenant, current: memory_detail(
            tenant, path_id(memory_id, UnknownMemory), current.query
        ).as_json()
    )


@http.route(
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
    return http.answer(
        lambda tenant, current: memory_json(
            patch_memory(
                tenant,
                path_id(memory_id, UnknownMemory),
                patch,
                current.configs.for_request(tenant),
                PatchDeps(store=current.query.store, reader=current.query.reader),
            )
        )
    )


@http.route(
    summary="Delete one memory; what it superseded is current again",
    description="Removes the memory from the store and the index, whoever stored or merged "
    "into it, and announces it on the change feed (`memory.deleted`). Its observation leaves "
    "its entity_facts row and the row is derived again, so a memory it had ended is current "
    "again (`restored`). The trace that stored it gets a span of stage `delete`. Another "
    "tenant's id, or one deleted already, is a 404.",
    tags=["memories"],
    responses=error_responses(
        404, ok=(HTTPStatus.OK, "What was deleted and restored.", DeletionRecord)
    ),
)
def delete_memory_route(memory_id: str) -> Response[dict[str, Any]]:
    def delete(tenant: str, current: ApiFunctionDeps) -> DeletionRecord:
        _without_body()
        return delete_memory(
            tenant,
            path_id(memory_id, UnknownMemory),
            current.configs.for_request(tenant),
            current.delete,
        )

    return http.answer(delete)


@http.route(
    summary="A user's memories, page by page",
    tags=["memories"],
    responses=error_responses(ok=(HTTPStatus.OK, "One page of memories.", MemoryPage)),
)
def list_memories_route(
    user_id: str,
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    cursor: Annotated[str | None, Query(max_length=200)] = None,
) -> Response[dict[str, Any]]:
    return http.answer(
        lambda tenant, current: list_memories(
            tenant, path_user(user_id), limit, cursor, current.query
        )
    )


@http.route(
    summary="Erase everything of a user, index included",
    tags=["memories"],
    responses=error_responses(ok=(HTTPStatus.OK, "What was removed.", ErasureReport)),
)
def erase_user_route(user_id: str) -> Response[dict[str, Any]]:
    return http.answer(
        lambda tenant, current: erase_user(tenant, path_user(user_id), current.erase)
    )


NDJSON = "application/x-ndjson"
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


@http.route(
    summary="Export a user's memories (with their chains), entity facts, entities and episodes",
    tags=["memories"],
    responses={
        **error_responses(ok=(HTTPStatus.OK, "The export.", ImportReport)),
        HTTPStatus.OK: _EXPORT_OK,
        HTTPStatus.SEE_OTHER: _EXPORT_SPILLED,
    },
)
def export_user_route(user_id: str) -> Response[Any]:
    def export_user(tenant: str, current: ApiFunctionDeps) -> Response[Any]:
        # Lambda proxy responses are buffered: a large export is stored and answered with its
        # URL.
        export = deliver_export(
            tenant, path_user(user_id), current.portability, current.export_spill
        )
        if isinstance(export, str):
            return Response(status_code=HTTPStatus.OK.value, content_type=NDJSON, body=export)
        body = SpilledExportView.of(export).model_dump(mode="json")
        return json_response(HTTPStatus.SEE_OTHER, body, Location=export.url)

    return http.answer(export_user)


@http.route(
    summary="Import an export (application/x-ndjson): same ids; a repeat changes nothing",
    tags=["memories"],
    responses=error_responses(
        409, 415, ok=(HTTPStatus.OK, "What was written and what was there already.", ImportReport)
    ),
)
def import_user_route(user_id: str) -> Response[dict[str, Any]]:
    def import_export(tenant: str, current: ApiFunctionDeps) -> ImportReport | Response[Any]:
        user = path_user(user_id)
        content_type = app.current_event.headers.get("content-type") or ""
        if content_type.split(";")[0].strip().lower() != NDJSON:
            return json_response(
                HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
                {
                    "error": "unsupported_media_type",
                    "errors": [{"field": "Content-Type", "message": f"expected {NDJSON}"}],
                },
            )
        guards = ImportGuards.of(current.configs.for_request(tenant))
        body = app.current_event.body or ""
        return import_user(tenant, user, body, current.portability, guards)

    return http.answer(import_export)


@http.route(
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
    return http.answer(
        lambda tenant, current: list_episodes(
            tenant,
            path_user(user_id),
            status=status,
            since=parse_time_bound("since", since_text),
            until=parse_time_bound("until", until_text),
            limit=limit,
            cursor=cursor,
            config=current.configs.for_request(tenant),
            deps=current.query,
        )
    )


@http.route(
    summary="Distil a user's pending episodes with the model, in observed_at order",
    description="Handed to the backfill function, not run in this call: the answer is back at "
    "once, and `GET /v1/traces/{trace_id}` follows the backfill once it runs (404 until then). "
    "`trace_id` is null when no episode in the range is pending (nothing is started).",
    tags=["episodes"],
    responses=error_responses(
        404,
        409,
        ok=(HTTPStatus.ACCEPTED, "Handed to the backfill function.", BackfillAccepted),
    ),
)
def backfill_route(user_id: str, request: BackfillRequest) -> Response[dict[str, Any]]:
    return http.answer(
        lambda tenant, current: accept_backfill(
            tenant, path_user(user_id), request, current.backfill(), current.backfill_starter
        ),
        status=HTTPStatus.ACCEPTED,
    )


_SETTINGS_DESCRIPTION = (
    "The caller's tenant only (the tenant is the credential's). The deployment's config file "
    "stays the default; these settings override it, an agent's (`agents`) override them. "
    "Unset fields keep the file's value. Applies to new requests within a minute."
)


@http.route(
    summary="The tenant's own settings",
    description=_SETTINGS_DESCRIPTION,
    tags=["settings"],
    responses=error_responses(ok=(HTTPStatus.OK, "The stored settings.", TenantOverrides)),
)
def get_settings_route() -> Response[dict[str, Any]]:
    return http.answer(lambda tenant, current: current.configs.stored(tenant) or TenantOverrides())


@http.route(
    summary="Replace the tenant's own settings",
    description=_SETTINGS_DESCRIPTION + " Replaced whole: a field left out is unset. Invalid "
    "settings are a 400 naming the field, and nothing is stored.",
    tags=["settings"],
    responses=error_responses(ok=(HTTPStatus.OK, "The settings as stored.", TenantOverrides)),
)
def put_settings_route(settings: TenantOverrides) -> Response[dict[str, Any]]:
    def put_settings(tenant: str, current: ApiFunctionDeps) -> TenantOverrides:
        for at, hook in enumerate(settings.webhooks or ()):
            refused = host_refusal(hook)  # DNS now; each delivery checks again
            if refused is not None:
                raise InvalidQuery(f"webhooks[{at}].url", refused)
        before = current.configs.for_request(tenant).extract.exclude_topics
        current.configs.put(tenant, settings, datetime.now(UTC).isoformat())
        # A topic excluded now: what is stored under it goes (a background sweep on AWS).
        added = added_topics(before, current.configs.for_request(tenant).extract.exclude_topics)
        if added:
            current.topic_sweeps.start(TopicSweep(tenant=tenant, topics=added))
        return settings

    return http.answer(put_settings)


@http.route(
    summary="The tenant's usage: turns, model calls, tokens, embeddings, cost",
    description="The caller's tenant only (the tenant is the credential's), counted by the UTC "
    "hour as the work happens: each request, pipeline batch, indexing and backfill adds what "
    "it used to its hour, the model calls from the token counts the provider answered. `from` "
    "and `to` are ISO 8601 dates or times (naive: UTC); the hours from the one `from` falls "
    "in through the one `to` falls in are counted (a date: its whole day). Absent `from`: the "
    "first day of the current month; absent `to`: now. The answer names the hours counted, "
    f"`to` exclusive; at most {MAX_RANGE_DAYS} days. A bad value, or `from` after `to`, is a "
    "400 naming the field.",
    tags=["usage"],
    responses=error_responses(ok=(HTTPStatus.OK, "The usage over the hours counted.", UsageReport)),
)
def usage_route(
    since_text: Annotated[
        str | None, Query(alias="from", max_length=64, description=_USAGE_FROM)
    ] = None,
    until_text: Annotated[
        str | None, Query(alias="to", max_length=64, description=_USAGE_TO)
    ] = None,
) -> Response[dict[str, Any]]:
    return http.answer(
        lambda tenant, current: usage_report(
            tenant, since_text, until_text, current.metering.meter, datetime.now(UTC)
        )
    )


@cache
def _openapi_document() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(OPENAPI_DOCUMENT.read_text(encoding="utf-8"))
    return loaded


@http.route(
    summary="The OpenAPI 3.1 document of this API (no key needed)",
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


http.check_routes()


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
