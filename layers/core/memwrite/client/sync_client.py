"""`MemwriteClient`: the API over httpx, blocking."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import date, datetime
from types import EllipsisType, TracebackType
from typing import Any, Self, TypeVar

import httpx
from pydantic import BaseModel

from memwrite.client.calls import (
    NDJSON,
    Call,
    answer_of,
    calls,
    default_headers,
    raise_for_error,
    spilled_export,
)
from memwrite.client.errors import (
    MemwriteApiError,
    NotFound,
    ServiceUnreachable,
    TraceNotFinished,
)
from memwrite.client.models import (
    BatchReplay,
    DeletionRecord,
    DirectWriteAck,
    ErasureReport,
    ImportReport,
    IngestAck,
    Memory,
    MemoryDetail,
    MemoryTraces,
    ReplayDiff,
    RollbackRecord,
    SearchHit,
    TenantSettings,
    Trace,
    Turn,
    UsageReport,
)
from memwrite.client.retry import RetryPolicy

__all__ = ["DEFAULT_TIMEOUT_SECS", "MemwriteClient"]

DEFAULT_TIMEOUT_SECS = 30.0
PAGE_SIZE = 100  # the API's largest page of memories
TRACE_PAGE_SIZE = 50  # and of traces
T = TypeVar("T", bound=BaseModel)


class MemwriteClient:
    """The memwrite API, blocking: `with MemwriteClient(url, api_key=...) as mw: mw.add(...)`.

    `api_key` defaults to `MEMWRITE_API_KEY`. Connection errors, 429 and 503 are retried
    (`retry`); every other refusal raises its `memwrite.client.errors` exception at once.
    `transport` (an `httpx.BaseTransport`) replaces the network, e.g. for tests.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT_SECS,
        retry: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.retry = retry or RetryPolicy()
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"),
            headers=default_headers(api_key),
            timeout=timeout,
            transport=transport,
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def send(self, call: Call[T]) -> T:
        """One operation, retried as `retry` says; its model, or its typed exception."""
        attempt = 0
        while True:
            try:
                response = self._http.request(
                    call.method,
                    call.path,
                    json=call.json,
                    content=call.content,
                    params=call.params,
                    headers=call.headers,
                )
            except httpx.TransportError as exc:
                if attempt + 1 >= self.retry.attempts or not self.retry.retries_error(
                    exc, repeatable=call.repeatable
                ):
                    raise ServiceUnreachable(f"{call.method} {call.path}: {exc}") from exc
                time.sleep(self.retry.delay(attempt))
            else:
                try:
                    return answer_of(call, response)
                except MemwriteApiError as exc:
                    if attempt + 1 >= self.retry.attempts or not self.retry.retries_status(
                        exc.status, exc.retry_after
                    ):
                        raise
                    time.sleep(self.retry.delay(attempt, exc.retry_after))
            attempt += 1

    def add(
        self,
        *,
        user_id: str,
        session_id: str,
        turns: Sequence[Turn | Mapping[str, Any]],
        agent_id: str | None = None,
        source: str | None = None,
        idempotency_key: str | None = None,
    ) -> IngestAck:
        """Ingest turns (`POST /v1/turns`); follow the returned `trace_id` with `wait`.

        One `Idempotency-Key` per call (a fresh one unless given): its retries write once."""
        return self.send(
            calls.add(
                user_id=user_id,
                session_id=session_id,
                turns=turns,
                agent_id=agent_id,
                source=source,
                idempotency_key=idempotency_key,
            )
        )

    def add_memories(
        self,
        user_id: str,
        memories: Sequence[Mapping[str, Any]],
        *,
        idempotency_key: str | None = None,
    ) -> DirectWriteAck:
        """Write memories as they are (`type`, `attribute`, `value`, optional `entity`, `text`,
        `observed_at`, `pinned`, `expires_at`): no extraction; poll the trace."""
        call = calls.add_memories(user_id, memories, idempotency_key=idempotency_key)
        return self.send(call)

    def trace(self, trace_id: str) -> Trace:
        return self.send(calls.trace(trace_id))

    def wait(self, trace_id: str, timeout: float = 30.0, interval: float = 0.25) -> Trace:
        """Poll the trace until it is complete or failed; `TraceNotFinished` after `timeout`.
        A trace not there yet (a backfill's, until the backfill function runs it) is waited
        for too; still not there after `timeout`: `NotFound`."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                current = self.trace(trace_id)
            except NotFound:
                if time.monotonic() >= deadline:
                    raise
            else:
                if current.finished:
                    return current
                if time.monotonic() >= deadline:
                    raise TraceNotFinished(trace_id, timeout, current)
            time.sleep(min(interval, max(0.0, deadline - time.monotonic())))
            interval = min(interval * 1.5, 2.0)

    def backfill(
        self,
        user_id: str,
        *,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
    ) -> str | None:
        """Hand the user's pending episodes (observed in [since, until]) to the backfill; the
        trace id to `wait` for, or None when none is pending (nothing was started)."""
        return (self.send(calls.backfill(user_id, since=since, until=until))).trace_id

    def search(
        self,
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
    ) -> list[SearchHit]:
        """A user's memories best matching `query`, best first."""
        call = calls.search(
            user_id=user_id,
            query=query,
            k=k,
            types=types,
            topics=topics,
            tiers=tiers,
            min_confidence=min_confidence,
            as_of=as_of,
            kinds=kinds,
        )
        return self.send(call).results

    def get_memory(self, memory_id: str) -> MemoryDetail:
        return self.send(calls.get_memory(memory_id))

    def patch_memory(
        self,
        memory_id: str,
        *,
        pinned: bool | EllipsisType = ...,
        expires_at: datetime | str | EllipsisType | None = ...,
    ) -> Memory:
        """Pin or unpin a memory, or set (None: remove) its expiry; `...` leaves a field."""
        return self.send(calls.patch_memory(memory_id, pinned=pinned, expires_at=expires_at))

    def delete_memory(self, memory_id: str) -> DeletionRecord:
        """Delete one memory; what it had superseded is current again (`restored`)."""
        return self.send(calls.delete_memory(memory_id))

    def memory_traces(self, memory_id: str) -> MemoryTraces:
        """The traces that stored or merged into a memory (why it exists)."""
        return self.send(calls.memory_traces(memory_id))

    def memories(self, user_id: str, *, page_size: int = PAGE_SIZE) -> Iterator[Memory]:
        """Every memory of the user, fetching page after page as the iteration goes."""
        cursor: str | None = None
        while True:
            page = self.send(calls.memories_page(user_id, page_size, cursor))
            yield from page.memories
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def traces(
        self,
        user_id: str,
        *,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        page_size: int = TRACE_PAGE_SIZE,
    ) -> Iterator[Trace]:
        """The user's traces, newest first, every page."""
        cursor: str | None = None
        while True:
            page = self.send(calls.traces_page(user_id, page_size, cursor, since, until))
            yield from page.traces
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def replay(self, trace_id: str, config: Mapping[str, Any] | None = None) -> ReplayDiff:
        """What a changed pipeline config would have made of a trace (nothing is written)."""
        return self.send(calls.replay(trace_id, config))

    def replay_user(
        self,
        user_id: str,
        config: Mapping[str, Any] | None = None,
        *,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> BatchReplay:
        call = calls.replay_user(
            user_id, config, since=since, until=until, limit=limit, cursor=cursor
        )
        return self.send(call)

    def rollback(self, trace_id: str) -> RollbackRecord:
        """Remove exactly what a trace produced, restoring what it superseded."""
        return self.send(calls.rollback(trace_id))

    def settings(self) -> TenantSettings:
        """The tenant's own settings (the credential's tenant)."""
        return self.send(calls.settings())

    def usage(
        self, *, since: date | str | None = None, until: date | str | None = None
    ) -> UsageReport:
        """The tenant's usage (`GET /v1/usage`): turns in and kept, model calls, tokens,
        embeddings and cost over the UTC hours from `since` through `until` (a date: its whole
        day; defaults: this month's first day, now)."""
        return self.send(calls.usage(since, until))

    def put_settings(self, settings: Mapping[str, Any]) -> TenantSettings:
        """Replace the tenant's own settings whole (`extraction`, `webhooks`, skip patterns...)."""
        return self.send(calls.put_settings(settings))

    def erase_user(self, user_id: str) -> ErasureReport:
        """Erase everything of a user, index included."""
        return self.send(calls.erase_user(user_id))

    def export_user(self, user_id: str) -> str:
        """The user's export: JSON lines (`import_user` takes them back); a large one is
        fetched from the URL the API answers with (a 303), without the API key."""
        response = self._http.get(calls.export_path(user_id), headers={"Accept": NDJSON})
        download = spilled_export(self._http, response)
        if download is not None:
            response = self._http.send(download)
        raise_for_error(response)
        return response.text

    def import_user(self, user_id: str, lines: str) -> ImportReport:
        """Restore an export of the user, same ids; a repeat changes nothing."""
        return self.send(calls.import_user(user_id, lines))

    def openapi(self) -> dict[str, Any]:
        """The API's OpenAPI document."""
        response = self._http.get("/v1/openapi.json")
        response.raise_for_status()
        document: dict[str, Any] = response.json()
        return document
