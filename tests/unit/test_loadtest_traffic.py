"""The load simulator's traffic: the turns a day asks for (`--turns-per-day`), at the rate of the
hour of the day it starts at (`--start-hour`)."""

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


def test_a_day_carries_the_turns_asked_for_whatever_the_scripts_visit_sizes() -> None:
    # Given two scripts users pick evenly: one of many short visits, one of a single long one
    # (the mean over all visits is near the short script's size, far from a request's mean)
    short_visits = [[("user", f"hi {n}"), ("assistant", "hello")] for n in range(60)]
    one_long_visit = [[("user", f"line {n}") for n in range(10)]]
    plan = TrafficPlan(turns_per_day=20_000, duration_s=86_400, tenants=4, burst_factor=1.0, seed=5)
    # When a day of traffic is generated
    turns = sum(len(request.turns) for request in generate(plan, [short_visits, one_long_visit]))
    # Then it carries the turns per day asked for (Poisson arrivals: within a few percent)
    assert 19_000 < turns < 21_000


def test_a_start_hour_outside_the_day_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as refused:
        main(["loadtest", "--start-hour", "24"])
    assert refused.value.code == 2
    assert "--start-hour: must be from 0 to under 24, not 24" in capsys.readouterr().err
