"""The load simulator's traffic follows the hour of the day it starts at (`--start-hour`)."""

from __future__ import annotations

import pytest

from memwrite_local.cli import main
from memwrite_local.loadtest.traffic import TrafficPlan, generate, load_scripts


def _requests(start_hour: float) -> int:
    scripts, _ = load_scripts(None)
    plan = TrafficPlan(
        turns_per_day=200_000,
        duration_s=2 * 3600,
        tenants=4,
        burst_factor=1.0,
        seed=3,
        start_hour=start_hour,
    )
    return len(generate(plan, scripts))


def test_the_afternoon_sends_about_three_times_the_night() -> None:
    # Given two hours of the same traffic, from 02:00 and from 14:00 (the rate is half its mean
    # at 03:00 and one and a half times it at 15:00)
    night, afternoon = _requests(2), _requests(14)
    # Then the afternoon has about three times the night's requests
    assert 2.5 < afternoon / night < 3.5


def test_a_start_hour_outside_the_day_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as refused:
        main(["loadtest", "--start-hour", "24"])
    assert refused.value.code == 2
    assert "--start-hour: must be from 0 to under 24, not 24" in capsys.readouterr().err
