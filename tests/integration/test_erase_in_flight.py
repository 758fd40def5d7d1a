"""Erasing a user whose turns are still on their way: `DELETE /v1/users/{user_id}/memories`
while the turns wait in the queue or are between the pipeline's stages, then the pipeline
catches up. Nothing of the user may come back: no memory, no outbox row, no index document, no
session turn, no entity; the first stage that would write (extract's session log, resolve's
entities, persist's commit) rejects the turn with `UserErased`, visibly (span and metric).
Both backends, through the real handlers."""

from __future__ import annotations

import importlib
import time
from typing import Any

import boto3
import pytest

import functions.hype.handler as hype_handler
from memwrite.adapters.aws.dynamodb_erase import DynamoUserEraser, EraseTables
from memwrite.payloads import ExtractInput
from memwrite.records.change_events import is_erasure_row
from memwrite.stages import pipeline_stages
from memwrite.wiring import build_queue_consumer, build_stage_deps
from memwrite_local.runtime.embedded import LocalSqlite
from tests.emf import emf_metrics, metric_total
from tests.integration.conftest import Local, MakeLocal

USER = "erin"
TURNS = [
    {"role": "user", "content": "I live in Lisbon.", "timestamp": "2025-01-05T10:00:00Z"},
    {"role": "user", "content": "I work at Siemens.", "timestamp": "2025-01-05T10:01:00Z"},
]
OTHER = [{"role": "user", "content": "I work at Volvo.", "timestamp": "2025-01-05T10:02:00Z"}]


@pytest.fixture(params=["moto", "sqlite"])
def local(make_local: MakeLocal, request: pytest.FixtureRequest) -> Local:
    # EMF lines on stdout, as a Lambda prints them, to read the rejection's metric
    return make_local(backend=request.param, env={"POWERTOOLS_METRICS_DISABLED": "false"})


def post(local: Local, turns: list[dict[str, Any]], user: str = USER) -> str:
    response = local.post_turns({"session_id": "s-1", "user_id": user, "turns": turns})
    assert response.status == 202 and response.body["accepted"] == len(turns), response.body
    trace_id: str = response.body["trace_id"]
    return trace_id


def erase(local: Local) -> None:
    assert local.runner.call("DELETE", f"/v1/users/{USER}/memories").status == 200


def run_stage_handlers(payload: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """Pass `payload` through the named pipeline stages' handlers, as the state machine does."""
    for stage in pipeline_stages():
        if stage.name in names:
            module = importlib.import_module(f"functions.{stage.function_dir}.handler")
            payload = module.lambda_handler(payload, Local.runner_context())
    return payload


def assert_nothing_of_the_user(local: Local) -> None:
    assert local.memories(USER) == []
    # No session turn (the LLM's context) and no entity of theirs was written again
    _, extract_deps = build_stage_deps("extract")
    session = extract_deps.session_log.recent(
        local.tenant, USER, "s-1", "\uffff", 1000, now=time.time()
    )
    assert session == []
    _, resolve_deps = build_stage_deps("resolve_refs")
    assert resolve_deps.entities.entities_of(local.tenant, USER, 1000) == []
    assert local.runner.call("GET", f"/v1/users/{USER}/memories").body["memories"] == []
    _, hype_deps = hype_handler.deps()
    assert hype_deps.index.count(local.tenant, USER) == 0
    # Nothing waits to be indexed for them: at most the erasure's announcement (user.erased)
    waiting = [c for c in hype_deps.outbox.pending(1000) if c.user_id == USER]
    assert all(is_erasure_row(c.memory_id) for c in waiting)
    for word in ("Lisbon", "Siemens"):
        search = local.runner.call("POST", "/v1/search", {"user_id": USER, "query": word})
        assert search.body["results"] == [], word
    # And a second erasure finds no memory, fact row, outbox row or index document of theirs
    again = local.runner.call("DELETE", f"/v1/users/{USER}/memories").body["removed"]
    kinds = ("memories", "entity_facts", "entities", "outbox", "index_documents")
    assert {kind: again[kind] for kind in kinds} == dict.fromkeys(kinds, 0)


def rejections(trace_id: str, tenant: str, stage: str = "persist") -> list[str]:
    _, persist_deps = build_stage_deps("persist")
    return [
        span.reason.type if span.reason else "none"
        for span in persist_deps.spans.spans_of(tenant, trace_id)
        if span.stage == stage and span.result.value == "reject"
    ]


def test_turns_in_flight_between_stages_are_not_stored_after_the_erasure(
    local: Local, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the user's turns taken off the queue and through extraction, dedupe and conflict
    # (the state machine is running), and another user's turns in the same tenant
    trace_id = post(local, TURNS)
    consumer = build_queue_consumer()
    deliveries = consumer.receive(10, 30)
    (batch,) = ExtractInput.batches_of([delivery.turn for delivery in deliveries])
    decided = run_stage_handlers(
        batch.model_dump(mode="json"), ["extract", "resolve_refs", "dedupe", "conflict"]
    )
    assert len(decided["items"]) == 2
    post(local, OTHER, user="olga")

    # When the user is erased, and then persist gets the batch
    erase(local)
    capsys.readouterr()
    persisted = run_stage_handlers(decided, ["persist"])
    consumer.delete(deliveries)
    report = local.runner.drain()

    # Then persist wrote nothing: both candidates rejected as UserErased (span and metric)
    assert persisted["items"] == []
    assert rejections(trace_id, local.tenant) == ["UserErased", "UserErased"]
    metrics = emf_metrics(capsys.readouterr().out)
    assert (
        metric_total(metrics, "items", Stage="persist", Outcome="reject", Reason="UserErased") == 2
    )
    assert report.failed == {} and report.index_failed == {}
    # And nothing of the user is stored, queued for indexing or searchable
    assert_nothing_of_the_user(local)
    # And the other user's memory went through
    olga = local.runner.call("GET", "/v1/users/olga/memories").body["memories"]
    assert [m["text"] for m in olga] == ["The user works at Volvo."]


def test_turns_still_queued_are_not_stored_after_the_erasure(
    local: Local, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the user's turns accepted and still waiting in the queue
    trace_id = post(local, TURNS)

    # When the user is erased, and only then does the pipeline drain the queue
    erase(local)
    report = local.runner.drain()

    # Then SQLite's erasure took the turns out of the queue; SQS kept them (a message cannot be
    # found by user), so extract got them and rejected them before logging them, visibly
    assert report.failed == {}
    expected = 0 if isinstance(local.backend, LocalSqlite) else 2
    assert rejections(trace_id, local.tenant, "extract") == ["UserErased"] * expected
    metrics = emf_metrics(capsys.readouterr().out)
    assert metric_total(metrics, "items", Stage="extract", Reason="UserErased") == expected
    assert metric_total(metrics, "items", Stage="persist", Reason="UserErased") == 0
    # And nothing of the user is stored, queued for indexing or searchable
    assert_nothing_of_the_user(local)


def test_an_erasure_between_extract_and_resolve_leaves_no_entity(
    local: Local, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the user's turn, naming their sister, taken off the queue and through extraction
    trace_id = post(local, [{**TURNS[0], "content": "My sister Ana lives in Lisbon."}])
    consumer = build_queue_consumer()
    deliveries = consumer.receive(10, 30)
    (batch,) = ExtractInput.batches_of([delivery.turn for delivery in deliveries])
    extracted = run_stage_handlers(batch.model_dump(mode="json"), ["extract"])
    assert extracted["candidates"] != []

    # When the user is erased, and then the rest of the pipeline gets the batch
    erase(local)
    capsys.readouterr()
    decided = run_stage_handlers(extracted, ["resolve_refs", "dedupe", "conflict", "persist"])
    consumer.delete(deliveries)

    # Then resolve wrote no entity and passed nothing on: each candidate rejected as UserErased
    assert decided["items"] == []
    candidates = len(extracted["candidates"])
    assert rejections(trace_id, local.tenant, "resolve_refs") == ["UserErased"] * candidates
    metrics = emf_metrics(capsys.readouterr().out)
    assert metric_total(metrics, "items", Stage="resolve_refs", Reason="UserErased") == candidates
    # And nothing of the user is stored, logged, queued for indexing or searchable
    assert_nothing_of_the_user(local)


def test_a_commit_after_the_erasure_started_is_refused_on_dynamodb(make_local: MakeLocal) -> None:
    # Given a user with a stored memory and a second turn in flight (moto: the erasure runs
    # in steps; SQLite's is one transaction, with nothing to interleave)
    local = make_local(backend="moto")
    post(local, TURNS[:1])
    local.runner.drain()
    post(local, TURNS[1:])
    consumer = build_queue_consumer()
    deliveries = consumer.receive(10, 30)
    (batch,) = ExtractInput.batches_of([delivery.turn for delivery in deliveries])
    decided = run_stage_handlers(
        batch.model_dump(mode="json"), ["extract", "resolve_refs", "dedupe", "conflict"]
    )
    # When persist commits while the erasure is past the user's memories but has not yet
    # deleted their trace rows (its first delete of the turns table)
    env = local.aws.handler_env()
    client = boto3.client("dynamodb")
    persisted: list[dict[str, Any]] = []

    def persist_now(params: dict[str, Any], **_: Any) -> None:
        if env["TURNS_TABLE"] in params["RequestItems"] and not persisted:
            persisted.append(run_stage_handlers(decided, ["persist"]))

    client.meta.events.register("provide-client-params.dynamodb.BatchWriteItem", persist_now)
    eraser = DynamoUserEraser(
        client,
        EraseTables(
            memories=env["MEMORIES_TABLE"],
            entity_facts=env["ENTITY_FACTS_TABLE"],
            entities=env["ENTITIES_TABLE"],
            outbox=env["OUTBOX_TABLE"],
            turns=env["TURNS_TABLE"],
            spans=env["SPANS_TABLE"],
        ),
    )
    eraser.erase_user(local.tenant, USER)
    hype_handler.deps()[1].index.delete_user(local.tenant, USER)
    consumer.delete(deliveries)
    local.runner.drain()

    # Then the commit was refused (the trace rows were marked before anything was deleted)
    assert len(persisted) == 1 and persisted[0]["items"] == []
    assert_nothing_of_the_user(local)


def test_an_erasure_while_stage_7_writes_the_document_leaves_no_document(
    local: Local, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given stage 7 indexing the user's new memory: it has read the memory from the store
    # and the erasure (store, then index) runs just before it writes the document
    post(local, TURNS[:1])
    _, hype_deps = hype_handler.deps()
    write_documents = hype_deps.index.write
    erased: list[bool] = []

    def erase_then_write(writes: Any) -> dict[int, str]:
        if not erased:
            erased.append(True)
            erase(local)
        return write_documents(writes)

    monkeypatch.setattr(hype_deps.index, "write", erase_then_write)

    # When the pipeline and stage 7 run
    report = local.runner.drain()

    # Then the erasure did happen mid-job, and the memory's document is gone again
    assert erased == [True]
    assert report.index_failed == {}
    assert_nothing_of_the_user(local)
