"""One conversation through the whole local pipeline on a fresh embedded state.

What `memwrite demo` and `memwrite ingest` run: moto as AWS, the ingest API, then every queued
batch through the stages until the queue is empty; the result is read back from the store.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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


def run_conversation(conversation: dict[str, Any]) -> LocalRun:
    import boto3

    from memwrite.adapters.dynamodb_store import DynamoMemoryStore, StoreTables
    from memwrite_local.aws import LOCAL_API_KEY, LOCAL_TENANT, LocalAws
    from memwrite_local.runner import LocalRunner

    # An in-process run with its own key: the caller's configured keys need not include it.
    with LocalAws(extra_env={"MEMWRITE_API_KEYS": f"{LOCAL_API_KEY}={LOCAL_TENANT}"}) as aws:
        runner = LocalRunner(aws)
        response = runner.call("POST", "/v1/turns", conversation)
        if response.status >= 400:
            raise IngestFailed(response.status, response.body)
        report = runner.drain()
        trace = runner.call("GET", f"/v1/traces/{response.body['trace_id']}").body
        env = aws.handler_env()
        store = DynamoMemoryStore(
            boto3.client("dynamodb"),
            StoreTables(
                memories=env["MEMORIES_TABLE"],
                entity_facts=env["ENTITY_FACTS_TABLE"],
                outbox=env["OUTBOX_TABLE"],
                turns=env["TURNS_TABLE"],
            ),
        )
        memories = store.memories_of(LOCAL_TENANT, conversation["user_id"])
    spans = [StageSpan.model_validate(span) for span in trace["spans"]]
    outcome = trace["outcome"]
    # A turn repeated inside one request has one id and one span: count distinct turns.
    funnel = build_funnel(
        len(set(trace["turn_ids"])), spans, stored=outcome["stored"], merged=outcome["merged"]
    )
    memories.sort(key=lambda memory: (memory.observed_at, memory.memory_id))
    return LocalRun(trace, spans, memories, funnel, report.failed)
