"""Each API operation as data: method, path, body, query and how to read its answer. The sync
and the async client send the same `Call`s; only their I/O differs."""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from http import HTTPStatus
from types import EllipsisType
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, ValidationError

from memwrite.client.errors import InvalidRequest, error_for
from memwrite.client.models import (
    BackfillAck,
    BatchReplay,
    DeletionRecord,
    DirectWriteAck,
    ErasureReport,
    ImportReport,
    IngestAck,
    Memory,
    MemoryDetail,
    MemoryPage,
    MemoryTraces,
    ReplayDiff,
    RollbackRecord,
    SearchResults,
    TenantSettings,
    Trace,
    TracePage,
    Turn,
    UsageReport,
)
from memwrite.client.retry import parse_retry_after

__all__ = [
    "API_KEY_HEADER",
    "IDEMPOTENCY_HEADER",
    "Call",
    "answer_of",
    "calls",
    "default_headers",
    "raise_for_error",
    "spilled_export",
]

API_KEY_HEADER = "x-api-key"
IDEMPOTENCY_HEADER = "Idempotency-Key"
NDJSON = "application/x-ndjson"
T = TypeVar("T", bound=BaseModel)


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request and the model of its success. `repeatable`: sending it twice does what
    sending it once does (reads, replays, writes with an Idempotency-Key)."""

    method: str
    path: str
    model: type[T]
    json: dict[str, Any] | None = None
    params: dict[str, str | int] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    repeatable: bool = True
    content: str | None = None  # a body that is not JSON (the import's JSON lines)


def default_headers(api_key: str | None) -> dict[str, str]:
    """The headers of every request; the key is `api_key`, else `MEMWRITE_API_KEY`."""
    key = api_key if api_key is not None else os.environ.get("MEMWRITE_API_KEY")
    headers = {"Accept": "application/json", "User-Agent": "memwrite-client"}
    if key:
        headers[API_KEY_HEADER] = key
    return headers


def _segment(value: str) -> str:
    """A path segment: an id that is not one (a "/" in it) is refused by the API, not
    re-routed."""
    return quote(value, safe="")


def _dropping_none(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def _turns(turns: Sequence[Turn | Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The turns as JSON; a turn the API would refuse raises `InvalidRequest` here, with the
    field errors the server's 400 names (`turns[0].content`), never pydantic's own error."""
    dumped: list[dict[str, Any]] = []
    errors: list[dict[str, str]] = []
    for index, turn in enumerate(turns):
        try:
            model = turn if isinstance(turn, Turn) else Turn.model_validate(turn)
        except ValidationError as exc:
            errors += [
                {"field": _field_path(("turns", index, *err["loc"])), "message": err["msg"]}
                for err in exc.errors()
            ]
            continue
        dumped.append(model.model_dump(mode="json", exclude_none=True))
    if errors:
        raise InvalidRequest(
            HTTPStatus.BAD_REQUEST.value, {"error": "invalid_request", "errors": errors}
        )
    return dumped


def _field_path(loc: tuple[Any, ...]) -> str:
    # The server's spelling of a field: ("turns", 0, "content") -> "turns[0].content".
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


def _iso(value: date | str | None) -> str | None:
    return value.isoformat() if isinstance(value, date) else value


class _Calls:
    """The operations of the API (`GET /v1/openapi.json` lists them)."""

    @staticmethod
    def add(
        *,
        user_id: str,
        session_id: str,
        turns: Sequence[Turn | Mapping[str, Any]],
        agent_id: str | None = None,
        source: str | None = None,
        idempotency_key: str | None = None,
    ) -> Call[IngestAck]:
        body = _dropping_none(
            {
                "user_id": user_id,
                "session_id": session_id,
                "agent_id": agent_id,
                "source": source,
                "turns": _turns(turns),
            }
        )
        # One key per logical call, kept across its retries: the server writes once.
        key = idempotency_key or str(uuid.uuid4())
        return Call("POST", "/v1/turns", IngestAck, body, headers={IDEMPOTENCY_HEADER: key})

    @staticmethod
    def add_memories(
        user_id: str,
        memories: Sequence[Mapping[str, Any]],
        *,
        idempotency_key: str | None = None,
    ) -> Call[DirectWriteAck]:
        body = {"memories": [_dropping_none({**m}) for m in memories]}
        for memory in body["memories"]:
            for name in ("observed_at", "expires_at"):
                if name in memory:
                    memory[name] = _iso(memory[name])
        key = idempotency_key or str(uuid.uuid4())
        path = f"/v1/users/{_segment(user_id)}/memories"
        return Call("POST", path, DirectWriteAck, body, headers={IDEMPOTENCY_HEADER: key})

    @staticmethod
    def backfill(
        user_id: str, *, since: datetime | str | None = None, until: datetime | str | None = None
    ) -> Call[BackfillAck]:
        # Not repeated on a lost answer: a second hand-off could run beside the first.
        body = _dropping_none({"since": _iso(since), "until": _iso(until)})
        path = f"/v1/users/{_segment(user_id)}/backfill"
        return Call("POST", path, BackfillAck, body, repeatable=False)

    @staticmethod
    def trace(trace_id: str) -> Call[Trace]:
        return Call("GET", f"/v1/traces/{_segment(trace_id)}", Trace)

    @staticmethod
    def search(
        *,
        user_id: str,
        query: str,
        k: int = 10,
        types: Sequence[str] | None = None,
        topics: Sequence[str] | None = None,
        tiers: Sequence[str] | None = None,
        min_confidence: float | None = None,
        as_of: datetime | str | None = None,
        kinds: Sequence[str] | None = None,
    ) -> Call[SearchResults]:
        body = _dropping_none(
            {
                "user_id": user_id,
                "query": query,
                "k": k,
                "types": list(types) if types is not None else None,
                "topics": list(topics) if topics is not None else None,
                "tiers": list(tiers) if tiers is not None else None,
                "min_confidence": min_confidence,
                "as_of": _iso(as_of),
                "kinds": list(kinds) if kinds is not None else None,
            }
        )
        return Call("POST", "/v1/search", SearchResults, body)

    @staticmethod
    def get_memory(memory_id: str) -> Call[MemoryDetail]:
        return Call("GET", f"/v1/memories/{_segment(memory_id)}", MemoryDetail)

    @staticmethod
    def patch_memory(
        memory_id: str,
        *,
        pinned: bool | EllipsisType = ...,
        expires_at: datetime | str | EllipsisType | None = ...,
    ) -> Call[Memory]:
        # `...` leaves a field as it is; `expires_at=None` removes the expiry. Repeatable: the
        # same patch twice leaves the memory as once.
        body: dict[str, Any] = {}
        if not isinstance(pinned, EllipsisType):
            body["pinned"] = pinned
        if not isinstance(expires_at, EllipsisType):
            body["expires_at"] = _iso(expires_at)
        return Call("PATCH", f"/v1/memories/{_segment(memory_id)}", Memory, body)

    @staticmethod
    def delete_memory(memory_id: str) -> Call[DeletionRecord]:
        # Not repeatable: a second delete of the same memory is a 404, not a no-op.
        path = f"/v1/memories/{_segment(memory_id)}"
        return Call("DELETE", path, DeletionRecord, repeatable=False)

    @staticmethod
    def memory_traces(memory_id: str) -> Call[MemoryTraces]:
        return Call("GET", f"/v1/memories/{_segment(memory_id)}/traces", MemoryTraces)

    @staticmethod
    def memories_page(user_id: str, limit: int, cursor: str | None) -> Call[MemoryPage]:
        params: dict[str, str | int] = {"limit": limit}
        if cursor is not None:
            params["cursor"] = cursor
        return Call("GET", f"/v1/users/{_segment(user_id)}/memories", MemoryPage, params=params)

    @staticmethod
    def traces_page(
        user_id: str,
        limit: int,
        cursor: str | None,
        since: datetime | str | None,
        until: datetime | str | None,
    ) -> Call[TracePage]:
        params: dict[str, str | int] = _dropping_none(
            {"limit": limit, "cursor": cursor, "from": _iso(since), "to": _iso(until)}
        )
        return Call("GET", f"/v1/users/{_segment(user_id)}/traces", TracePage, params=params)

    @staticmethod
    def replay(trace_id: str, config: Mapping[str, Any] | None = None) -> Call[ReplayDiff]:
        body = {"config": dict(config or {})}
        return Call("POST", f"/v1/traces/{_segment(trace_id)}/replay", ReplayDiff, body)

    @staticmethod
    def replay_user(
        user_id: str,
        config: Mapping[str, Any] | None = None,
        *,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Call[BatchReplay]:
        body = _dropping_none(
            {
                "config": dict(config or {}),
                "from": _iso(since),
                "to": _iso(until),
                "limit": limit,
                "cursor": cursor,
            }
        )
        return Call("POST", f"/v1/users/{_segment(user_id)}/replay", BatchReplay, body)

    @staticmethod
    def rollback(trace_id: str) -> Call[RollbackRecord]:
        # Not repeatable: a second rollback of the same trace is refused, not a no-op.
        path = f"/v1/traces/{_segment(trace_id)}/rollback"
        return Call("POST", path, RollbackRecord, repeatable=False)

    @staticmethod
    def erase_user(user_id: str) -> Call[ErasureReport]:
        return Call("DELETE", f"/v1/users/{_segment(user_id)}/memories", ErasureReport)

    @staticmethod
    def settings() -> Call[TenantSettings]:
        return Call("GET", "/v1/settings", TenantSettings)

    @staticmethod
    def put_settings(settings: Mapping[str, Any]) -> Call[TenantSettings]:
        # Repeatable: the whole document replaces the stored one, twice as once.
        return Call("PUT", "/v1/settings", TenantSettings, dict(settings))

    @staticmethod
    def usage(since: date | str | None, until: date | str | None) -> Call[UsageReport]:
        params: dict[str, str | int] = _dropping_none({"from": _iso(since), "to": _iso(until)})
        return Call("GET", "/v1/usage", UsageReport, params=params)

    @staticmethod
    def import_user(user_id: str, lines: str) -> Call[ImportReport]:
        # Repeatable: a repeated import writes nothing more.
        path = f"/v1/users/{_segment(user_id)}/import"
        headers = {"Content-Type": NDJSON}
        return Call("POST", path, ImportReport, headers=headers, content=lines)

    @staticmethod
    def export_path(user_id: str) -> str:
        return f"/v1/users/{_segment(user_id)}/export"


calls = _Calls()


def spilled_export(
    http: httpx.Client | httpx.AsyncClient, response: httpx.Response
) -> httpx.Request | None:
    """For an export answered `303 See Other` (too large for one response), the GET of its
    presigned URL, without the API key: httpx would forward `x-api-key` on a redirect to
    another host, and S3 needs no credential but the URL's."""
    if response.status_code != HTTPStatus.SEE_OTHER or "location" not in response.headers:
        return None
    request = http.build_request("GET", response.headers["location"], headers={"Accept": NDJSON})
    request.headers.pop(API_KEY_HEADER, None)
    return request


def raise_for_error(response: httpx.Response) -> None:
    """The typed exception of an error answer; nothing for a success."""
    if response.is_success:
        return
    try:
        body = response.json()
    except ValueError:
        body = {"message": response.text[:500]}
    raise error_for(
        response.status_code, body, parse_retry_after(response.headers.get("Retry-After"))
    )


def answer_of(call: Call[T], response: httpx.Response) -> T:
    """The success model of `call`, or the typed exception of the error answer."""
    try:
        body = response.json()
    except ValueError:
        body = {"message": response.text[:500]}
    if response.is_success:
        return call.model.model_validate(body)
    raise error_for(
        response.status_code, body, parse_retry_after(response.headers.get("Retry-After"))
    )
