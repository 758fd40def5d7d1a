"""The usage meter's arithmetic and its scope (`memwrite.metering`): which hours a range
counts, what a bad bound answers, and that one tenant's unit of work adds what it used (model
calls from their usage, embeddings, turns) to its hour once, however it ends."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from memwrite.adapters.in_memory import CountingMetrics
from memwrite.costs.usage import LlmUsage, metered, report_usage
from memwrite.embedder import HashingEmbedder
from memwrite.errors import InvalidQuery, StoreUnavailable
from memwrite.metering import (
    MeteredEmbedder,
    Metering,
    UsageCounts,
    count_usage,
    metering_for,
    usage_window,
)
from memwrite.models import FailedTurn, IngestResponse

NOW = datetime(2026, 11, 27, 21, 40, tzinfo=UTC)
CALL = LlmUsage(
    model="claude-haiku-4-5",
    input_tokens=600,
    output_tokens=250,
    cost_usd=0.0018,
    cache_read_input_tokens=4096,
)


class Meter:
    """A `UsageMeter` in a dict, by (tenant, hour)."""

    def __init__(self, *, failing: bool = False) -> None:
        self.hours: dict[tuple[str, datetime], UsageCounts] = {}
        self.failing = failing

    def add(self, tenant: str, hour: datetime, counts: UsageCounts) -> None:
        if self.failing:
            raise StoreUnavailable("DynamoDB UpdateItem failed: InternalServerError")
        key = (tenant, hour.replace(minute=0, second=0, microsecond=0))
        self.hours[key] = self.hours.get(key, UsageCounts()) + counts

    def read(self, tenant: str, start: datetime, end: datetime) -> UsageCounts:
        total = UsageCounts()
        for (owner, hour), counts in self.hours.items():
            if owner == tenant and start <= hour < end:
                total += counts
        return total


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.mark.parametrize(
    ("since", "until", "window"),
    [
        # Absent: the current month's first hour through the current hour
        (None, None, ("2026-11-01T00:00", "2026-11-27T22:00")),
        # Dates: whole days, `to` included
        ("2026-11-02", "2026-11-03", ("2026-11-02T00:00", "2026-11-04T00:00")),
        # Times: the hours they fall in (naive: UTC; an offset is moved to UTC)
        ("2026-11-27T09:15", "2026-11-27T10:05Z", ("2026-11-27T09:00", "2026-11-27T11:00")),
        ("2026-11-27T11:30+02:00", None, ("2026-11-27T09:00", "2026-11-27T22:00")),
        ("", "", ("2026-11-01T00:00", "2026-11-27T22:00")),
    ],
)
def test_a_range_counts_whole_utc_hours(
    since: str | None, until: str | None, window: tuple[str, str]
) -> None:
    # When a range is asked for
    start, end = usage_window(since, until, NOW)
    # Then the hours counted are these, `to` exclusive
    assert (start, end) == (at(window[0]), at(window[1]))


@pytest.mark.parametrize(
    ("since", "until", "field"),
    [
        ("yesterday", None, "from"),
        (None, "2026-13-01", "to"),
        ("2026-11-27", "2026-11-26", "from"),  # from after to
        ("2026-11-27T10:30", "2026-11-27T10:10", "from"),  # within one hour, still after
        (None, "2026-10-15", "from"),  # the default from (this month) after to
        ("2024-01-01", None, "from"),  # over a year
        (None, "9999-12-31T23:30", "to"),  # past the calendar's end
    ],
)
def test_a_bad_bound_names_its_field(since: str | None, until: str | None, field: str) -> None:
    # When a bound is no ISO 8601 date or time, or the range is backwards or too long
    with pytest.raises(InvalidQuery) as refused:
        usage_window(since, until, NOW)
    # Then the refusal names the field at fault
    assert refused.value.field == field


def test_an_intake_counts_each_turn_once_and_kept_as_accepted() -> None:
    # Given an answer with a re-sent turn (accepted before) and one that could not be queued
    answer = IngestResponse(
        trace_id="t",
        accepted=2,
        skipped=[],
        turn_ids=["a", "b", "c", "c", "dup", "failed"],
        duplicates=["dup"],
        failed=[FailedTurn(turn_id="failed", error="throttled", retry_after_secs=2)],
    )
    # Then the turns in are the request's distinct new turns, kept the ones it queued
    assert UsageCounts.of_intake(answer) == UsageCounts(turns_in=3, turns_kept=2)


def test_a_unit_of_work_adds_its_calls_embeddings_and_turns_to_its_hour_once() -> None:
    # Given a tenant's unit of work that reports a call inside a stage's own meter, embeds
    # three texts and counts its turns
    meter, metrics = Meter(), CountingMetrics()
    metering = Metering(meter, metrics, clock=NOW.timestamp)
    embedder = MeteredEmbedder(HashingEmbedder())
    with metering_for("acme", metering):
        with metered() as stage_calls:
            report_usage(CALL)
        report_usage(CALL)
        vectors = embedder.embed(["a", "b", "c"])
        count_usage(UsageCounts(turns_in=4, turns_kept=1))
    # Then the stage's own meter saw its call, and the tenant's hour all of it
    assert stage_calls == [CALL]
    assert vectors.shape == (3, embedder.dimension)
    hour = NOW.replace(minute=0)
    assert meter.hours == {
        ("acme", hour): UsageCounts(
            turns_in=4,
            turns_kept=1,
            model_calls=2,
            input_tokens=1200,
            cache_read_input_tokens=8192,
            output_tokens=500,
            embeddings=3,
            cost_usd=0.0036,
        )
    }
    # And the $ per tenant metric has the cost
    assert metrics.tenant_costs == {"acme": pytest.approx(0.0036)}


def test_a_failed_unit_of_work_still_meters_what_it_paid_for() -> None:
    # Given a unit of work whose stage fails after a paid call
    meter = Meter()
    metering = Metering(meter, CountingMetrics(), clock=NOW.timestamp)
    with pytest.raises(StoreUnavailable), metering_for("acme", metering):
        report_usage(CALL)
        raise StoreUnavailable("the store went away")
    # Then the call is on the tenant's hour all the same
    (counts,) = meter.hours.values()
    assert counts.model_calls == 1


def test_outside_a_unit_of_work_nothing_is_metered_and_a_meter_fault_is_not_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given calls and embeddings outside any tenant's unit of work
    report_usage(CALL)
    count_usage(UsageCounts(turns_in=1))
    MeteredEmbedder(HashingEmbedder()).embed(["x"])
    # And a unit of work whose meter's store fails
    metrics = CountingMetrics()
    with metering_for("acme", Metering(Meter(failing=True), metrics, clock=NOW.timestamp)):
        report_usage(CALL)
    # Then the work is not failed: the fault is logged and counted
    assert metrics.events[("usage", "usage.unmetered")] == 1
    assert "usage of tenant acme not metered" in caplog.text


def test_counts_add_exactly_to_the_eighth_decimal() -> None:
    # Given many small costs
    parts: list[Any] = [UsageCounts(model_calls=1, cost_usd=0.00000123)] * 1000
    total = sum(parts, UsageCounts())
    # Then the sum is exact at the meter's precision
    assert total.model_calls == 1000
    assert total.cost_usd == pytest.approx(0.00123, abs=1e-12)
