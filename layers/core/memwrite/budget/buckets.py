"""The token-bucket arithmetic of the model budget, pure: values in, values out.

A bucket holds one minute of its limits (requests, input tokens, output tokens), or more when
its `capacity` is given deeper than its per-minute `rate`, refills continuously at the limit's
rate, and is split into shards that each hold an equal part. The
AIMD `factor` scales the limits: a 429/529 multiplies it down, time adds back to it. A call is
admitted when every dimension holds more than `floor` of the capacity plus the call's cost (a
call larger than what the floor leaves needs the shard full above the floor, then drives it
into debt: a large call is never refused forever).

A caller that must wait and will come back (a batch put back in the queue) takes a place in
the bucket's line (`queue_up`): it is told to come back when the line next frees, not merely
when the bucket will have room for one call, and moves the line on by the time the bucket
takes to refill one call. Without it every waiting caller is told the same moment, they all
come back together, one gets the room and the rest wait again: a thundering herd.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from memwrite.budget.ports import BucketRecord

__all__ = [
    "Levels",
    "Tuning",
    "admit_wait",
    "charge",
    "decrease",
    "queue_up",
    "refill",
    "refund",
]

Levels = tuple[float, float, float]  # requests, input tokens, output tokens


@dataclass(frozen=True)
class Tuning:
    """The AIMD constants (`ModelConfig.aimd_*`)."""

    decrease: float = 0.5
    min_factor: float = 0.05
    recovery_per_minute: float = 0.1
    cooldown_s: float = 5.0


def _capacity(capacity: Levels, factor: float) -> Levels:
    return (capacity[0] * factor, capacity[1] * factor, capacity[2] * factor)


def refill(
    record: BucketRecord,
    capacity: Levels,
    now: float,
    tuning: Tuning,
    *,
    rate: Levels | None = None,
) -> BucketRecord:
    """`record` as of `now`: its factor recovered additively, each level refilled at its
    (scaled) `rate` a minute (default: its capacity) up to its (scaled) capacity. A `now`
    before the record's time (a worker whose clock is behind the last writer's) refills
    nothing and leaves the record's time as it was: no second is refilled twice."""
    elapsed = max(0.0, now - record.updated_at)
    factor = min(1.0, record.factor + tuning.recovery_per_minute * elapsed / 60)
    scaled = _capacity(capacity, factor)
    rates = _capacity(rate or capacity, factor)
    levels = tuple(
        min(cap, level + per_minute * elapsed / 60)
        for level, cap, per_minute in zip(record.levels, scaled, rates, strict=True)
    )
    updated_at = max(record.updated_at, now)
    return replace(
        record, levels=(levels[0], levels[1], levels[2]), factor=factor, updated_at=updated_at
    )


def admit_wait(
    record: BucketRecord,
    capacity: Levels,
    cost: Levels,
    floor: float,
    now: float,
    *,
    rate: Levels | None = None,
) -> float:
    """0 when the refilled `record` admits `cost` above `floor` of its capacity, else the
    seconds until it would (`retry-after` included) at `rate` a minute (default: capacity)."""
    wait = max(0.0, record.blocked_until - now)
    for level, cap, per_minute, need in zip(
        record.levels,
        _capacity(capacity, record.factor),
        _capacity(rate or capacity, record.factor),
        cost,
        strict=True,
    ):
        if need <= 0:
            continue
        reserve = floor * cap
        required = reserve + min(need, cap - reserve)
        if level < required:
            rate_s = per_minute / 60
            wait = max(wait, (required - level) / rate_s if rate_s > 0 else math.inf)
    return wait


def queue_up(
    record: BucketRecord,
    cost: Levels,
    now: float,
    wait: float,
    within_s: float,
    *,
    rate: Levels,
) -> tuple[BucketRecord | None, float]:
    """A caller of `cost` told to wait `wait` s takes the next place in `record`'s line: it
    comes back at `max(now + wait, line_at)` and moves the line on by one call's refill at
    `rate` a minute (the slowest dimension's). A place more than `within_s` away is not taken
    (None, the wait: the caller comes back at its deadline, and holds no place others would
    wait behind)."""
    place = max(now + wait, record.line_at)
    if place - now > within_s:
        return None, place - now
    step = max(
        (
            need / (per_minute / 60)
            for need, per_minute in zip(cost, _capacity(rate, record.factor), strict=True)
            if need > 0 and per_minute > 0
        ),
        default=0.0,
    )
    return replace(record, line_at=place + step), place - now


def charge(record: BucketRecord, cost: Levels) -> BucketRecord:
    levels = tuple(level - spent for level, spent in zip(record.levels, cost, strict=True))
    return replace(record, levels=(levels[0], levels[1], levels[2]))


def refund(record: BucketRecord, capacity: Levels, back: Levels) -> BucketRecord:
    """Give back what a call was charged beyond its real usage (`back` may be negative when
    the call used more than its estimate), never beyond the capacity."""
    scaled = _capacity(capacity, record.factor)
    levels = tuple(
        min(cap, level + given)
        for level, cap, given in zip(record.levels, scaled, back, strict=True)
    )
    return replace(record, levels=(levels[0], levels[1], levels[2]))


def decrease(
    record: BucketRecord,
    capacity: Levels,
    now: float,
    retry_after_s: float,
    tuning: Tuning,
    *,
    overloaded: bool = False,
) -> BucketRecord:
    """A 429/529: the factor multiplied down (once per cooldown: every worker that saw the
    same throttle reports it), the levels cut to the new capacity, and no call admitted
    before `retry_after_s` has passed. An `overloaded` answer (529: the provider's capacity,
    not the account's limits) takes the factor down to `tuning.decrease` at most: each try
    through an outage is answered 529, and compounding them to `min_factor` would hold the
    budget far under the limits for minutes after the outage ends."""
    blocked = max(record.blocked_until, now + retry_after_s)
    if now - record.decreased_at < tuning.cooldown_s:
        return replace(record, blocked_until=blocked)
    factor = max(tuning.min_factor, record.factor * tuning.decrease)
    if overloaded:
        factor = min(record.factor, max(factor, tuning.decrease))
    scaled = _capacity(capacity, factor)
    levels = tuple(min(level, cap) for level, cap in zip(record.levels, scaled, strict=True))
    return replace(
        record,
        levels=(levels[0], levels[1], levels[2]),
        factor=factor,
        blocked_until=blocked,
        decreased_at=now,
    )
