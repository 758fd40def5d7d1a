"""`memwrite loadtest`, a run of seconds: the report's fields, exactly, and no turn lost.

The sample conversations (`events/conversations/`) stand in for the evaluation data, as in a
fresh clone; the limits are half the demand (the smallest account: one request a minute) and the
model is out for five of the twenty simulated minutes, so the live lane waits for the budget and
defers; what it deferred goes through the Message Batches API (the batch lane).
"""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

from memwrite_local.cli import main

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


def test_a_short_run_reports_every_field_and_loses_no_turn(tmp_path: Path) -> None:
    # Given twenty simulated minutes of three tenants, limits at half the demand and an outage
    # When the load test runs through the real pipeline
    report = _loadtest(tmp_path=tmp_path)
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
