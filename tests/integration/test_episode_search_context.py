"""An episode is searched with the turn it replies to: a question whose words are only in the
turn before (the other party's question) finds the kept answer by BM25, while search returns the
user's own words. Through the real handlers on both backends (moto and the embedded SQLite),
offline (no model: the user's turns are kept as episodes)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.conftest import Local, MakeLocal

USER = "dana"
QUESTION = "That bowl is lovely! What got you into pottery?"
ANSWER = "My aunt threw bowls every weekend when I was little, and I caught the bug."
EXCLUDED = {"extraction": {"exclude_topics": ["health"], "topic_terms": {"health": ["dialysis"]}}}


@pytest.fixture(params=["moto", "sqlite"])
def local(make_local: MakeLocal, request: pytest.FixtureRequest) -> Local:
    return make_local(backend=str(request.param))


def send(local: Local, turns: list[tuple[str, str]]) -> None:
    body = {
        "session_id": "s-1",
        "user_id": USER,
        "turns": [{"role": role, "content": content} for role, content in turns],
    }
    assert local.post_turns(body).status == 202
    report = local.runner.drain()
    assert report.failed == {} and report.index_failed == {}


def search(local: Local, query: str) -> list[dict[str, Any]]:
    reply = local.runner.call("POST", "/v1/search", {"user_id": USER, "query": query})
    assert reply.status == 200, reply.body
    results: list[dict[str, Any]] = reply.body["results"]
    return results


def lexical(results: list[dict[str, Any]]) -> list[str]:
    """The texts of the results BM25 found."""
    return [hit["text"] for hit in results if "bm25" in hit["matched"]]


def test_a_question_in_the_turn_before_finds_the_answer(local: Local) -> None:
    # Given an answer kept as an episode after the other party's question, and another episode
    send(local, [("assistant", QUESTION), ("user", ANSWER)])
    send(local, [("user", "We drove up the coast to see the lighthouses last spring.")])
    # When the user's memory is searched with a word only the question holds
    found = search(local, "How did she get into pottery?")
    # Then BM25 finds the answer, and search shows the user's own words alone
    assert lexical(found) == [ANSWER]
    assert (found[0]["kind"], found[0]["text"]) == ("episode", ANSWER)


def test_a_turn_after_the_answer_is_not_its_context(local: Local) -> None:
    # Given the user's turn first, the other party's reply after it
    send(local, [("user", ANSWER), ("assistant", "Ceramics runs in families, it seems!")])
    # When a word only the reply holds is searched
    # Then BM25 finds nothing: an episode is searched with the turn before it only
    assert lexical(search(local, "ceramics")) == []


def test_a_turn_before_of_an_excluded_topic_is_left_out(local: Local) -> None:
    # Given a tenant that excludes health, and an answer to a question its vocabulary marks
    assert local.runner.call("PUT", "/v1/settings", EXCLUDED, api_key=local.api_key).status == 200
    send(local, [("assistant", "How is the dialysis going?"), ("user", ANSWER)])
    # When the excluded topic's word is searched
    # Then the answer is kept, but its episode does not hold the question's words
    assert lexical(search(local, "aunt")) == [ANSWER]
    assert lexical(search(local, "dialysis")) == []
