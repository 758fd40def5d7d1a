"""The model budget through the real pipeline, locally (SQLite queue, stores and buckets): a
live turn that finds the budget empty waits in the queue, then becomes a pending episode with
`DeferredBudget{waited_s}`; a call that goes is charged and refunded to its usage; an answer
cut off at max_tokens is asked again once with twice the room, then the turn is deferred as
`DeferredModelFailed{max_tokens}`. Model answers come through the real `anthropic` client over
a mock transport (tests/recorded/anthropic)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx2
import pytest

import functions.backfill.handler as backfill_handler
import functions.extract.handler as extract_handler
from memwrite.adapters.anthropic.extractor import AnthropicExtractorClient
from memwrite.adapters.sqlite.budget import SqliteBudgetStore
from memwrite.adapters.sqlite.database import open_database
from memwrite.budget import ModelBudget
from memwrite.config.model_limits import ModelConfig
from memwrite.config.settings import ExtractConfig
from memwrite.extract import candidates
from tests.integration.conftest import Local, MakeLocal
from tests.recorded_api import recorded

LISBON = "Since last month Lisbon has been home, and cilantro ruins every dish for me."
MAX_WAIT_S = 60.0
CONFIG = {"pipeline": {"model": {"max_wait_s": MAX_WAIT_S}}}


class Clock:
    """The extract stage's and the SQLite queue's time, moved by the test."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


class ModelApi:
    """The recorded answers in order; keeps each request's body."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.requests: list[dict[str, Any]] = []

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(json.loads(request.content))
        return httpx2.Response(200, json=recorded(self.answers.pop(0)))


T0 = 1_800_000_000.0  # the budget's clock: standing still, nothing refills unseen


def client(api: ModelApi, data_dir: Path, at: float = T0) -> AnthropicExtractorClient:
    """The mock API, charged to the budget in the local database file, at the time `at`."""
    budget = ModelBudget(ModelConfig(), SqliteBudgetStore(open_database(data_dir)), now=lambda: at)
    return AnthropicExtractorClient(
        ExtractConfig(),
        api_key="test-key",
        base_url="http://testserver",
        http_client=httpx2.Client(transport=httpx2.MockTransport(api.handle)),
        max_retries=0,
        budget=budget,
    )


def install(
    local: Local, api: ModelApi, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> ModelBudget:
    """The extract function's model: the mock API, charged to the budget in the local file."""
    model = client(api, data_dir)
    _, deps = extract_handler.handler.deps()
    monkeypatch.setattr(deps, "llm", model)
    return ModelBudget(ModelConfig(), SqliteBudgetStore(open_database(data_dir)), now=lambda: T0)


def ingest(local: Local) -> None:
    body = {
        "session_id": "s-1",
        "user_id": "dana",
        "turns": [{"role": "user", "content": LISBON, "timestamp": "2025-03-14T10:00:00Z"}],
    }
    assert local.post_turns(body).status == 202


def episodes(local: Local) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = local.runner.call("GET", "/v1/users/dana/episodes").body[
        "episodes"
    ]
    return listed


def test_a_turn_waits_in_the_queue_for_the_budget_then_is_deferred_with_the_wait(
    make_local: MakeLocal, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a model budget the provider has closed for an hour (a 429 with retry-after)
    local = make_local(backend="sqlite", config=CONFIG)
    api = ModelApi("extract_valid")
    budget = install(local, api, tmp_path / "data", monkeypatch)
    budget.throttled("anthropic", "claude-haiku-4-5", 3_600.0)
    # And the extract stage and the queue on a clock the test moves
    clock = Clock()
    _, deps = extract_handler.handler.deps()
    monkeypatch.setattr(deps, "clock", clock)
    monkeypatch.setattr("memwrite.adapters.sqlite.queue.time", SimpleNamespace(time=clock))
    # When a turn the rules cannot handle is accepted and the queue drained
    ingest(local)
    first = local.runner.drain()
    # Then it waits in the queue: no request sent, nothing failed, no episode yet
    assert first.budget_waits == 1
    assert first.failed == {}
    assert api.requests == []
    assert episodes(local) == []
    # And it stays hidden while it waits
    clock.now += MAX_WAIT_S / 2
    assert local.runner.drain().completed_batches == 0
    # When max_wait_s has passed since it was accepted and the queue is drained again
    clock.now += MAX_WAIT_S / 2 + 1
    second = local.runner.drain()
    # Then it is a pending episode deferred for want of budget, naming how long it waited
    assert second.failed == {}
    assert second.budget_waits == 0
    (episode,) = episodes(local)
    assert episode["status"] == "pending"
    assert episode["deferred_reason"]["type"] == "DeferredBudget"
    assert episode["deferred_reason"]["waited_s"] >= MAX_WAIT_S
    # And still no request was sent, and no memory was made
    assert api.requests == []
    assert local.memories("dana") == []


def test_a_waiting_turn_tried_again_while_the_budget_is_empty_costs_no_rules_or_context(
    make_local: MakeLocal, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a model budget the provider closed for 10 s on a clock that stands still: it
    # expects room in 10 s, on every try
    local = make_local(backend="sqlite", config=CONFIG)
    api = ModelApi("extract_valid")
    install(local, api, tmp_path / "data", monkeypatch).throttled(
        "anthropic", "claude-haiku-4-5", 10.0
    )
    clock = Clock()
    _, deps = extract_handler.handler.deps()
    monkeypatch.setattr(deps, "clock", clock)
    monkeypatch.setattr("memwrite.adapters.sqlite.queue.time", SimpleNamespace(time=clock))
    # And the rules and the session log's reads counted (no reading kept from an earlier test:
    # a process keeps each turn's rule reading)
    candidates._read_with_rules.cache_clear()
    ruled: list[str] = []
    real_rules = candidates.extract_with_rules
    monkeypatch.setattr(
        candidates,
        "extract_with_rules",
        lambda text, **kw: ruled.append(text) or real_rules(text, **kw),
    )
    reads: list[str] = []
    real_recent = deps.session_log.recent
    monkeypatch.setattr(
        deps.session_log, "recent", lambda *a, **kw: reads.append(a[2]) or real_recent(*a, **kw)
    )
    # When a turn the rules cannot handle is accepted and tried three times in 50 s (each
    # time it is back in the queue: it waits its place in its tenant's line, 10 s then 16 s)
    accepted = clock.now
    ingest(local)
    waits = []
    for _ in range(3):
        waits.append(local.runner.drain().budget_waits)
        clock.now += 25.0
    # Then it waited on each try, and not one try ran the rules or read the session's context
    assert waits == [1] * 3
    assert (ruled, reads) == ([], [])
    assert api.requests == []
    # When it is tried once max_wait_s has passed
    clock.now = accepted + MAX_WAIT_S + 1
    report = local.runner.drain()
    # Then the rules ran once, and it is an episode deferred for want of budget, with the wait
    assert (report.budget_waits, report.failed) == (0, {})
    assert ruled == [LISBON]
    (episode,) = episodes(local)
    assert episode["status"] == "pending"
    assert episode["deferred_reason"]["type"] == "DeferredBudget"
    assert episode["deferred_reason"]["waited_s"] >= MAX_WAIT_S
    assert api.requests == []


def test_a_call_is_charged_its_max_tokens_and_refunded_to_its_usage(
    make_local: MakeLocal, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an open budget
    local = make_local(backend="sqlite", config=CONFIG)
    api = ModelApi("extract_valid")
    budget = install(local, api, tmp_path / "data", monkeypatch)
    # When a turn goes through the pipeline
    ingest(local)
    report = local.runner.drain()
    # Then it became memories, in one request of max_tokens 2,048
    assert report.completed_batches == 1
    assert local.memories("dana") != []
    assert [r["max_tokens"] for r in api.requests] == [ExtractConfig().max_output_tokens]
    # And the model's bucket was left charged with the answer's real output tokens only
    used = recorded("extract_valid")["usage"]["output_tokens"]
    shards = budget.snapshot("anthropic", "claude-haiku-4-5")
    full = ModelConfig().limits_for("anthropic", "claude-haiku-4-5").output_tokens_per_minute
    assert full - sum(shard.levels[2] for shard in shards) == used


def test_an_answer_truncated_twice_defers_the_turn_as_max_tokens(
    make_local: MakeLocal, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a model whose answers are cut off at max_tokens, even with twice the room
    local = make_local(backend="sqlite", config=CONFIG)
    api = ModelApi("extract_truncated", "extract_truncated")
    install(local, api, tmp_path / "data", monkeypatch)
    # When a turn goes through the pipeline
    ingest(local)
    report = local.runner.drain()
    # Then it was asked twice, the second time with twice the room, and no more
    limit = ExtractConfig().max_output_tokens
    assert [r["max_tokens"] for r in api.requests] == [limit, 2 * limit]
    # And the turn is a pending episode deferred as a truncated answer, nothing failed
    assert report.failed == {}
    (episode,) = episodes(local)
    assert episode["status"] == "pending"
    assert episode["deferred_reason"] == {"type": "DeferredModelFailed", "error": "max_tokens"}


def test_the_continuous_backfill_extracts_a_turn_deferred_for_want_of_budget(
    make_local: MakeLocal, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a turn deferred at once for want of budget (max_wait_s 0, the budget closed)
    local = make_local(backend="sqlite", config={"pipeline": {"model": {"max_wait_s": 0}}})
    api = ModelApi("extract_valid")
    install(local, api, tmp_path / "data", monkeypatch).throttled(
        "anthropic", "claude-haiku-4-5", 3_600.0
    )
    ingest(local)
    assert local.runner.drain().failed == {}
    (episode,) = episodes(local)
    assert episode["deferred_reason"]["type"] == "DeferredBudget"
    # When two hours later (the budget open again) the backfill worker's pass runs
    deps = backfill_handler.deps()
    monkeypatch.setattr(deps, "has_model", True)
    later = client(api, tmp_path / "data", at=T0 + 7_200)
    monkeypatch.setattr(deps.stage_deps("extract"), "llm", later)
    (result,) = local.runner.backfill_pending()
    # Then the episode was extracted into memories, on the backfill lane
    assert (result.extracted, result.remaining) == (1, 0)
    assert [e["status"] for e in episodes(local)] == ["extracted"]
    assert local.memories("dana") != []
