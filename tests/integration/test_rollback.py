"""`POST /v1/traces/{trace_id}/rollback` through the real handlers, on both backends (moto and
the embedded SQLite): a later fact rolled back gives the earlier one back, in the store and the
index; a repeat changes nothing; what cannot be undone exactly is refused whole; a retry of a
failed turn after the rollback stores nothing."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

import functions.api.handler as api_handler
import functions.persist.handler as persist_handler
from memwrite.errors import IndexUnavailable, StoreUnavailable
from memwrite.payloads import ExtractInput
from memwrite.records.store import Commit
from memwrite.stages import pipeline_stages
from memwrite.wiring import build_queue_consumer
from tests.integration.conftest import Local, MakeLocal

USER = "dana"
PARIS = {"role": "user", "content": "I live in Paris.", "timestamp": "2025-01-05T10:00:00Z"}
BERLIN = {"role": "user", "content": "I moved to Berlin.", "timestamp": "2025-06-01T09:00:00Z"}
SAP = {"role": "user", "content": "I work at SAP.", "timestamp": "2025-06-01T09:01:00Z"}


@pytest.fixture(params=["moto", "sqlite"])
def two_tenants(make_local: MakeLocal, request: pytest.FixtureRequest) -> Local:
    return make_local(api_keys={"key-a": "tenant-a", "key-b": "tenant-b"}, backend=request.param)


def ingest(local: Local, turns: list[dict[str, Any]], session: str = "s-1") -> str:
    body = {"session_id": session, "user_id": USER, "turns": turns}
    accepted = local.post_turns(body, api_key="key-a")
    assert accepted.status == 202, accepted.body
    report = local.runner.drain()
    assert report.failed == {} and report.index_failed == {}
    return str(accepted.body["trace_id"])


def rollback(local: Local, trace_id: str, api_key: str | None = "key-a") -> Any:
    return local.runner.call("POST", f"/v1/traces/{trace_id}/rollback", api_key=api_key)


def found(local: Local, query: str) -> list[str]:
    body = {"user_id": USER, "query": query, "k": 5}
    response = local.runner.call("POST", "/v1/search", body, api_key="key-a")
    assert response.status == 200, response.body
    return [hit["text"] for hit in response.body["results"]]


def memories(local: Local) -> dict[str, dict[str, Any]]:
    listed = local.runner.call("GET", f"/v1/users/{USER}/memories?limit=100", api_key="key-a")
    return {memory["value"]: memory for memory in listed.body["memories"]}


def indexed(local: Local) -> int:
    _, hype_deps = local.runner._stream[0].deps()
    return int(hype_deps.index.count("tenant-a", USER))


def test_rolling_back_a_move_gives_the_old_city_back_in_store_and_index(
    two_tenants: Local,
) -> None:
    local = two_tenants
    # Given Paris, then a later request moving Dana to Berlin (which superseded Paris)
    ingest(local, [PARIS])
    moved = ingest(local, [BERLIN, SAP], session="s-2")
    assert memories(local)["Paris"]["superseded_by"] == memories(local)["Berlin"]["memory_id"]
    berlin_id, sap_id = (memories(local)[value]["memory_id"] for value in ("Berlin", "SAP"))

    # When the move's trace is rolled back (and stage 7 catches up)
    response = rollback(local, moved)
    local.runner.drain()

    # Then the record names what went and what came back
    assert response.status == 200, response.body
    record = response.body
    paris = memories(local)["Paris"]
    assert record["removed"] == sorted([berlin_id, sap_id])
    assert record["restored"] == [paris["memory_id"]]
    assert (record["trace_id"], record["tenant"], record["user_id"]) == (moved, "tenant-a", USER)
    assert record["requested_via"] == "api"
    # And Paris is active again, Berlin and SAP gone from the store
    assert set(memories(local)) == {"Paris"}
    assert paris["superseded_by"] is None and paris["valid_until"] is None
    # And the index holds Paris only: found by search, Berlin and SAP never
    assert indexed(local) == 1
    assert found(local, "Where does the user live?") == ["The user lives in Paris."]
    assert found(local, "Berlin SAP") == ["The user lives in Paris."]  # the only one left
    # And the trace shows the rollback: when, the record, and a span of stage "rollback"
    view = local.get_trace(moved, api_key="key-a").body
    assert view["rolled_back_at"] == record["rolled_back_at"]
    assert view["rollback"] == record
    spans = [span for span in view["spans"] if span["stage"] == "rollback"]
    assert [(s["result"], s["reason"]) for s in spans] == [
        ("transform", {"type": "RolledBack", "removed": 2, "restored": 1})
    ]


def test_a_second_rollback_returns_the_same_record_and_changes_nothing(
    two_tenants: Local,
) -> None:
    local = two_tenants
    ingest(local, [PARIS])
    moved = ingest(local, [BERLIN], session="s-2")
    first = rollback(local, moved)
    local.runner.drain()
    before = (local.stored_text(), indexed(local))

    # When it is rolled back again
    again = rollback(local, moved)
    local.runner.drain()

    # Then the same record comes back and no table or index changed
    assert again.status == 200
    assert again.body == first.body
    assert (local.stored_text(), indexed(local)) == before


def test_rolling_back_the_older_fact_leaves_the_newer_one_current(two_tenants: Local) -> None:
    local = two_tenants
    # Given Paris, superseded by a later trace's Berlin
    first = ingest(local, [PARIS])
    ingest(local, [BERLIN], session="s-2")

    # When the earlier trace (Paris) is rolled back
    response = rollback(local, first)
    local.runner.drain()

    # Then Paris is gone and Berlin, the newer fact, is untouched and still found
    assert response.status == 200, response.body
    assert response.body["restored"] == []
    assert set(memories(local)) == {"Berlin"}
    assert memories(local)["Berlin"]["superseded_by"] is None
    assert found(local, "Where does the user live?") == ["The user lives in Berlin."]


def test_a_later_merge_into_a_memory_of_the_trace_is_refused_naming_that_trace(
    two_tenants: Local,
) -> None:
    local = two_tenants
    # Given Berlin stored, then said again in a later request (merged into it)
    first = ingest(local, [BERLIN])
    later = ingest(local, [{**BERLIN, "timestamp": "2025-07-01T09:00:00Z"}], session="s-2")
    before = local.stored_text()

    # When the first trace is rolled back / the later one (only a merge)
    refused = rollback(local, first)
    merge_only = rollback(local, later)

    # Then both are 409s naming what blocks them, and nothing changed
    assert refused.status == 409
    assert refused.body["reason"] == "later_trace_depends"
    assert refused.body["trace_ids"] == [later]
    assert refused.body["memory_ids"] == [memories(local)["Berlin"]["memory_id"]]
    assert merge_only.status == 409
    assert merge_only.body["reason"] == "merged_into_existing"
    assert merge_only.body["memory_ids"] == [memories(local)["Berlin"]["memory_id"]]
    assert local.stored_text() == before


def test_another_tenants_trace_and_an_unknown_one_are_404(two_tenants: Local) -> None:
    local = two_tenants
    moved = ingest(local, [PARIS])
    before = local.stored_text()

    cross = rollback(local, moved, api_key="key-b")
    unknown = rollback(local, "0" * 32)
    not_an_id = rollback(local, "x" * 3000)

    assert (cross.status, cross.body) == (404, {"error": "not_found", "trace_id": moved})
    assert unknown.status == not_an_id.status == 404
    assert local.stored_text() == before
    assert rollback(local, moved, api_key=None).status == 401


def test_a_trace_still_in_progress_is_refused(two_tenants: Local) -> None:
    local = two_tenants
    # Given a request accepted but not yet through the pipeline
    body = {"session_id": "s-1", "user_id": USER, "turns": [PARIS]}
    trace_id = local.post_turns(body, api_key="key-a").body["trace_id"]

    response = rollback(local, trace_id)

    assert response.status == 409
    assert response.body["reason"] == "in_progress"
    # And once done it rolls back
    local.runner.drain()
    assert rollback(local, trace_id).status == 200
    assert memories(local) == {}


def test_an_index_failing_after_the_commit_is_a_503_that_the_retry_finishes(
    two_tenants: Local, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = two_tenants
    ingest(local, [PARIS])
    moved = ingest(local, [BERLIN], session="s-2")
    index = api_handler.deps().rollback.index

    def unavailable(tenant: str, user_id: str, memory_id: str) -> None:
        raise IndexUnavailable("the search index is down")

    # When the index fails right after the store committed the rollback
    with monkeypatch.context() as patched:
        patched.setattr(index, "delete", unavailable)
        failed = rollback(local, moved)

    # Then the caller is told to retry, and search already leaves Berlin out (store first)
    assert failed.status == 503
    assert set(memories(local)) == {"Paris"}
    assert "The user lives in Berlin." not in found(local, "Berlin")
    berlin_id = local.get_trace(moved, api_key="key-a").body["rollback"]["removed"][0]
    assert [hit.memory_id for hit in index.bm25("tenant-a", USER, "Berlin", 5)] == [berlin_id]
    # And the retry returns the record and leaves the index holding exactly Paris
    retried = rollback(local, moved)
    local.runner.drain()
    assert retried.status == 200
    assert retried.body == local.get_trace(moved, api_key="key-a").body["rollback"]
    assert index.bm25("tenant-a", USER, "Berlin", 5) == []
    assert indexed(local) == 1
    assert found(local, "Where does the user live?") == ["The user lives in Paris."]


def test_a_body_is_refused_naming_it(two_tenants: Local) -> None:
    local = two_tenants
    trace_id = ingest(local, [PARIS])
    before = local.stored_text()

    for body in ('{"user_id": "dana"}', "[]", "not json"):
        response = local.runner.call(
            "POST", f"/v1/traces/{trace_id}/rollback", body, api_key="key-a"
        )
        assert response.status == 400, body
        assert [error["field"] for error in response.body["errors"]] == ["body"]
    assert local.stored_text() == before
    # An empty JSON object is no body
    assert (
        local.runner.call("POST", f"/v1/traces/{trace_id}/rollback", "{}", api_key="key-a").status
        == 200
    )


def run_stages(payload: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """Pass `payload` through the named pipeline stages' handlers, as the state machine does."""
    for stage in pipeline_stages():
        if stage.name in names:
            module = importlib.import_module(f"functions.{stage.function_dir}.handler")
            payload = module.lambda_handler(payload, Local.runner_context())
    return payload


def test_a_retry_of_a_failed_turn_after_the_rollback_stores_nothing(
    two_tenants: Local, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = two_tenants
    ingest(local, [PARIS])
    # Given a request whose persist committed Berlin (superseding Paris), then failed on SAP
    body = {"session_id": "s-2", "user_id": USER, "turns": [BERLIN, SAP]}
    moved = local.post_turns(body, api_key="key-a").body["trace_id"]
    consumer = build_queue_consumer()
    deliveries = consumer.receive(10, 30)
    (batch,) = ExtractInput.batches_of([delivery.turn for delivery in deliveries])
    stages = ["extract", "resolve_refs", "dedupe", "conflict"]
    decided = run_stages(batch.model_dump(mode="json"), stages)
    store = persist_handler.handler.deps()[1].store
    real_commit = store.commit
    commits: list[Commit] = []

    def second_fails_once(commit: Commit) -> None:
        commits.append(commit)
        if len(commits) == 2:
            raise StoreUnavailable("throttled")
        real_commit(commit)

    monkeypatch.setattr(store, "commit", second_fails_once)
    with pytest.raises(StoreUnavailable):
        run_stages(decided, ["persist"])
    assert local.get_trace(moved, api_key="key-a").body["status"] == "failed"
    assert set(memories(local)) == {"Paris", "Berlin"}

    # When the trace is rolled back before the platform retries persist
    response = rollback(local, moved)
    assert response.status == 200, response.body
    assert response.body["restored"] == [memories(local)["Paris"]["memory_id"]]
    retried = run_stages(decided, ["persist"])
    consumer.delete(deliveries)
    report = local.runner.drain()

    # Then the retry stored nothing: both candidates rejected as TraceRolledBack, visibly
    assert retried["items"] == []
    view = local.get_trace(moved, api_key="key-a").body
    persisted = [s["reason"]["type"] for s in view["spans"] if s["stage"] == "persist"]
    assert persisted == ["TraceRolledBack", "TraceRolledBack"]
    assert view["status"] == "complete"
    assert view["rollback"] == response.body
    assert report.failed == {} and report.index_failed == {}
    # And the rollback stands whole: Paris current again, Berlin and SAP neither stored nor found
    assert set(memories(local)) == {"Paris"}
    assert memories(local)["Paris"]["superseded_by"] is None
    assert indexed(local) == 1
    assert found(local, "Berlin SAP") == ["The user lives in Paris."]
