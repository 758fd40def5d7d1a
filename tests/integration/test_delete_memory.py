"""`DELETE /v1/memories/{memory_id}` through the real handlers, on both backends (moto and the
embedded SQLite): the memory leaves the store and the index, what it had superseded is current
again, the change feed says `memory.deleted`, the trace that stored it shows the deletion, and
another tenant's id (or one deleted already) is a 404."""

from __future__ import annotations

import json
from typing import Any

import pytest

import functions.api.handler as api_handler
from memwrite.errors import IndexUnavailable
from tests.integration.conftest import Local, MakeLocal
from tests.integration.webhook_receiver import Receiver

USER = "dana"
SECRET = "delete-secret-0123456789"
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


def delete(local: Local, memory_id: str, api_key: str = "key-a") -> Any:
    return local.runner.call("DELETE", f"/v1/memories/{memory_id}", api_key=api_key)


def memories(local: Local) -> dict[str, dict[str, Any]]:
    listed = local.runner.call("GET", f"/v1/users/{USER}/memories?limit=100", api_key="key-a")
    return {memory["value"]: memory for memory in listed.body["memories"]}


def found(local: Local, query: str) -> list[str]:
    body = {"user_id": USER, "query": query, "k": 5}
    response = local.runner.call("POST", "/v1/search", body, api_key="key-a")
    assert response.status == 200, response.body
    return [hit["text"] for hit in response.body["results"]]


def indexed(local: Local) -> int:
    _, hype_deps = local.runner._stream[0].deps()
    return int(hype_deps.index.count("tenant-a", USER))


def test_deleting_the_newer_city_removes_it_and_the_older_one_is_current_again(
    two_tenants: Local, receiver: Receiver
) -> None:
    local = two_tenants
    hook = {"url": receiver.url, "secret": SECRET, "events": ["memory.deleted"]}
    stored = local.runner.call("PUT", "/v1/settings", {"webhooks": [hook]}, api_key="key-a")
    assert stored.status == 200, stored.body
    # Given Paris, then Berlin and SAP in one later request (Berlin superseded Paris)
    ingest(local, [PARIS])
    moved = ingest(local, [BERLIN, SAP], session="s-2")
    berlin = memories(local)["Berlin"]
    paris_id = memories(local)["Paris"]["memory_id"]

    # When Berlin alone is deleted (and stage 7 catches up)
    response = delete(local, berlin["memory_id"])
    local.runner.drain()

    # Then the answer names the memory and what came back
    assert response.status == 200, response.body
    record = response.body
    assert (record["memory_id"], record["user_id"], record["trace_id"]) == (
        berlin["memory_id"],
        USER,
        moved,
    )
    assert record["restored"] == [paris_id]
    # And Berlin is gone from the store, SAP (same request) stays, Paris is current again
    assert set(memories(local)) == {"Paris", "SAP"}
    assert memories(local)["Paris"]["superseded_by"] is None
    assert (
        local.runner.call("GET", f"/v1/memories/{berlin['memory_id']}", api_key="key-a").status
        == 404
    )
    # And the index holds Paris and SAP; Berlin is never found
    assert indexed(local) == 2
    assert found(local, "Where does the user live?")[0] == "The user lives in Paris."
    assert not any("Berlin" in text for text in found(local, "Berlin"))
    # And the change feed said memory.deleted for Berlin, on its trace
    events = [json.loads(body) for _, body in receiver.requests]
    assert [(e["type"], e["memory_id"], e["trace_id"]) for e in events] == [
        ("memory.deleted", berlin["memory_id"], moved)
    ]
    # And the trace that stored Berlin shows the deletion
    spans = local.get_trace(moved, api_key="key-a").body["spans"]
    [span] = [s for s in spans if s["stage"] == "delete"]
    assert (span["result"], span["reason"]) == (
        "transform",
        {"type": "MemoryDeleted", "memory_id": berlin["memory_id"], "restored": 1},
    )


def test_another_tenants_id_and_a_deleted_id_are_not_found(two_tenants: Local) -> None:
    local = two_tenants
    ingest(local, [PARIS])
    paris = memories(local)["Paris"]["memory_id"]

    # When tenant b deletes tenant a's memory
    refused = delete(local, paris, api_key="key-b")

    # Then it is a 404 and the memory is untouched
    assert refused.status == 404, refused.body
    assert set(memories(local)) == {"Paris"}
    # And deleting it twice: the second is a 404 too, nothing else changed
    assert delete(local, paris).status == 200
    again = delete(local, paris)
    assert again.status == 404 and again.body["error"] == "not_found"
    assert memories(local) == {}


def test_a_deleted_memory_said_again_is_stored_and_indexed_anew(two_tenants: Local) -> None:
    local = two_tenants
    # Given Paris stored, then deleted
    ingest(local, [PARIS])
    assert delete(local, memories(local)["Paris"]["memory_id"]).status == 200
    local.runner.drain()
    assert indexed(local) == 0

    # When the user says it again, later (a new observation)
    ingest(local, [{**PARIS, "timestamp": "2025-08-01T10:00:00Z"}], session="s-3")

    # Then it is stored and searchable again
    assert set(memories(local)) == {"Paris"}
    assert found(local, "Where does the user live?") == ["The user lives in Paris."]


def test_an_index_down_at_the_deletion_is_finished_by_stage_7(
    two_tenants: Local, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = two_tenants
    ingest(local, [PARIS])
    moved = ingest(local, [BERLIN], session="s-2")
    berlin = memories(local)["Berlin"]["memory_id"]
    index = api_handler.deps().delete.index

    def unavailable(tenant: str, user_id: str, memory_id: str) -> None:
        raise IndexUnavailable("the search index is down")

    # When the index fails right after the store committed the deletion
    with monkeypatch.context() as patched:
        patched.setattr(index, "delete", unavailable)
        response = delete(local, berlin)

    # Then the deletion is done (a retry would find nothing), search already leaves Berlin out
    assert response.status == 200, response.body
    assert set(memories(local)) == {"Paris"}
    assert not any("Berlin" in text for text in found(local, "Berlin"))
    assert [hit.memory_id for hit in index.bm25("tenant-a", USER, "Berlin", 5)] == [berlin]
    # And stage 7 takes the document out from the deletion's outbox row
    local.runner.drain()
    assert index.bm25("tenant-a", USER, "Berlin", 5) == []
    assert indexed(local) == 1
    assert local.get_trace(moved, api_key="key-a").body["status"] == "complete"
