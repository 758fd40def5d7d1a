"""A turn the rules read only in part, with no model: kept whole as an episode, so the words the
rules could not read stay searchable; a compound turn they read whole becomes memories. Through
the real handlers on both backends (moto and the embedded SQLite)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.conftest import Local, MakeLocal

USER = "dana"
# The rules read "I adore ramen"; the clause after "but" has a new subject they cannot read.
PARTIAL = "I adore ramen, but cilantro is vile."
# The same shape with the subject left out: read whole, as two claims about the user.
WHOLE = "I adore ramen but can't stand cilantro."


@pytest.fixture(params=["moto", "sqlite"])
def local(make_local: MakeLocal, request: pytest.FixtureRequest) -> Local:
    return make_local(backend=str(request.param))


def ingest(local: Local, text: str, session_id: str) -> None:
    body = {
        "session_id": session_id,
        "user_id": USER,
        "turns": [{"role": "user", "content": text, "timestamp": "2025-04-02T09:00:00Z"}],
    }
    assert local.post_turns(body).status == 202
    report = local.runner.drain()
    assert report.failed == {} and report.index_failed == {}


def search(local: Local, query: str) -> list[dict[str, Any]]:
    reply = local.runner.call("POST", "/v1/search", {"user_id": USER, "query": query})
    assert reply.status == 200, reply.body
    results: list[dict[str, Any]] = reply.body["results"]
    return results


def episodes(local: Local) -> list[dict[str, Any]]:
    reply = local.runner.call("GET", f"/v1/users/{USER}/episodes")
    assert reply.status == 200, reply.body
    listed: list[dict[str, Any]] = reply.body["episodes"]
    return listed


def test_a_turn_the_rules_read_in_part_is_kept_whole_as_an_episode(local: Local) -> None:
    # Given no model, and a turn whose second clause no rule reads
    # When it is ingested
    ingest(local, PARTIAL, "s-partial")
    # Then no partial reading is stored: no "likes ramen" memory, one pending episode instead
    assert local.memories(USER) == []
    (episode,) = episodes(local)
    assert (episode["status"], episode["deferred_reason"]["type"]) == ("pending", "DeferredNoLLM")
    # And search finds the turn by the words the rules could not read
    found = search(local, "cilantro")
    assert found, "the episode is searchable"
    assert (found[0]["kind"], found[0]["text"]) == ("episode", PARTIAL)
    assert found[0]["source_turn_id"] == episode["turn_id"]


def test_a_compound_turn_the_rules_read_whole_becomes_memories(local: Local) -> None:
    # Given no model, and "... but can't stand ..." with the subject "I" left out
    # When it is ingested
    ingest(local, WHOLE, "s-whole")
    # Then both claims are memories about the user, and nothing waits as an episode
    stored = sorted((m.attribute, m.value) for m in local.memories(USER))
    assert stored == [("dislikes", "cilantro"), ("likes", "ramen")]
    assert episodes(local) == []
