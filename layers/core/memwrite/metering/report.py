"""`GET /v1/usage`: the caller's tenant's usage over a range of whole UTC hours."""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, date, datetime, timedelta

from pydantic import BaseModel, ConfigDict, Field

from memwrite.errors import ConfigError, InvalidQuery
from memwrite.metering.counts import hour_of
from memwrite.metering.ports import UsageMeter

__all__ = ["MAX_RANGE_DAYS", "UsageReport", "usage_report", "usage_window"]

# One report reads at most this many days of hourly counters (one query, a few pages).
MAX_RANGE_DAYS = 366
_HOUR = timedelta(hours=1)


class UsageReport(BaseModel):
    """What the tenant used in [from, to): whole UTC hours, each counted once."""

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)

    tenant: str
    from_: datetime = Field(alias="from", description="The first hour counted (UTC).")
    to: datetime = Field(description="The end of the last hour counted (UTC), exclusive.")
    turns_in: int = Field(
        description="Turns posted to `POST /v1/turns`, less re-sends of turns accepted before "
        "(a retry under the same Idempotency-Key included): a queued turn counts once, a "
        "skipped turn sent again is screened, and counted, again."
    )
    turns_kept: int = Field(
        description="Of them, the turns the pre-filter kept and queued for extraction (the "
        "sum of the answers' `accepted`)."
    )
    model_calls: int = Field(
        description="Model calls answered (extraction, verifier, judges, HyPE questions, "
        "backfill, replays), a malformed or retried one included."
    )
    input_tokens: int = Field(description="Uncached input tokens, as the provider metered.")
    cache_read_input_tokens: int = Field(description="Input tokens read from the prompt cache.")
    cache_creation_input_tokens: int = Field(
        description="Input tokens written to the prompt cache."
    )
    output_tokens: int
    embeddings: int = Field(
        description="Texts embedded by the search index's embedder (memories, their "
        "questions, episodes, search queries)."
    )
    cost_usd: float = Field(
        description="The model calls' cost at the deployment's prices "
        "(`extract.prices_per_mtok`), from the provider's token counts."
    )


def _parse(name: str, value: str | None) -> datetime | date | None:
    if value is None or value == "":
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        pass  # a time, then
    try:
        return datetime.fromisoformat(value)
    except ValueError as exc:
        raise InvalidQuery(name, "an ISO 8601 date or time: 2026-11-01, 2026-11-27T09:00Z") from exc


def _instant(value: date | datetime) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return datetime(value.year, value.month, value.day, tzinfo=UTC)


def usage_window(
    from_text: str | None, to_text: str | None, now: datetime
) -> tuple[datetime, datetime]:
    """[start, end) in whole UTC hours: from the hour `from` falls in (a date: its first
    hour; absent: the first hour of the current month) through the hour `to` falls in (a
    date: its whole day; absent: the current hour). `InvalidQuery` naming the field for a
    value that is no ISO 8601 date or time, for `from` after `to`, or for a range over
    `MAX_RANGE_DAYS`."""
    since, until = _parse("from", from_text), _parse("to", to_text)
    try:
        start = hour_of(now.replace(day=1, hour=0) if since is None else _instant(since))
    except OverflowError as exc:  # a time at the edge of the calendar, moved to UTC
        raise InvalidQuery("from", "out of range") from exc
    try:
        if until is None:
            end = hour_of(now) + _HOUR
        elif isinstance(until, datetime):
            end = hour_of(_instant(until)) + _HOUR
        else:
            end = _instant(until) + timedelta(days=1)
    except OverflowError as exc:
        raise InvalidQuery("to", "out of range") from exc
    if start >= end or (
        since is not None and until is not None and _instant(since) > _instant(until)
    ):
        raise InvalidQuery("from", "must not be after `to` (absent: now)")
    if end - start > timedelta(days=MAX_RANGE_DAYS):
        raise InvalidQuery("from", f"a range of at most {MAX_RANGE_DAYS} days")
    return start, end


def usage_report(
    tenant: str,
    from_text: str | None,
    to_text: str | None,
    meter: UsageMeter | None,
    now: datetime,
) -> UsageReport:
    """The tenant's usage over the window `from` and `to` name (`usage_window`)."""
    start, end = usage_window(from_text, to_text, now)
    if meter is None:
        raise ConfigError("usage is not metered here: USAGE_TABLE is not set")
    counts = meter.read(tenant, start, end)
    return UsageReport(tenant=tenant, from_=start, to=end, **asdict(counts))
