"""One conversation through the whole local pipeline.

What `memwrite demo` and `memwrite ingest` run: the ingest API, then every queued batch through
the stages until the queue is empty; the result is read back from the store. SQLite in a
fresh temporary directory unless a data directory is given (then state accumulates there);
moto with `backend="moto"`.
"""

from __future__ import annotations

import tempfile
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memwrite.memory import MemoryUnit
from memwrite.models import StageSpan
from memwrite_local.funnel import Funnel, build_funnel

__all__ = ["IngestFailed", "LocalRun", "run_conversation"]


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


def run_conversation(
    conversation: dict[str, Any], backend: str = "sqlite", data_dir: Path | None = None
) -> LocalRun:
    from memwrite.wiring import build_memory_store
    from memwrite_local.backend import LOCAL_API_KEY, LOCAL_TENANT
    from memwrite_local.embedded import local_backend
    from memwrite_local.runner import LocalRunner

    with ExitStack() as stack:
        if data_dir is None:
            data_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="memwrite-")))
        # An in-process run with its own key: the caller's configured keys need not include it.
        own_key = {"MEMWRITE_API_KEYS": f"{LOCAL_API_KEY}={LOCAL_TENANT}"}
        stack.enter_context(local_backend(backend, data_dir, own_key))
        runner = LocalRunner()
        response = runner.call("POST", "/v1/turns", conversation)
        if response.status >= 400:
            raise IngestFailed(response.status, response.body)
        report = runner.drain()
        trace = runner.call("GET", f"/v1/traces/{response.body['trace_id']}").body
        memories = build_memory_store().memories_of(LOCAL_TENANT, conversation["user_id"])
    spans = [StageSpan.model_validate(span) for span in trace["spans"]]
    outcome = trace["outcome"]
    # A turn repeated inside one request has one id and one span: count distinct turns.
    funnel = build_funnel(
        len(set(trace["turn_ids"])), spans, stored=outcome["stored"], merged=outcome["merged"]
    )
    memories.sort(key=lambda memory: (memory.observed_at, memory.memory_id))
    return LocalRun(trace, spans, memories, funnel, report.failed)
