"""The batch lane (`pipeline.backfill.mode = batch`) through the real `anthropic` client: a fake
Message Batches API over httpx's MockTransport answers with the API's own JSON shapes (create ->
`in_progress`, retrieve -> `ended` with a `results_url`, the results as JSONL with `succeeded`,
`errored` and `expired` entries). Episodes kept during an outage go pending -> in_batch ->
extracted, ending as a run with the model up would; a batch applied twice changes nothing; an
expired or errored request puts its episode back to pending."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx2
import pytest

import functions.backfill.handler as backfill_handler
import functions.extract.handler as extract_handler
from memwrite.adapters.anthropic.batches import AnthropicMessageBatches
from memwrite.adapters.anthropic.extractor import AnthropicExtractorClient
from memwrite.backfill import BatchDeps, BatchRound, run_batch_round
from memwrite.backfill.batch import apply_batch
from memwrite.backfill.shard import UserShard, shard_of
from memwrite.config.settings import ExtractConfig
from memwrite.wiring import build_batch_deps
from memwrite_local.runtime.backend import LOCAL_TENANT
from memwrite_local.runtime.runner import LocalContext
from tests.integration.conftest import Local, MakeLocal
from tests.integration.test_episodes_outage import ANSWERS, ingest_all, memory_state
from tests.recorded_api import haiku_cost, recorded

BATCH_CONFIG = {"pipeline": {"backfill": {"mode": "batch"}}}
# custom_id -> the result entry the batch gives it; by default the next recorded answer.
Outcome = Callable[[int, str], dict[str, Any]]


def succeeded(index: int, custom_id: str) -> dict[str, Any]:
    return {"type": "succeeded", "message": recorded(ANSWERS[index])}


class LiveApi:
    """The Messages API: 529 while `down` (an outage), else the recorded answers in order;
    keeps every request body."""

    def __init__(self, *, down: bool) -> None:
        self.down = down
        self.answers = list(ANSWERS)
        self.bodies: list[dict[str, Any]] = []

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        self.bodies.append(json.loads(request.content))
        if self.down:
            return httpx2.Response(
                529, headers={"retry-after-ms": "1"}, json=recorded("error_overloaded")
            )
        return httpx2.Response(200, json=recorded(self.answers.pop(0)))

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        client = AnthropicExtractorClient(
            ExtractConfig(),
            api_key="test-key",
            base_url="http://testserver",
            http_client=httpx2.Client(transport=httpx2.MockTransport(self.handle)),
            max_retries=0,
        )
        _, deps = extract_handler.handler.deps()
        monkeypatch.setattr(deps, "llm", client)


class BatchesApi:
    """The Message Batches API as documented: a created batch is `in_progress` until `end()`,
    then `ended` with a `results_url` serving one JSONL line per request."""

    def __init__(self, outcome: Outcome = succeeded) -> None:
        self.outcome = outcome
        self.batches: dict[str, list[dict[str, Any]]] = {}  # id -> its requests
        self.ended: set[str] = set()
        self.calls: list[str] = []

    def end(self) -> None:
        self.ended.update(self.batches)

    def _batch(self, batch_id: str) -> dict[str, Any]:
        count = len(self.batches[batch_id])
        ended = batch_id in self.ended
        return {
            "id": batch_id,
            "type": "message_batch",
            "processing_status": "ended" if ended else "in_progress",
            "request_counts": {
                "processing": 0 if ended else count,
                "succeeded": count if ended else 0,
                "errored": 0,
                "canceled": 0,
                "expired": 0,
            },
            "created_at": "2026-11-27T18:00:00Z",
            "expires_at": "2026-11-28T18:00:00Z",
            "ended_at": "2026-11-27T18:30:00Z" if ended else None,
            "archived_at": None,
            "cancel_initiated_at": None,
            "results_url": (
                f"http://testserver/v1/messages/batches/{batch_id}/results" if ended else None
            ),
        }

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        path = request.url.path
        self.calls.append(f"{request.method} {path}")
        if request.method == "POST" and path == "/v1/messages/batches":
            batch_id = f"msgbatch_{len(self.batches) + 1:02d}"
            self.batches[batch_id] = json.loads(request.content)["requests"]
            return httpx2.Response(200, json=self._batch(batch_id))
        if path == "/v1/messages/batches":  # the listing, newest first, on one page
            listed = [self._batch(batch_id) for batch_id in reversed(self.batches)]
            ids = [batch["id"] for batch in listed]
            page = {"data": listed, "has_more": False, "first_id": ids[0], "last_id": ids[-1]}
            return httpx2.Response(200, json=page)
        batch_id = path.removeprefix("/v1/messages/batches/").removesuffix("/results")
        if path.endswith("/results"):
            lines = [
                json.dumps({"custom_id": r["custom_id"], "result": self.outcome(i, r["custom_id"])})
                for i, r in enumerate(self.batches[batch_id])
            ]
            return httpx2.Response(200, content="\n".join(lines).encode())
        return httpx2.Response(200, json=self._batch(batch_id))

    def lane(self) -> BatchDeps:
        lane = build_batch_deps()
        lane.backfill.has_model = True
        lane.batches = AnthropicMessageBatches(
            ExtractConfig(),
            price_factor=0.5,
            api_key="test-key",
            base_url="http://testserver",
            http_client=httpx2.Client(transport=httpx2.MockTransport(self.handle)),
            max_retries=0,
        )
        return lane


def outage(local: Local, monkeypatch: pytest.MonkeyPatch) -> LiveApi:
    """Dana's two requests arrive while the model answers 529: two pending episodes."""
    live = LiveApi(down=True)
    live.install(monkeypatch)
    ingest_all(local)
    return live


def round_of(lane: BatchDeps, local: Local) -> BatchRound:
    done = run_batch_round(lane.backfill.configs.for_request, lane)
    local.runner.drain()  # stage 7 indexes what it stored
    return done


def statuses(local: Local) -> list[tuple[str, str | None]]:
    listed = local.runner.call("GET", "/v1/users/dana/episodes").body["episodes"]
    return [(e["status"], e["batch_id"]) for e in listed]


def test_episodes_go_through_a_batch_and_end_as_with_the_model_up(
    make_local: MakeLocal, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the memories of a run with the model up (another user, the same words)
    local = make_local(backend="sqlite", config=BATCH_CONFIG)
    LiveApi(down=False).install(monkeypatch)
    ingest_all(local, "dana-up")
    expected = memory_state(local, "dana-up")
    # And dana's same turns kept as pending episodes through an outage
    live = outage(local, monkeypatch)
    api = BatchesApi()
    lane = api.lane()

    # When a round runs
    first = round_of(lane, local)

    # Then one batch is submitted holding exactly the requests the live extractor sent
    assert (len(first.submitted_batches), first.submitted_episodes) == (1, 2)
    [batch_id] = first.submitted_batches
    params = [request["params"] for request in api.batches[batch_id]]
    assert params == live.bodies
    assert first.episodes_in_batches == 2
    assert statuses(local) == [("in_batch", batch_id), ("in_batch", batch_id)]
    assert local.memories("dana") == []

    # When the next round finds the batch still in progress
    api.calls.clear()
    second = round_of(lane, local)
    # Then nothing is applied and nothing submitted again
    assert (second.applied_batches, second.submitted_batches) == ([], [])
    # And the open batches were polled with one listing, not a request each
    assert api.calls == ["GET /v1/messages/batches"]
    assert second.episodes_in_batches == 2

    # When the batch has ended and a round runs
    api.end()
    third = round_of(lane, local)

    # Then both episodes are extracted, as the run with the model up had them
    assert (third.applied_batches, third.extracted, third.returned_to_pending) == (
        [batch_id],
        2,
        0,
    )
    assert third.episodes_in_batches == 0
    assert memory_state(local, "dana") == expected
    assert statuses(local) == [("extracted", None), ("extracted", None)]
    # And the run has its trace, its model calls priced at half the list price
    [trace_id] = third.trace_ids
    trace = local.get_trace(trace_id).body
    assert trace["llm_calls"] == 2
    full_price = sum(haiku_cost(name) for name in ANSWERS)
    assert trace["cost_usd"] == pytest.approx(full_price / 2)

    # When the same batch's results are applied again
    again = BatchRound()
    apply_batch(batch_id, lane.backfill.configs.for_request, lane, again)
    local.runner.drain()
    # Then nothing changes
    assert (again.extracted, again.returned_to_pending) == (0, 0)
    assert memory_state(local, "dana") == expected
    assert statuses(local) == [("extracted", None), ("extracted", None)]
    # And a later round finds nothing to do
    last = round_of(lane, local)
    assert (last.applied_batches, last.submitted_batches) == ([], [])


def expired(index: int, custom_id: str) -> dict[str, Any]:
    return {"type": "expired"}


def first_errored(index: int, custom_id: str) -> dict[str, Any]:
    if index == 0:
        error = {"type": "invalid_request_error", "message": "prompt is too long"}
        return {"type": "errored", "error": {"type": "error", "error": error}}
    return succeeded(index, custom_id)


def test_an_expired_batch_puts_its_episodes_back_to_pending(
    make_local: MakeLocal, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given two episodes submitted in a batch whose requests all expire
    local = make_local(backend="sqlite", config=BATCH_CONFIG)
    outage(local, monkeypatch)
    api = BatchesApi(outcome=expired)
    lane = api.lane()
    [batch_id] = round_of(lane, local).submitted_batches

    # When the batch has ended and a round runs
    api.end()
    done = round_of(lane, local)

    # Then both episodes went back to pending, and the same round submitted them again
    assert (done.applied_batches, done.extracted, done.returned_to_pending) == ([batch_id], 0, 2)
    assert local.memories("dana") == []
    [again] = done.submitted_batches
    assert again != batch_id
    assert statuses(local) == [("in_batch", again), ("in_batch", again)]


def test_an_errored_request_puts_only_its_episode_back_to_pending(
    make_local: MakeLocal, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given two episodes in a batch whose first request errors and second succeeds
    local = make_local(backend="sqlite", config=BATCH_CONFIG)
    outage(local, monkeypatch)
    api = BatchesApi(outcome=first_errored)
    lane = api.lane()
    [batch_id] = round_of(lane, local).submitted_batches

    # When the batch has ended and its results are applied (no new submission)
    api.end()
    done = BatchRound()
    apply_batch(batch_id, lane.backfill.configs.for_request, lane, done)
    local.runner.drain()

    # Then the errored episode is pending again and the other extracted into its memory
    assert (done.extracted, done.returned_to_pending) == (1, 1)
    assert statuses(local) == [("pending", None), ("extracted", None)]
    assert [m.text for m in local.memories("dana") if "Porto" in m.text] != []
    assert lane.store.open_batches() == []


def test_the_scheduled_backfill_runs_a_round_of_the_batch_lane_in_batch_mode(
    make_local: MakeLocal, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given pending episodes, and a deployment whose backfill runs in batch mode
    local = make_local(backend="sqlite", config=BATCH_CONFIG)
    outage(local, monkeypatch)
    api = BatchesApi()
    lane = api.lane()
    monkeypatch.setattr(backfill_handler, "batch_deps", lambda: lane)

    # When the schedule invokes the backfill function, then again once the batch has ended
    first = backfill_handler.lambda_handler({}, LocalContext())
    api.end()
    second = backfill_handler.lambda_handler({}, LocalContext())
    local.runner.drain()

    # Then the first run submitted the episodes and the second applied them
    assert (first["submitted_episodes"], first["episodes_in_batches"]) == (2, 2)
    assert (second["applied_batches"], second["extracted"]) == (first["submitted_batches"], 2)
    assert statuses(local) == [("extracted", None), ("extracted", None)]


def _other_shard_user(user_id: str, count: int) -> str:
    """A user (after `user_id` in order) whose shard of `count` is not `user_id`'s."""
    mine = shard_of(LOCAL_TENANT, user_id, count)
    return next(
        other
        for other in (f"zed-{n}" for n in range(100))
        if shard_of(LOCAL_TENANT, other, count) != mine
    )


def test_two_workers_apply_a_batch_each_its_users_and_the_last_closes_it(
    make_local: MakeLocal, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the same turns of two users of different shards kept as pending episodes through
    # an outage, and submitted in one batch that has ended
    local = make_local(backend="sqlite", config=BATCH_CONFIG)
    other = _other_shard_user("dana", 2)
    LiveApi(down=True).install(monkeypatch)
    ingest_all(local, "dana")
    ingest_all(local, other)
    api = BatchesApi(outcome=lambda index, custom_id: succeeded(index % 2, custom_id))
    lane = api.lane()
    [batch_id] = round_of(lane, local).submitted_batches
    api.end()
    configs = lane.backfill.configs.for_request

    # When dana's worker applies its shard of the users
    dana_shard = UserShard(shard_of(LOCAL_TENANT, "dana", 2), 2)
    first = run_batch_round(configs, lane, shard=dana_shard, submit=False)

    # Then dana's episodes are extracted, the other user's stay in the batch, left open
    assert (first.extracted, first.applied_batches) == (2, [])
    assert statuses(local) == [("extracted", None), ("extracted", None)]
    assert lane.store.open_batches() == [batch_id]

    # When the other worker applies its shard
    other_shard = UserShard(shard_of(LOCAL_TENANT, other, 2), 2)
    second = run_batch_round(configs, lane, shard=other_shard, submit=False)
    local.runner.drain()

    # Then it closes the batch, and both users have the same memories
    assert (second.extracted, second.applied_batches) == (2, [batch_id])
    assert lane.store.open_batches() == []
    assert memory_state(local, other) == memory_state(local, "dana") != []


def test_a_shard_is_one_of_its_count() -> None:
    # Given the shards of two workers
    shards = [UserShard(index, 2) for index in range(2)]
    # Then every user is owned by exactly one of them
    for user in (f"user-{n}" for n in range(50)):
        assert sum(shard.owns(LOCAL_TENANT, user) for shard in shards) == 1
    # And a shard outside the count is refused
    with pytest.raises(ValueError, match="shard 2 of 2"):
        UserShard(2, 2)
