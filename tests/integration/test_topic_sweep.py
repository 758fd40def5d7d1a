"""Excluding a topic later removes what is already stored under it: through the real handlers
(moto and SQLite), `PUT /v1/settings` adding `health` to `exclude_topics` sweeps the tenant's
health memories (each announced `memory.deleted` on the change feed) and the episodes the
vocabulary marks (their index documents with them), and leaves every other topic alone."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest

import functions.expire.handler as expire_handler
from memwrite.edit.topic_sweep import TOPIC_SWEEP_EVENT
from tests.integration.conftest import Local, MakeLocal
from tests.integration.webhook_receiver import Receiver

USER, OTHER = "dana", "omar"
SECRET = "sweep-secret-0123456789"
HEALTH_MEMORY = "I am allergic to peanuts."  # the rules store it, topic health
HEALTH_EPISODE = "I have diabetes and see my doctor every month."  # kept as an episode
KEPT = ["I live in Paris.", "I work at a pharmacy downtown."]


@pytest.fixture(params=["moto", "sqlite"])
def local(request: pytest.FixtureRequest, make_local: MakeLocal) -> Local:
    return make_local(backend=request.param)


def _send(local: Local, user_id: str, texts: list[str]) -> None:
    turns = [{"role": "user", "content": text} for text in texts]
    answer = local.post_turns({"session_id": "s-1", "user_id": user_id, "turns": turns})
    assert answer.status == 202, answer.body
    assert local.runner.drain().failed == {}


def _get(local: Local, path: str) -> Any:
    answer = local.runner.call("GET", path, api_key=local.api_key)
    assert answer.status == 200, answer.body
    return answer.body


def _stored(local: Local, user_id: str) -> str:
    """Everything the API gives of the user: memories, episodes, export, search hits."""
    memories = _get(local, f"/v1/users/{user_id}/memories?limit=100")["memories"]
    episodes = _get(local, f"/v1/users/{user_id}/episodes")["episodes"]
    exported = _get(local, f"/v1/users/{user_id}/export")
    hits = [
        local.runner.call(
            "POST", "/v1/search", {"user_id": user_id, "query": query}, api_key=local.api_key
        ).body["results"]
        for query in ("peanuts allergy", "diabetes doctor", "Paris", "pharmacy")
    ]
    return json.dumps([memories, episodes, exported, hits]).lower()


def test_excluding_health_later_removes_what_is_stored_of_it(
    local: Local, receiver: Receiver
) -> None:
    hook = {"url": receiver.url, "secret": SECRET, "events": ["memory.deleted"]}
    assert local.runner.call("PUT", "/v1/settings", {"webhooks": [hook]}, api_key=local.api_key)
    # Given a health memory and a health episode, beside other topics, for two users
    _send(local, USER, [HEALTH_MEMORY, HEALTH_EPISODE, *KEPT])
    _send(local, OTHER, [HEALTH_EPISODE])
    before = _stored(local, USER)
    assert "peanut" in before and "diabetes" in before and "paris" in before
    health_ids = [
        memory["memory_id"]
        for memory in _get(local, f"/v1/users/{USER}/memories?limit=100")["memories"]
        if memory["topic"] == "health"
    ]
    assert health_ids

    # When the tenant excludes health (the sweep runs: in the request locally, and the expire
    # function's asynchronous invocation is played the same) and stage 7 catches up
    settings = {"webhooks": [hook], "extraction": {"exclude_topics": ["health"]}}
    stored = local.runner.call("PUT", "/v1/settings", settings, api_key=local.api_key)
    assert stored.status == 200, stored.body
    local.runner.drain()

    # Then nothing of health is listed, exported or found, for either user
    after = _stored(local, USER)
    for word in ("peanut", "diabetes", "doctor"):
        assert word not in after
    assert "diabetes" not in _stored(local, OTHER)
    # And the other topics stay
    assert "paris" in after and "pharmacy" in after
    # And the change feed announced each removed memory
    events = [json.loads(body) for _, body in receiver.requests]
    assert sorted(e["memory_id"] for e in events if e["type"] == "memory.deleted") == sorted(
        health_ids
    )


def test_the_expire_function_runs_a_sweep_it_is_handed(local: Local) -> None:
    # Given a health episode stored while health was not excluded
    _send(local, USER, [HEALTH_EPISODE, "I live in Paris."])

    # When the expire function is invoked with a sweep (as the api function does on AWS)
    event = {TOPIC_SWEEP_EVENT: {"tenant": "local", "topics": ["health"]}}
    expire_handler.sweep_deps.cache_clear()
    report = expire_handler.lambda_handler(event, cast(Any, local.runner_context()))
    local.runner.drain()

    # Then it reports what it removed, and the episode is gone while Paris stays
    assert report["episodes_deleted"] == 1, report
    texts = [e["text"] for e in _get(local, f"/v1/users/{USER}/episodes")["episodes"]]
    assert not any("diabetes" in text for text in texts)
    assert "paris" in _stored(local, USER)
