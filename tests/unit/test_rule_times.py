"""Trailing time phrases: read as when a change began, never a reason to defer the turn."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memwrite.extract.rules import extract_with_rules

# A Monday: "last week" is the week of Monday 2026-03-02.
SAID_AT = datetime(2026, 3, 9, 9, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "value", "since"),
    [
        ("I moved to Berlin last week.", "Berlin", "the week of 2026-03-02"),
        ("I moved to Berlin yesterday.", "Berlin", "2026-03-08"),
        ("I moved to Berlin two years ago.", "Berlin", "2024"),
        ("I moved to Berlin in March.", "Berlin", "March 2026"),
        ("I moved to Berlin in October.", "Berlin", "October 2025"),  # the last October
        ("we relocated to Lisbon back in 2019", "Lisbon", "2019"),
        ("I moved to Austin, Texas 3 months ago", "Austin, Texas", "December 2025"),
        ("I moved to Porto last Friday!", "Porto", "2026-03-06"),
        ("I switched to Linear last month.", "Linear", "February 2026"),
        ("I went vegan last year.", "vegan", "2025"),
    ],
)
def test_a_change_with_a_trailing_time_is_read_and_dated(text: str, value: str, since: str) -> None:
    # Given a claim of change that ends on a time phrase, said on a known day
    # When the rules read it
    result = extract_with_rules(text, observed_at=SAID_AT)
    # Then the turn is fully covered (no deferral), the value stops before the time phrase
    assert result.fully_covered
    (candidate,) = result.candidates
    assert candidate.value == value
    # And the resolved time is in the memory's text, not an event's valid_at
    assert candidate.text.endswith(f"(since {since}).")
    assert candidate.valid_at is None


def test_a_move_from_one_city_to_another_dates_both_claims() -> None:
    # Given a move from one city to another, last month
    result = extract_with_rules("I moved from Paris to Berlin last month.", observed_at=SAID_AT)
    # When / Then both claims are read, each with the month it happened
    assert result.fully_covered
    assert {(c.value, c.negated, c.text) for c in result.candidates} == {
        ("Berlin", False, "The user lives in Berlin (since February 2026)."),
        ("Paris", True, "The user no longer lives in Paris (since February 2026)."),
    }


@pytest.mark.parametrize(
    "text", ["I moved to Berlin a few years ago.", "I moved to Berlin last summer."]
)
def test_a_time_that_cannot_be_pinned_down_is_read_but_not_written(text: str) -> None:
    # Given a vague time ("a few", a season that depends on the hemisphere)
    result = extract_with_rules(text, observed_at=SAID_AT)
    # When / Then the move is stored, with no invented date
    assert result.fully_covered
    assert [c.text for c in result.candidates] == ["The user lives in Berlin."]


def test_without_a_timestamp_the_time_is_left_out() -> None:
    # Given a move with a time phrase but no turn timestamp
    result = extract_with_rules("I moved to Berlin last week.")
    # When / Then it is read, undated
    assert result.fully_covered
    assert [c.text for c in result.candidates] == ["The user lives in Berlin."]


@pytest.mark.parametrize(
    "text",
    [
        "I live in Berlin last week.",  # not a change: what does the time say?
        "I moved to Berlin last week with my wife.",  # more than a time after the claim
        "I love the sushi place we found last week.",
        "If I moved to Berlin last year, I'd be fluent by now.",
    ],
)
def test_a_time_phrase_after_anything_else_is_not_read_as_the_claims_time(text: str) -> None:
    # Given a time phrase that does not end a plain claim of change
    result = extract_with_rules(text, observed_at=SAID_AT)
    # When / Then no memory says "since", and a turn with words left unread is not covered
    assert all("(since" not in c.text for c in result.candidates)
    if not text.startswith("If"):
        assert not result.fully_covered
