"""Issue 22's outage test: the model answers 529 for every call, the turns become pending
episodes and stay searchable; the model comes back, the backfill produces the same memories and
the same final supersession state as a run with the model up all along. Model answers come
through the real `anthropic` client over a mock transport (tests/recorded/anthropic)."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest

import functions.api.handler as api_handler
import functions.backfill.handler as backfill_handler
import functions.extract.handler as extract_handler
from memwrite.adapters.anthropic.extractor import AnthropicExtractorClient
from memwrite.config.settings import ExtractConfig
from tests.integration.conftest import Local, MakeLocal
from tests.recorded_api import recorded

# Two requests of one session, both beyond the rule fast-path; the second moves the user.
LISBON = "Since last month Lisbon has been home, and cilantro ruins every dish for me."
PORTO = "We packed everything up and settled in Porto this May, Lisbon got too pricey."
ANSWERS = ("extract_valid", "extract_moved_porto")  # what the model says to each, in order


def requests(user_id: str) -> tuple[dict[str, Any], ...]:
    return tuple(
        {
            "session_id": "s-move",
            "user_id": user_id,
            "turns": [{"role": "user", "content": text, "timestamp": at}],
        }
        for text, at in ((LISBON, "2025-03-14T10:00:00Z"), (PORTO, "2025-05-20T09:00:00Z"))
    )


class ModelApi:
    """Answers 529 while `down`, else the recorded answers in order; counts requests."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.down = False
        self.requests = 0

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        self.requests += 1
        if self.down:
            return httpx2.Response(
                529, headers={"retry-after-ms": "1"}, json=recorded("error_overloaded")
            )
        return httpx2.Response(200, json=recorded(self.answers.pop(0)))

    def client(self) -> AnthropicExtractorClient:
        return AnthropicExtractorClient(
            ExtractConfig(),
            api_key="test-key",
            base_url="http://testserver",
            http_client=httpx2.Client(transport=httpx2.MockTransport(self.handle)),
            max_retries=1,  # the SDK's own retries: spent on every call of the outage
        )


def install_live(api: ModelApi, monkeypatch: pytest.MonkeyPatch) -> None:
    _, deps = extract_handler.handler.deps()
    monkeypatch.setattr(deps, "llm", api.client())


def install_backfill(api: ModelApi, monkeypatch: pytest.MonkeyPatch) -> None:
    """The model, for the route's checks (api function) and the run (backfill function)."""
    monkeypatch.setattr(api_handler.deps().backfill(), "has_model", True)
    backfill = backfill_handler.deps()
    monkeypatch.setattr(backfill, "has_model", True)
    monkeypatch.setattr(backfill.stage_deps("extract"), "llm", api.client())


def ingest_all(local: Local, user_id: str = "dana") -> None:
    for body in requests(user_id):
        assert local.post_turns(body).status == 202
        local.runner.drain()


def memory_state(local: Local, user_id: str) -> list[tuple[str, str | None, str | None, str]]:
    """Every memory of the user with its supersession state (what supersedes it by text: the
    ids are the user's own)."""
    memories = local.memories(user_id)
    text_of = {m.memory_id: m.text for m in memories}
    return sorted(
        (
            m.text,
            text_of.get(m.superseded_by or ""),
            m.valid_until.isoformat() if m.valid_until else None,
            m.tier.value,
        )
        for m in memories
    )


def search(local: Local, query: str, **extra: Any) -> list[dict[str, Any]]:
    reply = local.runner.call("POST", "/v1/search", {"user_id": "dana", "query": query, **extra})
    assert reply.status == 200, reply.body
    results: list[dict[str, Any]] = reply.body["results"]
    return results


def backfill(local: Local, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """The route hands the backfill over (202 and its trace id), the backfill function's
    invoke runs it under that trace; nothing pending: no trace, nothing run."""
    reply = local.runner.call("POST", "/v1/users/dana/backfill", body or {})
    assert reply.status == 202, reply.body
    results = local.runner.run_backfill_jobs()
    local.runner.drain()  # stage 7 indexes what it stored
    if reply.body["trace_id"] is None:
        assert results == []
        return {"episodes": 0, "trace_id": None}
    [result] = results
    assert result.trace_id == reply.body["trace_id"]
    return result.as_json()


def state_with_the_model_up(
    local: Local, monkeypatch: pytest.MonkeyPatch
) -> list[tuple[str, str | None, str | None, str]]:
    """The memories another user gets from the same requests with the model up all along."""
    install_live(ModelApi(*ANSWERS), monkeypatch)
    ingest_all(local, "dana-up")
    return memory_state(local, "dana-up")


def test_an_outage_then_a_backfill_ends_as_if_the_model_had_been_up(
    make_local: MakeLocal, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the state of a run with the model up all along (another user, the same words)
    local = make_local(backend="sqlite")
    expected = state_with_the_model_up(local, monkeypatch)
    assert [text for text, superseded_by, _, _ in expected if superseded_by] != []
    # When the same requests arrive while the model answers 529 to every call
    api = ModelApi(*ANSWERS)
    api.down = True
    install_live(api, monkeypatch)
    ingest_all(local)
    # Then no memory, nothing failed, and both turns are pending episodes that search finds
    assert local.memories("dana") == []
    assert local.runner.drain().failed == {}
    listed = local.runner.call("GET", "/v1/users/dana/episodes").body["episodes"]
    assert [(e["status"], e["deferred_reason"]["type"]) for e in listed] == [
        ("pending", "DeferredModelFailed"),
        ("pending", "DeferredModelFailed"),
    ]
    found = search(local, "cilantro ruins every dish")
    assert found[0]["kind"] == "episode"
    assert found[0]["source_turn_id"] == listed[0]["turn_id"]
    assert found[0]["text"] == LISBON
    # When the model comes back and the user's episodes are backfilled
    api.down = False
    install_backfill(api, monkeypatch)
    result = backfill(local)
    # Then the same memories and the same supersession state as with the model up all along
    assert (result["episodes"], result["extracted"], result["still_pending"]) == (2, 2, 0)
    assert memory_state(local, "dana") == expected
    # And each episode is extracted, linked to what it produced, and no longer searched beside it
    listed = local.runner.call("GET", "/v1/users/dana/episodes").body["episodes"]
    assert [e["status"] for e in listed] == ["extracted", "extracted"]
    assert all(e["memory_ids"] and e["backfill_trace_id"] == result["trace_id"] for e in listed)
    found = search(local, "where does the user live Porto")
    assert found[0]["kind"] == "memory"
    assert "Porto" in found[0]["text"]
    assert all(hit["kind"] == "memory" for hit in found)
    # And the backfill has its own trace, with spans and cost
    trace = local.get_trace(result["trace_id"]).body
    assert trace["status"] == "complete"
    assert {span["stage"] for span in trace["spans"]} >= {"extract", "persist"}
    assert trace["llm_calls"] == 2 and trace["cost_usd"] > 0
    # And a second backfill is a no-op
    again = backfill(local)
    assert (again["trace_id"], again["episodes"]) == (None, 0)
    assert memory_state(local, "dana") == expected


def test_rolling_a_backfill_back_returns_its_episodes_to_pending(
    make_local: MakeLocal, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given two episodes kept during an outage, then backfilled
    local = make_local(backend="sqlite")
    api = ModelApi(*ANSWERS)
    api.down = True
    install_live(api, monkeypatch)
    ingest_all(local)
    api.down = False
    install_backfill(api, monkeypatch)
    result = backfill(local)
    # When the backfill's trace is rolled back
    reply = local.runner.call("POST", f"/v1/traces/{result['trace_id']}/rollback")
    # Then its memories are gone and its episodes are pending again
    assert reply.status == 200, reply.body
    local.runner.drain()
    assert [m for m in local.memories("dana") if m.active] == []
    listed = local.runner.call("GET", "/v1/users/dana/episodes").body["episodes"]
    assert [(e["status"], e["memory_ids"]) for e in listed] == [("pending", []), ("pending", [])]


def test_bad_backfill_requests_name_the_field(make_local: MakeLocal) -> None:
    # Given a user with a trace, offline (no model)
    local = make_local(backend="sqlite")
    assert local.post_turns(requests("dana")[0]).status == 202
    local.runner.drain()
    call = local.runner.call
    # When a backfill names an unknown user, bad times or an unknown field
    unknown = call("POST", "/v1/users/nobody/backfill", {})
    reversed_range = call(
        "POST",
        "/v1/users/dana/backfill",
        {"since": "2025-06-01T00:00:00Z", "until": "2025-01-01T00:00:00Z"},
    )
    not_a_time = call("POST", "/v1/users/dana/backfill", {"since": "yesterday-ish"})
    extra = call("POST", "/v1/users/dana/backfill", {"user": "dana"})
    no_model = call("POST", "/v1/users/dana/backfill", {})
    # Then each is a 4xx naming the field at fault (and nothing ran)
    fields = [
        (reply.status, [e["field"] for e in reply.body.get("errors", [])])
        for reply in (unknown, reversed_range, not_a_time, extra)
    ]
    assert fields == [
        (404, ["user_id"]),
        (400, ["until"]),
        (400, ["since"]),
        (400, ["user"]),
    ]
    assert (no_model.status, no_model.body["error"]) == (409, "model_required")
    episodes = call("GET", "/v1/users/dana/episodes?status=pending").body["episodes"]
    assert [e["status"] for e in episodes] == ["pending"]


def test_a_backfill_out_of_time_leaves_the_rest_pending_and_the_next_call_goes_on(
    make_local: MakeLocal, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the state of a run with the model up all along, and the same turns kept as
    # episodes through an outage
    local = make_local(backend="sqlite")
    expected = state_with_the_model_up(local, monkeypatch)
    api = ModelApi(*ANSWERS)
    api.down = True
    install_live(api, monkeypatch)
    ingest_all(local)
    api.down = False
    install_backfill(api, monkeypatch)
    # And a route whose function has no time left past its first batch
    monkeypatch.setattr(backfill_handler, "JOB_RESERVE_SECS", 3600.0)

    # When the user's episodes are backfilled over HTTP
    first = backfill(local)

    # Then it ran the first request's batch and counted the other remaining, still pending
    assert (first["episodes"], first["extracted"], first["remaining"]) == (1, 1, 1)
    listed = local.runner.call("GET", "/v1/users/dana/episodes").body["episodes"]
    assert sorted(e["status"] for e in listed) == ["extracted", "pending"]
    # And the next call goes on from there, ending as the run with the model up did
    second = backfill(local)
    assert (second["episodes"], second["remaining"]) == (1, 0)
    assert second["trace_id"] != first["trace_id"]
    assert memory_state(local, "dana") == expected
    assert backfill(local)["episodes"] == 0


def test_keep_all_keeps_every_user_turn_born_extracted_and_never_beside_its_memory(
    make_local: MakeLocal, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a deployment that keeps every user turn as an episode, with the model up
    local = make_local(backend="sqlite", config={"pipeline": {"episodes": {"keep": "all"}}})
    install_live(ModelApi(*ANSWERS), monkeypatch)

    # When both requests are distilled live
    ingest_all(local)

    # Then each turn is an episode born extracted
    listed = local.runner.call("GET", "/v1/users/dana/episodes").body["episodes"]
    assert [e["status"] for e in listed] == ["extracted", "extracted"]
    assert {e["text"] for e in listed} == {LISBON, PORTO}
    # And a search finds the memory, never the episode it came from beside it
    found = search(local, "where does the user live Porto")
    assert found[0]["kind"] == "memory"
    sources = {e["turn_id"] for e in listed}
    assert not [
        hit for hit in found if hit["kind"] == "episode" and hit["source_turn_id"] in sources
    ]
    # And nothing is left for a backfill
    install_backfill(ModelApi(), monkeypatch)
    assert backfill(local)["episodes"] == 0
