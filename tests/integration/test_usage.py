"""`GET /v1/usage` through the real handlers on both backends (moto and SQLite): what a tenant
posted, what the model answered and what was embedded, counted for the caller's tenant only,
by the UTC hour; and the meter's contract on both stores (`memwrite.metering.ports`). Model
answers come through the real `anthropic` client over a mock transport."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx2
import pytest

import functions.extract.handler as extract_handler
from memwrite.adapters.anthropic.extractor import AnthropicExtractorClient
from memwrite.config.settings import ExtractConfig
from memwrite.costs.pricing import cost_usd
from memwrite.metering import UsageCounts, UsageMeter
from memwrite.wiring import build_metering
from tests.integration.conftest import Local, MakeLocal
from tests.recorded_api import recorded

KEYS = {"key-a": "tenant-a", "key-b": "tenant-b"}
LISBON = "Since last month Lisbon has been home, and cilantro ruins every dish for me."
TURNS = [
    {"role": "user", "content": "I live in Berlin with my partner Alex and our dog Pixel."},
    {"role": "user", "content": "ok thanks"},  # the pre-filter skips these two: in, not kept
    {"role": "assistant", "content": "Noted: Berlin, Alex and Pixel."},
]


@pytest.fixture(params=["moto", "sqlite"])
def local(request: pytest.FixtureRequest, make_local: MakeLocal) -> Local:
    return make_local(api_keys=KEYS, backend=request.param)


def usage(local: Local, key: str = "key-a", **query: str) -> Any:
    path = "/v1/usage" + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")
    return local.runner.call("GET", path, api_key=key)


def post(local: Local, turns: list[dict[str, Any]], key: str = "key-a") -> dict[str, Any]:
    body = {"session_id": "s-1", "user_id": "dana", "turns": turns}
    answer = local.runner.call("POST", "/v1/turns", body, api_key=key)
    assert answer.status == 202, answer.body
    accepted: dict[str, Any] = answer.body
    return accepted


def test_posted_turns_are_counted_for_the_callers_tenant_only(local: Local) -> None:
    # Given a tenant that posts three turns (the pre-filter keeps one), then re-sends the kept one
    first = post(local, TURNS)
    post(local, TURNS[:1])
    # When it asks for its usage, and another tenant for its own
    mine, theirs = usage(local), usage(local, "key-b")
    # Then its turns are counted once (the re-send of a queued turn is no new turn), kept as
    # the answers' `accepted`
    assert mine.status == 200, mine.body
    assert mine.body["tenant"] == "tenant-a"
    assert first["accepted"] == 1
    assert (mine.body["turns_in"], mine.body["turns_kept"]) == (3, 1)
    # And the other tenant sees nothing of it
    assert theirs.status == 200
    assert theirs.body["tenant"] == "tenant-b"
    assert (theirs.body["turns_in"], theirs.body["turns_kept"], theirs.body["embeddings"]) == (
        0,
        0,
        0,
    )
    # And after the pipeline ran, what it embedded for the index is counted (offline: no model)
    local.runner.drain()
    after = usage(local).body
    assert after["embeddings"] > 0
    assert (after["model_calls"], after["cost_usd"]) == (0, 0.0)
    assert usage(local, "key-b").body["embeddings"] == 0


CACHED = 4096  # the shared prefix, read from the prompt cache


def answered() -> dict[str, Any]:
    """The recorded extraction answer, its shared prefix read from the cache."""
    answer = recorded("extract_valid")
    answer["usage"]["cache_read_input_tokens"] = CACHED
    return answer


class ModelApi:
    """The extraction answer, once."""

    def __init__(self) -> None:
        self.calls = 0

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        self.calls += 1
        json.loads(request.content)
        return httpx2.Response(200, json=answered())


def test_model_calls_tokens_and_cost_are_metered_from_the_answers(
    local: Local, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the extract function's model answering through the real client
    api = ModelApi()
    model = AnthropicExtractorClient(
        ExtractConfig(),
        api_key="test-key",
        base_url="http://testserver",
        http_client=httpx2.Client(transport=httpx2.MockTransport(api.handle)),
        max_retries=0,
    )
    _, deps = extract_handler.handler.deps()
    monkeypatch.setattr(deps, "llm", model)
    # When a turn only the model can read is posted and the pipeline runs
    post(local, [{"role": "user", "content": LISBON}])
    local.runner.drain()
    # Then the call is counted with the tokens the answer reported, cached ones apart, priced
    report = usage(local).body
    tokens = answered()["usage"]
    assert api.calls == 1
    assert report["model_calls"] == 1
    assert (report["input_tokens"], report["output_tokens"]) == (
        tokens["input_tokens"],
        tokens["output_tokens"],
    )
    assert (report["cache_read_input_tokens"], report["cache_creation_input_tokens"]) == (CACHED, 0)
    priced = cost_usd(
        "claude-haiku-4-5",
        tokens["input_tokens"],
        tokens["output_tokens"],
        ExtractConfig().prices_per_mtok,
        cache_read_input_tokens=CACHED,
    )
    assert report["cost_usd"] == pytest.approx(priced, abs=1e-8)
    # And the other tenant paid for nothing
    assert usage(local, "key-b").body["model_calls"] == 0


def test_the_range_filters_by_day_and_hour(local: Local) -> None:
    # Given turns posted now
    post(local, TURNS[:1])
    now = datetime.now(UTC)
    today, hour = now.date().isoformat(), now.strftime("%Y-%m-%dT%H:00Z")
    # Then a range of today, or of this hour, counts them; one of last year does not
    assert usage(local, **{"from": today, "to": today}).body["turns_in"] == 1
    assert usage(local, **{"from": hour}).body["turns_in"] == 1
    past = usage(local, **{"from": "2025-01-01", "to": "2025-01-31"})
    assert past.status == 200
    assert past.body["turns_in"] == 0
    # And the answer names the hours counted, `to` exclusive
    assert (past.body["from"], past.body["to"]) == ("2025-01-01T00:00:00Z", "2025-02-01T00:00:00Z")


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"from": "last-week"}, "from"),
        ({"to": "2026-02-30"}, "to"),
        ({"from": "2026-11-20", "to": "2026-11-10"}, "from"),
    ],
)
def test_a_bad_bound_is_a_400_naming_the_field(
    local: Local, query: dict[str, str], field: str
) -> None:
    # When a bound is no ISO 8601 date or time, or `from` is after `to`
    answer = usage(local, **query)
    # Then it is refused, naming the field
    assert answer.status == 400
    assert answer.body["error"] == "invalid_request"
    assert [error["field"] for error in answer.body["errors"]] == [field]


HOUR = datetime(2026, 11, 27, 9, tzinfo=UTC)
ONE = UsageCounts(turns_in=1, model_calls=1, input_tokens=10, cost_usd=0.00000123)


def meter_of(local: Local) -> UsageMeter:
    meter = build_metering().meter
    assert meter is not None
    return meter


def test_the_meter_sums_a_range_of_hours_for_one_tenant(local: Local) -> None:
    # Given the backend's usage meter, with adds to three hours and another tenant's
    meter = meter_of(local)
    meter.add("acme", HOUR - timedelta(minutes=1), ONE)
    for minute in range(8):
        meter.add("acme", HOUR + timedelta(minutes=minute), ONE)
    meter.add("acme", HOUR + timedelta(hours=1), ONE)
    meter.add("other", HOUR, ONE)
    # Then each range sums exactly its hours, the tenant's only, the cost to its 8th decimal
    assert meter.read("acme", HOUR, HOUR + timedelta(hours=1)).turns_in == 8
    whole = meter.read("acme", HOUR - timedelta(hours=1), HOUR + timedelta(hours=2))
    assert whole == UsageCounts(turns_in=10, model_calls=10, input_tokens=100, cost_usd=0.0000123)
    assert meter.read("acme", HOUR + timedelta(hours=2), HOUR + timedelta(hours=9)).empty


def test_concurrent_adds_all_count_in_the_shared_database_file(make_local: MakeLocal) -> None:
    # Given the embedded backend's meter (every handler and worker of `memwrite serve` shares
    # its file; on DynamoDB an ADD update is atomic by itself, which moto does not emulate)
    meter = meter_of(make_local(backend="sqlite"))
    # When eight workers add to the same hour at once
    threads = [threading.Thread(target=meter.add, args=("acme", HOUR, ONE)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Then every add counted
    assert meter.read("acme", HOUR, HOUR + timedelta(hours=1)).model_calls == 8
