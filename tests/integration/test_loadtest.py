"""`memwrite loadtest`, a run of seconds: the report's fields, exactly, and no turn lost.

The sample conversations (`events/conversations/`) stand in for the evaluation data, as in a
fresh clone; the limits are half the demand (the smallest account: one request a minute) and the
model is out for five of the twenty simulated minutes, so the live lane waits for the budget and
defers; what it deferred goes through the Message Batches API (the batch lane). The same run
with its work spread over two worker processes loses nothing either.
"""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from memwrite_local.cli import main
from memwrite_local.loadtest.workers import WorkerFailed, spawned

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


def _loadtest(*extra: str, tmp_path: Path) -> dict[str, Any]:
    stdout = io.StringIO()
    arguments = [
        *("loadtest", "--turns-per-day", "7200", "--scale", "1", "--duration-minutes", "20"),
        *("--tenants", "3", "--burst-tenant-factor", "4", "--budget-fraction", "0.5"),
        *("--outage-minutes", "5", "--seed", "7", "--data", str(tmp_path / "no-data")),
        *("--backfill-mode", "batch"),
        *("--json", *extra),
    ]
    with redirect_stdout(stdout):
        assert main(arguments) == 0
    report: dict[str, Any] = json.loads(stdout.getvalue())
    return report


@pytest.fixture(scope="module")
def one_worker(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _loadtest("--workers", "1", tmp_path=tmp_path_factory.mktemp("one"))


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
    # Given the same run, its requests and drains spread over two worker processes
    report = _loadtest("--workers", "2", tmp_path=tmp_path)
    # Then the same turns went in, and none was lost, deferred without a reason or left pending
    assert report["turns_in"] == one_worker["turns_in"] > 0
    assert report["turns_lost"] == 0
    assert report["deferred_without_reason"] == 0
    assert report["episodes_pending_at_end"] == 0
    assert report["episodes_in_batches_at_end"] == 0
    # And the budget, shared through the data dir, kept every call within the limits
    assert report["rate_limited_ratio"] == 0


def test_a_failing_worker_ends_the_run_with_its_traceback(tmp_path: Path) -> None:
    # Given a worker whose data dir cannot be created (a file is in the way)
    blocked = tmp_path / "state"
    blocked.write_text("not a directory", "utf-8")
    # When the coordinator points it there, the run fails at once, saying why
    with spawned(1) as workers, pytest.raises(WorkerFailed, match="FileExistsError"):
        workers.open(blocked, {}, {}, start=0.0)
