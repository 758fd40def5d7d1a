"""What one tenant used: the counters the usage meter adds up, by the UTC hour.

Each unit of work (an API request, a pipeline stage's batch, one memory's indexing, a
backfill's batch) adds its counts once, to the hour it ended in (`memwrite.metering.meter`);
`GET /v1/usage` sums the hours of a range.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import UTC, datetime

from memwrite.costs.usage import LlmUsage
from memwrite.models import IngestResponse

__all__ = ["COUNTERS", "UsageCounts", "hour_key", "hour_of"]

# Eight decimals of a dollar: what spans keep of a cost, and what the counters add.
_COST_DIGITS = 8


@dataclass(frozen=True)
class UsageCounts:
    """A tenant's usage over some time (docs/reference/api.md, `GET /v1/usage`)."""

    turns_in: int = 0  # turns posted, less re-sends of turns accepted (queued) before
    turns_kept: int = 0  # of them, those the pre-filter kept and queued (the answer's `accepted`)
    model_calls: int = 0  # every answered model call, usable or not
    input_tokens: int = 0  # uncached input, as the provider's `usage.input_tokens`
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    output_tokens: int = 0
    embeddings: int = 0  # texts embedded by the search index's embedder
    cost_usd: float = 0.0  # the model calls' cost at the configured prices

    def __add__(self, other: UsageCounts) -> UsageCounts:
        summed = {
            name: getattr(self, name) + getattr(other, name)
            for name in COUNTERS
            if name != "cost_usd"
        }
        return UsageCounts(**summed, cost_usd=round(self.cost_usd + other.cost_usd, _COST_DIGITS))

    @property
    def empty(self) -> bool:
        return self == _NOTHING

    def values(self) -> tuple[int | float, ...]:
        """The counters in `COUNTERS` order (`dataclasses.astuple` deep-copies each)."""
        return tuple(getattr(self, name) for name in COUNTERS)

    @classmethod
    def of_calls(cls, calls: Sequence[LlmUsage]) -> UsageCounts:
        """The model calls' counts, from their usage fields (what the provider metered)."""
        return cls(
            model_calls=len(calls),
            input_tokens=sum(call.input_tokens for call in calls),
            cache_read_input_tokens=sum(call.cache_read_input_tokens for call in calls),
            cache_creation_input_tokens=sum(call.cache_creation_input_tokens for call in calls),
            output_tokens=sum(call.output_tokens for call in calls),
            cost_usd=round(sum(call.cost_usd for call in calls), _COST_DIGITS),
        )

    @classmethod
    def of_intake(cls, response: IngestResponse) -> UsageCounts:
        """A `POST /v1/turns` answer's turns: each turn of the request once, less those
        accepted before (`duplicates`: a re-send, or a retry under the same Idempotency-Key)
        and those that could not be queued (`failed`: the client sends them again); a skipped
        turn sent again is screened, and counted, again. Kept: the turns it queued
        (`accepted`)."""
        again = {*response.duplicates, *(failed.turn_id for failed in response.failed)}
        return cls(turns_in=len(set(response.turn_ids) - again), turns_kept=response.accepted)


COUNTERS = tuple(field.name for field in fields(UsageCounts))
_NOTHING = UsageCounts()


def hour_of(at: datetime) -> datetime:
    """The start of the UTC hour `at` falls in (naive: UTC)."""
    aware = at if at.tzinfo is not None else at.replace(tzinfo=UTC)
    return aware.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def hour_key(at: datetime) -> str:
    """The stored key of the hour `at` falls in: `2026-11-27T21`, so string order is time
    order."""
    hour = hour_of(at)
    return f"{hour.year:04d}-{hour.month:02d}-{hour.day:02d}T{hour.hour:02d}"  # strftime's cost
