"""Direct memories (`POST /v1/users/{user_id}/memories`) through the real handlers and the
local runner: no extraction call, but resolve, dedupe, conflict, persist and indexing as for any
candidate; on both backends (moto and SQLite)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.conftest import Local, MakeLocal

USER = "dana"
BERLIN = {"role": "user", "content": "I live in Berlin.", "timestamp": "2025-01-05T10:00:00Z"}
LISBON = {"role": "user", "content": "I moved to Lisbon.", "timestamp": "2025-06-01T09:00:00Z"}


@pytest.fixture(params=["moto", "sqlite"])
def local(make_local: MakeLocal, request: pytest.FixtureRequest) -> Local:
    return make_local(api_keys={"key-a": "tenant-a", "key-b": "tenant-b"}, backend=request.param)


def write(local: Local, memories: list[dict[str, Any]], api_key: str = "key-a") -> Any:
    return local.runner.call(
        "POST", f"/v1/users/{USER}/memories", {"memories": memories}, api_key=api_key
    )


def drained(local: Local) -> None:
    report = local.runner.drain()
    assert report.failed == {} and report.index_failed == {}


def memories(local: Local, api_key: str = "key-a") -> dict[str, dict[str, Any]]:
    listed = local.runner.call("GET", f"/v1/users/{USER}/memories", api_key=api_key)
    assert listed.status == 200, listed.body
    return {m["text"]: m for m in listed.body["memories"]}


def ingest(local: Local, turns: list[dict[str, Any]]) -> None:
    body = {"session_id": "s-1", "user_id": USER, "turns": turns}
    assert local.post_turns(body, api_key="key-a").status == 202
    drained(local)


def test_a_direct_memory_is_stored_traced_searched_and_supersedes(local: Local) -> None:
    # Given Dana's city, inferred from a turn
    ingest(local, [BERLIN])

    # When the agent writes her new city directly
    accepted = write(
        local,
        [
            {
                "type": "fact",
                "attribute": "lives_in",
                "value": "Lisbon",
                "observed_at": "2025-06-01T09:00:00Z",
            }
        ],
    )
    drained(local)

    # Then it is accepted with a trace, which completes with the memory stored
    assert accepted.status == 202, accepted.body
    assert list(accepted.body) == ["trace_id"]
    trace = local.runner.call("GET", f"/v1/traces/{accepted.body['trace_id']}", api_key="key-a")
    assert trace.body["outcome"]["stored"] == 1, trace.body
    # And it superseded the inferred Berlin, as a later turn would have
    listed = memories(local)
    lisbon = listed["The user lives in Lisbon."]
    assert listed["The user lives in Berlin."]["superseded_by"] == lisbon["memory_id"]
    assert lisbon["superseded_by"] is None and lisbon["pinned"] is False
    # And search finds it
    found = local.runner.call(
        "POST", "/v1/search", {"user_id": USER, "query": "Lisbon", "k": 5}, api_key="key-a"
    )
    assert [hit["text"] for hit in found.body["results"]][:1] == ["The user lives in Lisbon."]


def test_a_pinned_direct_memory_holds_against_a_later_turn_and_a_direct_one_replaces_it(
    local: Local,
) -> None:
    # Given Berlin, written directly and pinned
    assert (
        write(
            local,
            [
                {
                    "type": "fact",
                    "attribute": "lives_in",
                    "value": "Berlin",
                    "observed_at": "2025-01-05T10:00:00Z",
                    "pinned": True,
                }
            ],
        ).status
        == 202
    )
    drained(local)
    assert memories(local)["The user lives in Berlin."]["pinned"] is True

    # When a later turn says she moved
    ingest(local, [LISBON])

    # Then Berlin holds, Lisbon is challenged beside it
    listed = memories(local)
    assert listed["The user lives in Berlin."]["superseded_by"] is None
    assert listed["The user lives in Lisbon."]["tier"] == "challenged"

    # And a direct write replaces the pinned memory
    write(
        local,
        [
            {
                "type": "fact",
                "attribute": "lives_in",
                "value": "Porto",
                "text": "Dana's home is now Porto.",
                "observed_at": "2025-09-01T00:00:00Z",
            }
        ],
    )
    drained(local)
    listed = memories(local)
    porto = listed["Dana's home is now Porto."]
    assert listed["The user lives in Berlin."]["superseded_by"] == porto["memory_id"]


def test_the_same_direct_write_twice_is_one_memory(local: Local) -> None:
    memory = {"type": "preference", "attribute": "likes", "value": "green tea"}
    write(local, [memory])
    drained(local)
    again = write(local, [memory])
    drained(local)

    assert again.status == 202
    assert len(memories(local)) == 1


def test_an_expiring_direct_memory_is_kept_out_of_the_list_once_past(local: Local) -> None:
    write(
        local,
        [
            {
                "type": "task",
                "attribute": "todo",
                "value": "renew the passport",
                "expires_at": "2020-01-01T00:00:00",
            }
        ],
    )
    drained(local)

    assert memories(local) == {}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"memories": [{"type": "mood", "attribute": "a", "value": "b"}]}, "memories[0].type"),
        (
            {"memories": [{"type": "fact", "attribute": "lives_in", "value": ""}]},
            "memories[0].value",
        ),
        ({"memories": [{"type": "fact", "attribute": "", "value": "x"}]}, "memories[0].attribute"),
        (
            {"memories": [{"type": "fact", "attribute": "a", "value": "x" * 501}]},
            "memories[0].value",
        ),
        (
            {
                "memories": [
                    {
                        "type": "fact",
                        "attribute": "lives_in",
                        "value": "Oslo",
                        "text": "She lives up north.",
                    }
                ]
            },
            "memories[0].text",
        ),
        (
            {
                "memories": [
                    {"type": "fact", "attribute": "a", "value": "x", "observed_at": "someday"}
                ]
            },
            "memories[0].observed_at",
        ),
        (
            {"memories": [{"type": "fact", "attribute": "a", "value": "x", "expires_at": "soon"}]},
            "memories[0].expires_at",
        ),
        (
            {"memories": [{"type": "fact", "attribute": "a", "value": "x", "pinned": "yes"}]},
            "memories[0].pinned",
        ),
        ({"memories": []}, "memories"),
    ],
)
def test_bad_direct_memories_are_400_naming_the_field(
    local: Local, body: dict[str, Any], field: str
) -> None:
    response = local.runner.call("POST", f"/v1/users/{USER}/memories", body, api_key="key-a")

    assert response.status == 400, response.body
    assert field in {error["field"] for error in response.body["errors"]}, response.body
    # And nothing is queued
    assert local.runner.drain().failed == {}
    assert memories(local) == {}


def test_a_secret_in_a_direct_memory_is_refused(local: Local) -> None:
    secret = {"type": "fact", "attribute": "api_key", "value": "sk-ant-api03-" + "a" * 40}

    response = write(local, [secret])

    assert response.status == 400
    assert [e["field"] for e in response.body["errors"]] == ["memories[0].value"]


def test_a_direct_write_rolls_back_and_its_replay_answers(local: Local) -> None:
    # Given Berlin inferred, then Lisbon written directly
    ingest(local, [BERLIN])
    memory = {"type": "fact", "attribute": "lives_in", "value": "Lisbon"}
    trace_id = write(local, [memory]).body["trace_id"]
    drained(local)

    # When the direct trace is replayed, then rolled back
    replay = local.runner.call(
        "POST", f"/v1/traces/{trace_id}/replay", {"config": {}}, api_key="key-a"
    )
    rollback = local.runner.call("POST", f"/v1/traces/{trace_id}/rollback", api_key="key-a")

    # Then there is no extraction to replay, and the rollback restores Berlin
    assert replay.status == 409, replay.body
    assert replay.body["error"] == "trace_without_inputs"
    assert rollback.status == 200, rollback.body
    listed = memories(local)
    assert list(listed) == ["The user lives in Berlin."]
    assert listed["The user lives in Berlin."]["superseded_by"] is None


def test_erasing_the_user_leaves_nothing_of_a_direct_write(local: Local) -> None:
    # Given a direct memory, stored and indexed
    write(local, [{"type": "fact", "attribute": "lives_in", "value": "Reykjavik"}])
    drained(local)

    # When the user is erased
    erased = local.runner.call("DELETE", f"/v1/users/{USER}/memories", api_key="key-a")

    # Then no table holds its words any more
    assert erased.status == 200
    assert "Reykjavik" not in local.stored_text()
