"""One conversation through the whole local pipeline.

What `memwrite demo` and `memwrite ingest` run: the ingest API, then every queued batch through
the stages until the queue is empty; the result is read back from the store. SQLite in a
fresh temporary directory unless a data directory is given (then state accumulates there);
moto with `backend="moto"`.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memwrite.models import StageSpan
from memwrite.records.memory import MemoryUnit
from memwrite_local.runtime.funnel import Funnel, build_funnel

__all__ = [
    "SEARCH_K",
    "IngestFailed",
    "LocalRun",
    "api_sized_requests",
    "run_conversation",
    "run_sessions",
]

SEARCH_K = 5  # results per `--query`


class IngestFailed(Exception):
    """The ingest API refused the conversation (the status and body say why)."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(f"HTTP {status}: {body}")
        self.status = status
        self.body = body


@dataclass
class LocalRun:
    trace: dict[str, Any]
    spans: list[StageSpan]
    memories: list[MemoryUnit]
    funnel: Funnel
    failed: dict[str, str] = field(default_factory=dict)
    searches: list[tuple[str, list[dict[str, Any]]]] = field(default_factory=list)
    # The same queries with `kinds: ["memory"]`, and the user's episodes (as the episodes API
    # returns them, oldest first).
    memory_searches: list[tuple[str, list[dict[str, Any]]]] = field(default_factory=list)
    episodes: list[dict[str, Any]] = field(default_factory=list)


def api_sized_requests(
    conversation: dict[str, Any], max_turns: int, max_bytes: int
) -> list[dict[str, Any]]:
    """The conversation as `POST /v1/turns` bodies, in order, each within the API's limits
    (turns per request and body bytes); a single turn over a limit still goes alone (and gets
    the API's 413, which names it)."""
    head = {key: value for key, value in conversation.items() if key != "turns"}
    requests: list[dict[str, Any]] = []
    chunk: list[dict[str, Any]] = []
    for turn in conversation.get("turns", []):
        candidate = [*chunk, turn]
        too_big = len(json.dumps({**head, "turns": candidate}).encode()) > max_bytes
        if chunk and (len(candidate) > max_turns or too_big):
            requests.append({**head, "turns": chunk})
            candidate = [turn]
        chunk = candidate
    if chunk or not requests:
        requests.append({**head, "turns": chunk})
    return requests


def _merged_trace(traces: list[dict[str, Any]]) -> dict[str, Any]:
    """One conversation sent as several requests: their traces read as one."""
    merged = dict(traces[0])
    merged["trace_ids"] = [trace["trace_id"] for trace in traces]
    merged["turn_ids"] = [tid for trace in traces for tid in trace["turn_ids"]]
    merged["spans"] = [span for trace in traces for span in trace["spans"]]
    merged["llm_calls"] = sum(trace["llm_calls"] for trace in traces)
    merged["cost_usd"] = sum(trace["cost_usd"] for trace in traces)
    merged["outcome"] = {
        key: sum(trace["outcome"][key] for trace in traces) for key in ("stored", "merged")
    }
    statuses = {trace["status"] for trace in traces}
    merged["status"] = next(
        (s for s in ("failed", "in_progress") if s in statuses), traces[-1]["status"]
    )
    return merged


def run_conversation(
    conversation: dict[str, Any],
    queries: Sequence[str] = (),
    backend: str = "sqlite",
    data_dir: Path | None = None,
    search_k: int = SEARCH_K,
) -> LocalRun:
    """One `POST /v1/turns` body (however long) through the pipeline, then `queries`."""
    return run_sessions([conversation], queries, backend, data_dir, search_k)


def run_sessions(
    sessions: Sequence[dict[str, Any]],
    queries: Sequence[str] = (),
    backend: str = "sqlite",
    data_dir: Path | None = None,
    search_k: int = SEARCH_K,
    *,
    extra_env: Mapping[str, str] | None = None,
) -> LocalRun:
    """One user's sessions, in order, each a `POST /v1/turns` body with its own `session_id`,
    through the pipeline on one state; then `queries` are searched as that user. `extra_env`
    is set for the handlers during the run (as `MEMWRITE_LLM_RECORD` for `--record`)."""
    from memwrite.config.settings import load_settings
    from memwrite.wiring import build_memory_store
    from memwrite_local.runtime.backend import LOCAL_API_KEY, LOCAL_TENANT
    from memwrite_local.runtime.embedded import local_backend
    from memwrite_local.runtime.runner import LocalRunner

    limits = load_settings().pipeline.ingest
    user_id = sessions[0]["user_id"]
    failed: dict[str, str] = {}
    searches: list[tuple[str, list[dict[str, Any]]]] = []
    memory_searches: list[tuple[str, list[dict[str, Any]]]] = []
    episodes: list[dict[str, Any]] = []
    with ExitStack() as stack:
        if data_dir is None:
            data_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="memwrite-")))
        # An in-process run with its own key: the caller's configured keys need not include it.
        own_key = {**(extra_env or {}), "MEMWRITE_API_KEYS": f"{LOCAL_API_KEY}={LOCAL_TENANT}"}
        stack.enter_context(local_backend(backend, data_dir, own_key))
        runner = LocalRunner()
        traces = []
        for body in (
            request
            for session in sessions
            for request in api_sized_requests(
                session, limits.max_turns_per_request, limits.max_body_bytes
            )
        ):
            response = runner.call("POST", "/v1/turns", body)
            if response.status >= 400:
                raise IngestFailed(response.status, response.body)
            report = runner.drain()
            failed.update(report.failed)
            failed.update(report.index_failed)
            traces.append(runner.call("GET", f"/v1/traces/{response.body['trace_id']}").body)
        trace = _merged_trace(traces)
        for query in queries:
            body = {"user_id": user_id, "query": query, "k": search_k}
            found = runner.call("POST", "/v1/search", body)
            if found.status != 200:
                raise IngestFailed(found.status, found.body)
            searches.append((query, found.body["results"]))
            found = runner.call("POST", "/v1/search", {**body, "kinds": ["memory"]})
            if found.status != 200:
                raise IngestFailed(found.status, found.body)
            memory_searches.append((query, found.body["results"]))
        episodes = _list_episodes(runner, user_id)
        if queries:
            from functions.api.handler import ACCESS_UPDATES

            # Searches record their retrievals on one worker thread: let it finish while this
            # state exists (after it, the updates would go to real AWS, retried at length).
            ACCESS_UPDATES.submit(lambda: None).result()
        memories = build_memory_store().memories_of(LOCAL_TENANT, user_id)
    spans = [StageSpan.model_validate(span) for span in trace["spans"]]
    outcome = trace["outcome"]
    # A turn repeated inside one request has one id and one span: count distinct turns.
    funnel = build_funnel(
        len(set(trace["turn_ids"])), spans, stored=outcome["stored"], merged=outcome["merged"]
    )
    memories.sort(key=lambda memory: (memory.observed_at, memory.memory_id))
    return LocalRun(trace, spans, memories, funnel, failed, searches, memory_searches, episodes)


def _list_episodes(runner: Any, user_id: str) -> list[dict[str, Any]]:
    """The user's episodes (any status), oldest first, through the episodes API."""
    episodes: list[dict[str, Any]] = []
    cursor = ""
    while True:
        page = runner.call("GET", f"/v1/users/{user_id}/episodes?limit=100{cursor}").body
        episodes.extend(page["episodes"])
        if not page["next_cursor"]:
            return episodes
        cursor = f"&cursor={page['next_cursor']}"
