"""Trailing time phrases: "I moved to Berlin last week" is a move, and "last week" says when.

A claim of change (moved, relocated, switched to, went vegan, quit) may end on a time phrase:
"yesterday", "last week", "in March", "two years ago", "back in 2019". The rules read it (the
turn is still fully covered) and, where the phrase names a day, week, month or year, resolve it
against the turn's own timestamp. A fact has no valid-from of its own in the data model
(`valid_at` is an event's: docs/design.md §9), and supersession orders facts by when they were
said (`observed_at`: docs/design.md §5): so the resolved time is written into the memory's text
("The user lives in Berlin (since the week of 2026-03-02).") where search finds it, and nothing
else moves.
A phrase that cannot be pinned down ("a few years ago", "recently") is read and left out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Final

__all__ = ["CHANGE_VERB_RE", "TIME_STOPS", "TRAILING_TIME_RE", "resolve_time"]

_MONTHS: Final = (
    "january", "february", "march", "april", "may", "june", "july", "august", "september",
    "october", "november", "december",
)  # fmt: skip
_MONTH_NUMBERS: Final = {m[:3]: i + 1 for i, m in enumerate(_MONTHS)}
_WEEKDAYS: Final = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_NUMBERS: Final = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
}  # fmt: skip
_VAGUE_COUNTS = r"a\s+few|a\s+couple(?:\s+of)?|couple\s+of|several|some|many"
_UNITS = r"days?|weeks?|months?|years?"
_MONTH = r"jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?" + (
    r"|sept?(?:ember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?"
)
_COUNT = r"\d{1,2}|" + "|".join(_NUMBERS)

# A phrase of time as it opens: the stop that ends a place or thing before it ("Berlin last
# week", "Linear two months ago"), so the value never swallows it.
TIME_STOPS = (
    rf"yesterday|last\s+(?:week|month|year|weekend|summer|winter|spring|fall|autumn"
    rf"|{'|'.join(_WEEKDAYS)}|{_MONTH})|(?:{_COUNT}|{_VAGUE_COUNTS})\s+(?:{_UNITS})\s+ago"
    rf"|(?:back\s+)?in\s+(?:{_MONTH}|\d{{4}})|earlier\s+this|this\s+past"
)

# The whole rest of a clause after its claim, when it is one time phrase (and filler).
TRAILING_TIME_RE = re.compile(
    rf"""[\s,]*(?:(?i:just|only|about|around|roughly|almost|nearly)\s+)?(?P<phrase>(?i:
      the\s+day\s+before\s+yesterday|yesterday
    | last\s+(?P<last>week|month|year|weekend|summer|winter|spring|fall|autumn
        |{"|".join(_WEEKDAYS)}|{_MONTH})
    | (?:this\s+past|earlier\s+this)\s+(?P<this>week|month|year)
    | (?:(?P<count>{_COUNT})|{_VAGUE_COUNTS})\s+(?P<unit>{_UNITS})\s+ago
    | (?:back\s+)?in\s+(?:(?P<month>{_MONTH})(?:\s+(?P<month_year>\d{{4}}))?|(?P<year>\d{{4}}))
    ))[\s.!,]*""",
    re.VERBOSE,
)

# A claim that tells of a change: only then does a time phrase say when it began.
CHANGE_VERB_RE = re.compile(
    r"(?i:\b(?:moved|relocated|switched|went|gone|became|become|quit|left|stopped)\b)"
)


@dataclass(frozen=True)
class _Span:
    """A resolved time: its first day and how precisely it is known."""

    start: date
    grain: str  # day | week | month | year


def resolve_time(phrase: str, observed_at: datetime | None) -> str | None:
    """The time a trailing phrase names, worded for a memory's text ("the week of 2026-03-02",
    "March 2026", "2024", "2026-03-08"); None when it cannot be pinned down (a vague count,
    "last summer", no timestamp)."""
    m = TRAILING_TIME_RE.fullmatch(phrase)
    if m is None or observed_at is None:
        return None
    span = _span(m, observed_at.date())
    if span is None:
        return None
    if span.grain == "day":
        return span.start.isoformat()
    if span.grain == "week":
        return f"the week of {span.start.isoformat()}"
    if span.grain == "month":
        return f"{_MONTHS[span.start.month - 1].capitalize()} {span.start.year}"
    return str(span.start.year)


def _span(m: re.Match[str], today: date) -> _Span | None:
    phrase = m.group("phrase").lower()
    if phrase.startswith("the day before"):
        return _Span(today - timedelta(days=2), "day")
    if phrase == "yesterday":
        return _Span(today - timedelta(days=1), "day")
    if last := m.group("last"):
        return _last(last.lower(), today)
    if this := m.group("this"):
        return _Span(_start_of(this.lower(), today), this.lower())
    if unit := m.group("unit"):
        count = m.group("count")
        if count is None:
            return None  # "a few years ago": not a time to write down
        n = int(count) if count.isdigit() else _NUMBERS[count.lower()]
        return _ago(n, unit.lower().rstrip("s"), today)
    if year := m.group("year"):
        return _Span(date(int(year), 1, 1), "year")
    month = _MONTH_NUMBERS[m.group("month").lower()[:3]]
    if m.group("month_year"):
        return _Span(date(int(m.group("month_year")), month, 1), "month")
    # "I moved in March": the last March that has begun (this year's, or last year's).
    year = today.year if month <= today.month else today.year - 1
    return _Span(date(year, month, 1), "month")


def _last(what: str, today: date) -> _Span | None:
    if what in {"week", "weekend"}:
        return _Span(_start_of("week", today) - timedelta(weeks=1), "week")
    if what == "month":
        return _Span(_months_before(_start_of("month", today), 1), "month")
    if what == "year":
        return _Span(date(today.year - 1, 1, 1), "year")
    if what in _WEEKDAYS:
        back = (today.weekday() - _WEEKDAYS.index(what) - 1) % 7 + 1
        return _Span(today - timedelta(days=back), "day")
    month = _MONTH_NUMBERS.get(what[:3])
    if month is None:
        return None  # "last summer": which months depends on the hemisphere
    year = today.year if month < today.month else today.year - 1
    return _Span(date(year, month, 1), "month")


def _ago(n: int, unit: str, today: date) -> _Span:
    if unit == "day":
        return _Span(today - timedelta(days=n), "day")
    if unit == "week":
        return _Span(_start_of("week", today) - timedelta(weeks=n), "week")
    if unit == "month":
        return _Span(_months_before(_start_of("month", today), n), "month")
    return _Span(date(today.year - n, 1, 1), "year")


def _start_of(grain: str, today: date) -> date:
    if grain == "week":
        return today - timedelta(days=today.weekday())
    if grain == "month":
        return today.replace(day=1)
    return date(today.year, 1, 1)


def _months_before(first: date, n: int) -> date:
    months = first.year * 12 + first.month - 1 - n
    return date(months // 12, months % 12 + 1, 1)
