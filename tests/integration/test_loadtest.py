"""`memwrite loadtest`, a run of seconds: the report's fields, exactly, and no turn lost.

The sample conversations (`events/conversations/`) stand in for the evaluation data, as in a
fresh clone; the limits are half the demand (the smallest account: one request a minute) and the
model is out for five of the twenty simulated minutes, so the live lane waits for the budget and
defers; what it deferred goes through the Message Batches API (the batch lane). The same run
with its work spread over two worker processes (the batch lane's rounds in both, each of its
own users, the first done submitting) loses nothing either; and neither run reports fewer
turns in the queue at once than it held. A worker indexes the outbox only while no other
worker does.
"""

from __future__ import annotations

import io
import json
import multiprocessing
from collections.abc import Callable, Iterable
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from memwrite.adapters.sqlite.database import open_database
from memwrite_local.cli import main
from memwrite_local.loadtest import simulator
from memwrite_local.loadtest.probe import Probe
from memwrite_local.loadtest.report import Outcomes
from memwrite_local.loadtest.workers import WorkerFailed, sharing_runner, spawned
from memwrite_local.runtime.runner import DrainReport
from tests.integration.conftest import Local, MakeLocal

REPORT_FIELDS = {
    "turns_in",
    "turns_lost",
    "deferred_without_reason",
    "episodes_pending_at_end",
    "episodes_in_batches_at_end",
    "p50_turn_to_memory_s",
    "p99_turn_to_memory_s",
    "rate_limited_ratio",
    "fairness_ratio",
    "max_queue_depth",
    "model_calls_per_turn",
    "input_tokens_per_turn",
    "cached_input_share",
    "output_tokens_per_turn",
    "cost_per_million_turns_usd",
    "wall_s",
}


class _DepthProbe(Probe):
    """The simulator's probe, and a trigger that records the queue's depth after every insert:
    the most turns the queue held at once, exactly (an insert is the only way up, and writers
    take turns), whichever process inserted."""

    seen: list[int] = []  # noqa: RUF012 (the most each run's queue held, in run order)

    def __init__(self, data_dir: Path) -> None:
        super().__init__(data_dir)
        self._data_dir = data_dir
        with open_database(data_dir).transaction() as connection:
            connection.execute("CREATE TABLE depth_seen (depth INTEGER NOT NULL)")
            connection.execute(
                "CREATE TRIGGER depth_after_insert AFTER INSERT ON queue BEGIN "
                "INSERT INTO depth_seen SELECT count(*) FROM queue; END"
            )

    def outcomes(self, accepted: Iterable[str]) -> Outcomes:
        with open_database(self._data_dir).connection() as connection:
            (most,) = connection.execute("SELECT max(depth) FROM depth_seen").fetchone()
        self.seen.append(most or 0)
        return super().outcomes(accepted)


def _loadtest(*extra: str, tmp_path: Path) -> tuple[dict[str, Any], int]:
    """The run's report, and the most turns its queue held at once."""
    stdout = io.StringIO()
    arguments = [
        *("loadtest", "--turns-per-day", "7200", "--scale", "1", "--duration-minutes", "20"),
        *("--tenants", "3", "--burst-tenant-factor", "4", "--budget-fraction", "0.5"),
        *("--outage-minutes", "5", "--seed", "7", "--data", str(tmp_path / "no-data")),
        *("--backfill-mode", "batch"),
        *("--json", *extra),
    ]
    with pytest.MonkeyPatch.context() as patch, redirect_stdout(stdout):
        patch.setattr(simulator, "Probe", _DepthProbe)
        assert main(arguments) == 0
    report: dict[str, Any] = json.loads(stdout.getvalue())
    return report, _DepthProbe.seen[-1]


@pytest.fixture(scope="module")
def one_worker_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], int]:
    return _loadtest("--workers", "1", tmp_path=tmp_path_factory.mktemp("one"))


@pytest.fixture(scope="module")
def one_worker(one_worker_run: tuple[dict[str, Any], int]) -> dict[str, Any]:
    return one_worker_run[0]


def test_a_short_run_reports_every_field_and_loses_no_turn(one_worker: dict[str, Any]) -> None:
    # Given twenty simulated minutes of three tenants, limits at half the demand and an outage
    # When the load test runs through the real pipeline, in one process
    report = one_worker
    # Then the report has exactly the fields
    assert set(report) == REPORT_FIELDS
    assert set(report["cost_per_million_turns_usd"]) == {"live", "batch"}
    # And turns went in, the model was called, and none was lost or deferred without a reason
    assert report["turns_in"] > 0
    assert report["model_calls_per_turn"] > 0
    assert report["turns_lost"] == 0
    assert report["deferred_without_reason"] == 0
    # And the budget kept every call within the account's limits: the model refused none
    assert report["rate_limited_ratio"] == 0
    # And every episode went through a batch before the run ended
    assert report["episodes_pending_at_end"] == 0
    assert report["episodes_in_batches_at_end"] == 0
    # And the extraction prompt's prefix was read from the cache by most calls
    assert 0.5 < report["cached_input_share"] < 1


def test_two_workers_take_the_same_traffic_and_lose_nothing(
    one_worker: dict[str, Any], tmp_path: Path
) -> None:
    # Given the same run, its requests, drains and batch rounds spread over two worker
    # processes, the first one done with its round submitting what is pending
    report, most_queued = _loadtest("--workers", "2", tmp_path=tmp_path)
    # Then the same turns went in, and none was lost, deferred without a reason or left pending
    assert report["turns_in"] == one_worker["turns_in"] > 0
    assert report["turns_lost"] == 0
    assert report["deferred_without_reason"] == 0
    assert report["episodes_pending_at_end"] == 0
    assert report["episodes_in_batches_at_end"] == 0
    # And the budget, shared through the data dir, kept every call within the limits
    assert report["rate_limited_ratio"] == 0
    # And the queue's depth is not under-reported, though the workers drain while others ingest
    assert report["max_queue_depth"] >= most_queued > 0


def test_one_process_reports_the_queue_depth_it_held(
    one_worker_run: tuple[dict[str, Any], int],
) -> None:
    # Given the run in one process: each tick's requests all sent, then the queue drained
    report, most_queued = one_worker_run
    # Then the depth reported is the most turns the queue held at once, exactly
    assert report["max_queue_depth"] == most_queued > 0


def test_a_failing_worker_ends_the_run_with_its_traceback(tmp_path: Path) -> None:
    # Given a worker whose data dir cannot be created (a file is in the way)
    blocked = tmp_path / "state"
    blocked.write_text("not a directory", "utf-8")
    # When the coordinator points it there, the run fails at once, saying why
    with spawned(1) as workers, pytest.raises(WorkerFailed, match="FileExistsError"):
        workers.open(blocked, {}, {}, start=0.0)


def _search(local: Local, query: str) -> list[str]:
    body = {"user_id": "user-1", "query": query, "k": 5}
    answer = local.runner.call("POST", "/v1/search", body, api_key=local.api_key)
    assert answer.status == 200, answer.body
    return [result["text"] for result in answer.body["results"]]


def test_a_worker_indexes_the_outbox_only_while_no_other_worker_does(
    make_local: MakeLocal, make_body: Callable[..., dict[str, Any]]
) -> None:
    # Given a worker's runner on the embedded backend, and the outbox's lock held by another
    local = make_local(backend="sqlite")
    outbox = multiprocessing.get_context("spawn").Lock()
    runner = sharing_runner(outbox)
    assert local.post_turns(make_body("I live in Lisbon.")).status == 202
    outbox.acquire()
    # When it drains the queue
    runner.drain(deliver_webhooks=False)
    # Then the memory is stored but not indexed: the other worker takes the outbox's rows
    assert [memory.text for memory in local.memories("user-1")] == ["The user lives in Lisbon."]
    assert _search(local, "Where does the user live?") == []
    # And once the other worker lets go, its next try indexes them
    outbox.release()
    runner.index_outbox(DrainReport())
    assert _search(local, "Where does the user live?") == ["The user lives in Lisbon."]
