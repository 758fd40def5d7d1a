"""An excluded topic is never kept: through the real handlers (moto and SQLite), offline, a turn
an excluded topic's vocabulary marks is dropped with `ExcludedTopic{topic}` and its words are
stored nowhere (no memory, episode, session-log entry, index document or export), while a turn
that merely sounds close is kept."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.conftest import Local, MakeLocal
from tests.integration.test_episodes_outage import (
    LISBON,
    ModelApi,
    install_backfill,
    install_live,
    requests,
)

USER = "dana"
EXCLUDED = {"extraction": {"exclude_topics": ["health"], "topic_terms": {"health": ["dialysis"]}}}
HEALTH = [
    "I have diabetes.",
    "I have asthma and carry my inhaler everywhere.",
    "I've been seeing a therapist since the divorce.",
    "I sprained my ankle on the stairs last week.",
    "I go to dialysis three mornings a week.",  # the tenant's own term
]
CLOSE = [
    "I work at a pharmacy downtown.",
    "I renewed my gym membership for another year.",
]


@pytest.fixture(params=["moto", "sqlite"])
def local(request: pytest.FixtureRequest, make_local: MakeLocal) -> Local:
    return make_local(backend=request.param)


def _send(local: Local, texts: list[str]) -> str:
    turns = [{"role": "user", "content": text} for text in texts]
    answer = local.post_turns({"session_id": "s-1", "user_id": USER, "turns": turns})
    assert answer.status == 202, answer.body
    assert local.runner.drain().failed == {}
    return str(answer.body["trace_id"])


def _episode_texts(local: Local) -> list[str]:
    listed = local.runner.call("GET", f"/v1/users/{USER}/episodes", api_key=local.api_key)
    assert listed.status == 200, listed.body
    return [episode["text"] for episode in listed.body["episodes"]]


def _search(local: Local, query: str) -> list[dict[str, Any]]:
    found = local.runner.call(
        "POST", "/v1/search", {"user_id": USER, "query": query}, api_key=local.api_key
    )
    assert found.status == 200, found.body
    return list(found.body["results"])


def test_offline_a_turn_of_an_excluded_topic_is_stored_in_no_form(local: Local) -> None:
    # Given a tenant that excludes health, with a term of its own
    assert local.runner.call("PUT", "/v1/settings", EXCLUDED, api_key=local.api_key).status == 200
    # When health statements and close-sounding ones are sent with no model configured
    trace_id = _send(local, HEALTH + CLOSE)
    # Then each health turn is dropped with ExcludedTopic{health} at extract
    trace = local.get_trace(trace_id)
    excluded = [
        span
        for span in trace.body["spans"]
        if span["stage"] == "extract" and span["kind"] == "turn"
        if span["reason"] == {"type": "ExcludedTopic", "topic": "health"}
    ]
    assert len(excluded) == len(HEALTH), trace.body["spans"]
    # And only the close-sounding turns are kept as episodes, searchable
    assert sorted(_episode_texts(local)) == sorted(CLOSE)
    assert _search(local, "pharmacy")
    assert _search(local, "diabetes asthma therapist dialysis ankle") == [] or all(
        hit["text"] in CLOSE for hit in _search(local, "diabetes asthma therapist dialysis ankle")
    )
    # And no word of them is stored anywhere, nor exported
    stored = local.stored_text().lower()
    exported = local.runner.call("GET", f"/v1/users/{USER}/export", api_key=local.api_key)
    assert exported.status == 200
    for word in ("diabetes", "asthma", "therapist", "three mornings", "sprained"):
        assert word not in stored
        assert word not in str(exported.body).lower()


def test_without_the_exclusion_the_same_turns_are_kept(local: Local) -> None:
    # Given no excluded topic
    # When the same turns are sent offline
    _send(local, HEALTH[:2])
    # Then they are kept as episodes (what the exclusion changes)
    assert sorted(_episode_texts(local)) == sorted(HEALTH[:2])


def test_topic_terms_are_validated_naming_the_field(local: Local) -> None:
    # Given a vocabulary with a term over the limit
    body = {"extraction": {"topic_terms": {"health": ["x" * 65]}}}
    # When it is PUT
    refused = local.runner.call("PUT", "/v1/settings", body, api_key=local.api_key)
    # Then it is a 400 naming the field
    assert refused.status == 400, refused.body
    assert refused.body["errors"][0]["field"].startswith("extraction.topic_terms")


def test_an_episode_is_rechecked_at_backfill_and_the_models_topic_decides(
    make_local: MakeLocal, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a tenant excluding food, and a turn its vocabulary does not mark kept as an
    # episode while the model was down
    local = make_local(backend="sqlite")
    body = {"extraction": {"exclude_topics": ["food"]}}
    assert local.runner.call("PUT", "/v1/settings", body).status == 200
    api = ModelApi("extract_valid")
    api.down = True
    install_live(api, monkeypatch)
    assert local.post_turns(requests("dana")[0]).status == 202
    local.runner.drain()
    assert [e["text"] for e in _episode_texts_of(local)] == [LISBON]
    # When the model comes back and says the turn holds a food memory (and a place)
    api.down = False
    install_backfill(api, monkeypatch)
    result = local.runner.call("POST", "/v1/users/dana/backfill", {})
    assert result.status == 202, result.body
    local.runner.run_backfill_jobs()
    local.runner.drain()
    # Then the place is stored, the food is not, and the episode's words are kept nowhere
    assert {m.topic for m in local.memories("dana")} == {"location"}
    assert _episode_texts_of(local) == []
    assert "cilantro" not in local.stored_text().lower()
    assert all("cilantro" not in hit["text"] for hit in _search(local, "cilantro dish"))


def _episode_texts_of(local: Local) -> list[dict[str, Any]]:
    listed = local.runner.call("GET", f"/v1/users/{USER}/episodes", api_key=local.api_key)
    assert listed.status == 200, listed.body
    return list(listed.body["episodes"])


def test_a_direct_memory_of_an_excluded_topic_is_not_stored(local: Local) -> None:
    # Given a tenant that excludes location
    body = {"extraction": {"exclude_topics": ["location"]}}
    assert local.runner.call("PUT", "/v1/settings", body, api_key=local.api_key).status == 200
    # When an agent writes a location memory directly
    memory = {"type": "fact", "attribute": "lives_in", "value": "Lisbon"}
    written = local.runner.call(
        "POST", f"/v1/users/{USER}/memories", {"memories": [memory]}, api_key=local.api_key
    )
    assert written.status == 202, written.body
    assert local.runner.drain().failed == {}
    # Then nothing is stored, and the trace says why
    assert local.memories(USER) == []
    reasons = [s["reason"] for s in local.get_trace(written.body["trace_id"]).body["spans"]]
    assert {"type": "ExcludedTopic", "topic": "location"} in reasons
    stored = local.stored_text().lower()
    assert "lisbon" not in stored, stored[stored.find("lisbon") - 300 : stored.find("lisbon") + 50]
