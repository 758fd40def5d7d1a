"""Traces by memory and by user, and replay: through the real api handler, on both backends.

A replay runs the pipeline's stages on a trace's stored (masked) inputs in a dry run: the tests
check what it reports against what the pipeline did, and that it leaves every byte of state as
it was.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memwrite.config.environment import LambdaEnvironment
from memwrite.models import LlmUsageSummary
from memwrite.wiring import build_api_function_deps
from tests.integration.conftest import Local, MakeLocal

KEYS = {"k1": "t1", "k2": "t2"}
ONBOARDING = Path(__file__).resolve().parents[2] / "events" / "conversations" / "onboarding.json"
BACKENDS = ["sqlite", "moto"]
FACTS = (
    "hi",
    "I live in Berlin with my partner Alex.",
    "I like jazz",
    "My card is 4111 1111 1111 1111 and I work at Acme as a designer.",
)


@pytest.fixture(params=BACKENDS)
def api(request: pytest.FixtureRequest, make_local: MakeLocal) -> Local:
    return make_local(api_keys=KEYS, backend=request.param)


def _ingest(api: Local, make_body: Any, *turns: str, key: str = "k1", **extra: Any) -> str:
    posted = api.post_turns(make_body(*turns, user_id="dana", **extra), api_key=key)
    assert posted.status == 202, posted.body
    api.runner.drain()
    trace_id: str = posted.body["trace_id"]
    return trace_id


def _call(api: Local, method: str, path: str, body: Any = None, key: str = "k1") -> Any:
    return api.runner.call(method, path, body, api_key=key)


def _state(api: Local) -> str:
    """Every stored item (DynamoDB tables or SQLite rows) and the embedded index file, hashed
    (with moto the index lives in each handler's memory: the replay's own copy is dropped)."""
    digest = hashlib.sha256(api.stored_text().encode())
    index = Path(LambdaEnvironment.load().embedded_index_path())
    if index.is_file():
        digest.update(index.read_bytes())
    return digest.hexdigest()


def test_a_memory_names_the_traces_that_stored_and_merged_into_it(api: Local, make_body):
    # Given a fact stored by one request and said again in another session
    first = _ingest(api, make_body, "I like jazz a lot.", session_id="s1")
    second = _ingest(api, make_body, "Honestly, I like jazz.", session_id="s2")
    [memory_id] = _call(api, "GET", f"/v1/traces/{first}").body["outcome"]["memory_ids"]

    # When the memory's traces are read
    found = _call(api, "GET", f"/v1/memories/{memory_id}/traces")

    # Then both traces come, oldest first, each with what it did and its spans
    assert found.status == 200
    traces = found.body["traces"]
    assert [(t["trace_id"], t["memory_outcomes"]) for t in traces] == [
        (first, ["stored"]),
        (second, ["merged"]),
    ]
    assert all(t["spans"] and t["status"] == "complete" for t in traces)
    # And another tenant, or an unknown id, finds no such memory
    assert _call(api, "GET", f"/v1/memories/{memory_id}/traces", key="k2").status == 404
    assert _call(api, "GET", "/v1/memories/0123456789abcdef0123456789abcdef/traces").status == 404


def test_a_users_traces_come_newest_first_page_by_page_within_a_time_range(api: Local, make_body):
    # Given three requests of a user (and one of another tenant's user of the same id)
    ids = [_ingest(api, make_body, f"I like band number {n}.", session_id=f"s{n}") for n in "123"]
    _ingest(api, make_body, "I like opera.", key="k2")

    # When the user's traces are read two at a time
    first = _call(api, "GET", "/v1/users/dana/traces?limit=2")
    second = _call(api, "GET", f"/v1/users/dana/traces?limit=2&cursor={first.body['next_cursor']}")

    # Then they come newest first, each once, with spans and outcome
    assert first.status == second.status == 200
    pages = [t["trace_id"] for t in first.body["traces"] + second.body["traces"]]
    assert pages == list(reversed(ids))
    assert second.body["next_cursor"] is None
    assert first.body["traces"][0]["outcome"]["stored"] == 1
    # And a time range keeps only the traces created in it
    created = first.body["traces"][0]["created_at"]
    newest = _call(api, "GET", f"/v1/users/dana/traces?from={created.replace('+', '%2B')}")
    assert [t["trace_id"] for t in newest.body["traces"]] == [ids[-1]]
    later = (datetime.now(UTC) + timedelta(days=1)).isoformat().replace("+", "%2B")
    assert _call(api, "GET", f"/v1/users/dana/traces?from={later}").body["traces"] == []
    # And another tenant sees only its own user's trace
    assert len(_call(api, "GET", "/v1/users/dana/traces", key="k2").body["traces"]) == 1


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("from=yesterday", "from"),
        ("to=2026-13-01", "to"),
        ("from=2026-02-01T00:00:00Z&to=2026-01-01T00:00:00Z", "from"),
        ("cursor=not-a-cursor", "cursor"),
        ("limit=0", "limit"),
    ],
)
def test_a_bad_trace_listing_is_refused_naming_the_parameter(
    make_local: MakeLocal, query: str, field: str
):
    api = make_local(api_keys=KEYS, backend="sqlite")
    response = _call(api, "GET", f"/v1/users/dana/traces?{query}")
    assert response.status == 400
    assert [error["field"] for error in response.body["errors"]] == [field]


def test_a_trace_reports_its_llm_tokens_beside_calls_and_cost(api: Local, make_body):
    # Given a trace whose extract span carries a model call's usage
    trace_id = _ingest(api, make_body, "I like jazz a lot.")
    usage = LlmUsageSummary(calls=1, input_tokens=1200, output_tokens=150, cost_usd=0.00195)
    spans = build_api_function_deps().spans
    extract = next(s for s in spans.spans_of("t1", trace_id) if s.stage == "extract")
    spans.put_spans([extract.model_copy(update={"llm": usage})])

    # When the trace is read / Then tokens, calls and cost are the spans' sums
    trace = _call(api, "GET", f"/v1/traces/{trace_id}").body
    assert (trace["llm_calls"], trace["input_tokens"], trace["output_tokens"]) == (1, 1200, 150)
    assert trace["cost_usd"] == pytest.approx(0.00195)


def test_replay_with_a_stricter_prefilter_reports_what_it_drops_and_writes_nothing(
    api: Local, make_body
):
    # Given a trace the pipeline processed, and the state it left
    trace_id = _ingest(api, make_body, *FACTS)
    recorded = _call(api, "GET", f"/v1/traces/{trace_id}").body
    before = _state(api)

    # When it is replayed with a pre-filter that needs four words
    response = _call(
        api, "POST", f"/v1/traces/{trace_id}/replay", {"config": {"pre_filter": {"min_words": 4}}}
    )

    # Then the three-word turn is newly dropped by the pre-filter, with both fates
    assert response.status == 200, response.body
    diff = response.body
    [dropped] = diff["stages"]["pre_filter"]["newly_dropped"]
    assert dropped["item_id"] == recorded["turn_ids"][2]
    assert dropped["before"] == {"fate": "kept", "stage": None, "reason": None}
    assert dropped["after"]["reason"] == {"type": "TooShort", "word_count": 3, "min_words": 4}
    # And its memory is no longer written; the others are untouched
    assert [m["text"] for m in diff["memories"]["no_longer_written"]] == ["The user likes jazz."]
    assert diff["memories"]["added"] == diff["memories"]["merged"] == []
    # And the replay with the current config reproduces what the pipeline recorded
    assert diff["before"]["stored"] == recorded["outcome"]["stored"]
    assert diff["after"]["stored"] == recorded["outcome"]["stored"] - 1
    # And the card number never reaches the replay: it saw the masked text
    assert "4111" not in str(diff)
    # And nothing was written anywhere: tables, spans, ledger, memories, outbox, index
    assert _state(api) == before


def test_replay_with_the_current_config_reproduces_what_the_pipeline_recorded(api: Local):
    # Given the onboarding conversation (skips, a blocked password, merges) through the pipeline
    conversation = json.loads(ONBOARDING.read_text(encoding="utf-8"))
    posted = api.post_turns(conversation, api_key="k1")
    api.runner.drain()
    recorded = _call(api, "GET", f"/v1/traces/{posted.body['trace_id']}").body

    # When it is replayed with no override
    diff = _call(api, "POST", f"/v1/traces/{recorded['trace_id']}/replay", {"config": {}}).body

    # Then both runs count what the trace recorded, and nothing differs
    outcome = recorded["outcome"]
    for run in (diff["before"], diff["after"]):
        assert (run["stored"], run["merged"], run["discarded"]) == (
            outcome["stored"],
            outcome["merged"],
            outcome["discarded"],
        )
    # And both would keep the turns the pipeline kept as episodes (replay shows them)
    kept = sorted(episode["turn_id"] for episode in recorded["episodes"])
    assert kept
    assert diff["before"]["episodes"] == diff["after"]["episodes"] == kept
    assert diff["memories"] == {"added": [], "merged": [], "no_longer_written": []}
    assert all(not s["newly_dropped"] and not s["newly_kept"] for s in diff["stages"].values())


def test_replay_with_a_looser_config_adds_memories_and_the_batch_totals_them(api: Local, make_body):
    # Given two traces of a user, one with a two-word turn the pre-filter found too short
    quiet = _ingest(api, make_body, "I like jazz a lot.", session_id="s1")
    short = _ingest(api, make_body, "I'm vegan.", "I work at Acme as a designer.", session_id="s2")
    before = _state(api)

    # When every trace of the user is replayed with two words enough
    response = _call(
        api,
        "POST",
        "/v1/users/dana/replay",
        {"config": {"pre_filter": {"min_words": 2}}, "from": "2020-01-01T00:00:00Z"},
    )

    # Then that trace newly keeps the short turn and would add its memory
    assert response.status == 200, response.body
    batch = response.body
    by_trace = {diff["trace_id"]: diff for diff in batch["traces"]}
    assert list(by_trace) == [short, quiet]  # newest first
    [kept] = by_trace[short]["stages"]["pre_filter"]["newly_kept"]
    assert kept["before"]["reason"] == {"type": "TooShort", "word_count": 2, "min_words": 3}
    assert kept["after"]["fate"] == "kept"
    added = by_trace[short]["memories"]["added"]
    assert [(m["text"], m["before"], m["after"]) for m in added] == [
        ("The user follows a vegan diet.", None, "stored")
    ]
    # And the other trace does not change
    assert by_trace[quiet]["before"] == by_trace[quiet]["after"]
    totals = batch["totals"]
    assert (totals["traces"], totals["changed"], totals["newly_kept"], totals["added"]) == (
        2,
        1,
        1,
        1,
    )
    assert batch["next_cursor"] is None
    # And nothing was written
    assert _state(api) == before


def test_replay_of_another_tenants_trace_is_404_and_its_batch_finds_nothing(api: Local, make_body):
    # Given a trace of tenant t1
    trace_id = _ingest(api, make_body, *FACTS)
    # When tenant t2 replays it, or replays its user / Then it does not exist for t2
    response = _call(api, "POST", f"/v1/traces/{trace_id}/replay", {"config": {}}, key="k2")
    assert (response.status, response.body["error"]) == (404, "not_found")
    batch = _call(api, "POST", "/v1/users/dana/replay", {"config": {}}, key="k2")
    assert batch.body["totals"]["traces"] == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"config": {"pre_filter": {"min_wordz": 4}}}, "config.pre_filter.min_wordz"),
        ({"config": {"pre_filter": {"min_words": -1}}}, "config.pre_filter.min_words"),
        ({"config": {"pre_filter": {"min_words": "many"}}}, "config.pre_filter.min_words"),
        (
            {"config": {"dedupe": {"dedupe_merge_threshold": 1.5}}},
            "config.dedupe.dedupe_merge_threshold",
        ),
        ({"config": {"telemetry": True}}, "config.telemetry"),
        ({"config": 5}, "config"),
        ({"config": {}, "dry_run": False}, "dry_run"),
    ],
)
def test_a_bad_override_is_refused_naming_the_field(
    make_local: MakeLocal, make_body, body: dict[str, Any], field: str
):
    # Given a trace
    api = make_local(api_keys=KEYS, backend="sqlite")
    trace_id = _ingest(api, make_body, *FACTS)
    # When it is replayed with a bad override / Then 400 names the field, for both forms
    for path in (f"/v1/traces/{trace_id}/replay", "/v1/users/dana/replay"):
        response = _call(api, "POST", path, body)
        assert response.status == 400, (path, response.body)
        assert [error["field"] for error in response.body["errors"]] == [field]


def test_a_trace_recorded_without_inputs_cannot_be_replayed(make_local: MakeLocal, make_body):
    # Given a trace recorded before traces kept their inputs
    api = make_local(api_keys=KEYS, backend="sqlite")
    trace_id = _ingest(api, make_body, *FACTS)
    ledger = build_api_function_deps().ledger
    record = ledger.get_trace("t1", trace_id)
    assert record is not None
    old = replace(record, trace_id="0123456789abcdef0123456789abcdef")
    ledger.put_trace(old)
    # When it is replayed / Then 409 says why; the batch replays the rest and names it
    response = _call(api, "POST", f"/v1/traces/{old.trace_id}/replay", {"config": {}})
    assert (response.status, response.body["error"]) == (409, "trace_without_inputs")
    batch = _call(api, "POST", "/v1/users/dana/replay", {"config": {}}).body
    assert batch["without_inputs"] == [old.trace_id]
    assert batch["totals"]["traces"] == 1


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("GET", "/v1/traces/abc/replay", ["POST"]),
        ("POST", "/v1/traces/abc", ["GET"]),
        ("DELETE", "/v1/users/dana/traces", ["GET"]),
        ("GET", "/v1/users/dana/replay", ["POST"]),
        ("POST", "/v1/memories/abc/traces", ["GET"]),
    ],
)
def test_a_wrong_method_on_a_trace_path_is_a_405_naming_the_allowed_ones(
    make_local: MakeLocal, method: str, path: str, allowed: list[str]
):
    api = make_local(api_keys=KEYS, backend="sqlite")
    response = _call(api, method, path, {} if method == "POST" else None)
    assert (response.status, response.body["allowed"]) == (405, allowed)
    assert response.headers["Allow"] == ", ".join(allowed)
