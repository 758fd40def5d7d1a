"""The model budget: every model call charged to shared token buckets before it is sent.

Two buckets per call, each split into shards (`ModelConfig.shards`) so no one stored item
takes every write: the model's, holding the account's limits for (provider, model), and the
tenant's, holding its weighted fair share (`weight * tenant_share` of the model's limits, or
its own limits). A live call within its tenant's share is charged to both and may empty the
model's bucket; a call past its share borrows from the model's bucket only while it holds more
than `borrow_floor` of its capacity, so one tenant's burst takes only what others leave. A
backfill call takes only capacity above `backfill_floor` (the reserve kept for live calls).
Each bucket refills at its limits' rate, but a tenant's holds at least one call's cost and
the model's at least two calls' tokens (`_MODEL_DEPTH_CALLS`): a share smaller than a call
would otherwise hold its tenant to one call per refill even while nobody else calls, and a
model limit near one call's `max_tokens` would admit one call at a time, the next waiting for
the last one's reservation to come back (the load simulator's scaled-down account,
docs/loadtest.md). That depth is the bucket's, not each shard's: the shards together hold what
one bucket would, so they never admit more than the account's own bucket does; and the model's
bucket holds one request at least, as the provider's does, never two above its limit.

A call is charged its estimated input tokens and its max_tokens when it starts (as the
providers charge) and refunded to its real usage when it ends (`settle`). A 429/529 lowers the
model's limits multiplicatively (a 529, the provider overloaded, to half at most) and blocks it
for the provider's `retry-after` (`throttled`); time restores them additively (AIMD). See
docs/budget.md.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from enum import StrEnum

from memwrite.budget.buckets import (
    Levels,
    Tuning,
    admit_wait,
    charge,
    decrease,
    queue_up,
    refill,
    refund,
)
from memwrite.budget.ports import BucketRecord, BudgetStore
from memwrite.config.model_limits import ModelConfig, ModelLimits

__all__ = [
    "Admission",
    "Caller",
    "Grant",
    "Lane",
    "ModelBudget",
    "caller_of",
    "calling_for",
    "current_caller",
]

# Optimistic writes lost to other workers before a call is told to wait briefly instead.
_MAX_CONFLICTS = 8
_CONFLICT_WAIT_S = 0.05
# A shard holds at least this many requests a minute: smaller limits use fewer shards.
_MIN_SHARD_RPM = 100
# The model's bucket holds at least this many calls' tokens (see the module docstring).
_MODEL_DEPTH_CALLS = 2


class Lane(StrEnum):
    LIVE = "live"  # a turn being extracted now
    BACKFILL = "backfill"  # a pending episode: spare capacity only


@dataclass(frozen=True)
class Caller:
    """Whose call it is: the tenant, its part of the budget, and the lane."""

    tenant: str
    lane: Lane = Lane.LIVE
    weight: float = 1.0
    own_limits: dict[str, ModelLimits] | None = None


_caller: ContextVar[Caller | None] = ContextVar("model_budget_caller", default=None)


@contextmanager
def calling_for(caller: Caller | None) -> Iterator[None]:
    """Every model call made inside is charged to `caller` (the stage handlers set it)."""
    token = _caller.set(caller)
    try:
        yield
    finally:
        _caller.reset(token)


def current_caller() -> Caller | None:
    return _caller.get()


def caller_of(tenant: str, config: ModelConfig, lane: Lane = Lane.LIVE) -> Caller:
    """The caller of a request of `tenant`, whose effective config is `config`."""
    return Caller(tenant, lane, config.tenant_weight, config.tenant_limits)


@dataclass(frozen=True)
class Grant:
    """What one admitted call was charged, and where."""

    keys: tuple[str, ...]
    capacities: tuple[Levels, ...]
    rates: tuple[Levels, ...]
    cost: Levels


@dataclass(frozen=True)
class Admission:
    """`grant` when the call may go now; else `wait_s` until the budget expects room."""

    grant: Grant | None
    wait_s: float = 0.0


def _per_minute(limits: ModelLimits, fraction: float) -> Levels:
    return (
        limits.requests_per_minute * fraction,
        limits.input_tokens_per_minute * fraction,
        limits.output_tokens_per_minute * fraction,
    )


def _shard_count(limits: Levels, most: int) -> int:
    return max(1, min(most, int(limits[0] // _MIN_SHARD_RPM)))


@dataclass(frozen=True)
class _Bucket:
    """One bucket's shards: key prefix, the capacity and refill a minute of each shard, how
    many."""

    prefix: str
    shard_capacity: Levels
    shard_rate: Levels
    shards: int

    @classmethod
    def of(
        cls, prefix: str, limits: Levels, most_shards: int, depth: Levels = (0.0, 0.0, 0.0)
    ) -> _Bucket:
        """A shard refills at its part of `limits` and holds its part of `depth` at least: the
        shards together hold `max(limits, depth)`, what one bucket would (a floor on each
        shard would add up to `shards` times the depth, more than the provider admits)."""
        shards = _shard_count(limits, most_shards)
        per = (limits[0] / shards, limits[1] / shards, limits[2] / shards)
        held = (
            max(per[0], depth[0] / shards),
            max(per[1], depth[1] / shards),
            max(per[2], depth[2] / shards),
        )
        return cls(prefix, held, per, shards)

    def key(self, shard: int) -> str:
        return f"{self.prefix}#{shard}"

    def wait(self, record: BucketRecord, cost: Levels, floor: float, now: float) -> float:
        return admit_wait(record, self.shard_capacity, cost, floor, now, rate=self.shard_rate)


class ModelBudget:
    """Charges, refunds and throttles against a `BudgetStore`; `now` is injectable (a
    virtual clock drives it in the load simulator and the tests)."""

    def __init__(
        self,
        config: ModelConfig,
        store: BudgetStore,
        *,
        now: Callable[[], float] = time.time,
        rng: random.Random | None = None,
    ) -> None:
        self._config = config
        self._store = store
        self._now = now
        self._rng = rng or random.Random()
        self._tuning = Tuning(
            decrease=config.aimd_decrease,
            min_factor=config.aimd_min_factor,
            recovery_per_minute=config.aimd_recovery_per_minute,
            cooldown_s=config.aimd_cooldown_s,
        )

    @property
    def config(self) -> ModelConfig:
        return self._config

    def _model_bucket(self, provider: str, model: str, depth: Levels = (0.0, 0.0, 0.0)) -> _Bucket:
        limits = _per_minute(self._config.limits_for(provider, model), 1.0)
        return _Bucket.of(f"model#{provider}/{model}", limits, self._config.shards, depth)

    def _tenant_bucket(self, caller: Caller, provider: str, model: str, depth: Levels) -> _Bucket:
        own = (caller.own_limits or {}).get(f"{provider}/{model}") or (caller.own_limits or {}).get(
            "*"
        )
        if own is not None:
            limits = _per_minute(own, 1.0)
        else:
            share = min(1.0, caller.weight * self._config.tenant_share)
            limits = _per_minute(self._config.limits_for(provider, model), share)
        return _Bucket.of(
            f"tenant#{caller.tenant}#{provider}/{model}", limits, self._config.shards, depth
        )

    def _read(self, buckets: list[tuple[_Bucket, int]], now: float) -> list[BucketRecord]:
        keys = [bucket.key(shard) for bucket, shard in buckets]
        stored = self._store.load(keys)
        return [
            refill(record, bucket.shard_capacity, now, self._tuning, rate=bucket.shard_rate)
            if record is not None
            else BucketRecord(key, bucket.shard_capacity, now)
            for (bucket, _), key, record in zip(buckets, keys, stored, strict=True)
        ]

    def acquire(
        self,
        provider: str,
        model: str,
        input_tokens: int,
        max_tokens: int,
        caller: Caller,
        *,
        peek: bool = False,
        line_within_s: float | None = None,
    ) -> Admission:
        """Charge one call of `input_tokens` (estimated) and `max_tokens` if the budget has
        room for it now (see the module docstring for who may take what). With `peek`
        nothing is charged: no grant, and `wait_s` 0 when the call could go now (a caller
        with work to do before its call asks first: extraction). With `line_within_s`, a
        caller that must wait and will come back (within that many seconds at most) takes a
        place in its tenant's line (`memwrite.budget.buckets.queue_up`): `wait_s` is when
        its place comes, so the callers waiting for one tenant's room come back one at a
        time, and one tenant's line never holds back another's."""
        cost: Levels = (1.0, float(input_tokens), float(max_tokens))
        # One request (the provider's request bucket holds one at least, not two), two calls'
        # tokens.
        model_depth: Levels = (
            cost[0],
            _MODEL_DEPTH_CALLS * cost[1],
            _MODEL_DEPTH_CALLS * cost[2],
        )
        model_bucket = self._model_bucket(provider, model, model_depth)
        tenant_bucket = self._tenant_bucket(caller, provider, model, cost)
        lane_floor = self._config.backfill_floor if caller.lane is Lane.BACKFILL else 0.0
        borrow_floor = max(lane_floor, self._config.borrow_floor)
        for _ in range(_MAX_CONFLICTS):
            now = self._now()
            model_shard = self._rng.randrange(model_bucket.shards)
            tenant_shard = self._rng.randrange(tenant_bucket.shards)
            model_record, tenant_record = self._read(
                [(model_bucket, model_shard), (tenant_bucket, tenant_shard)], now
            )
            share_wait = tenant_bucket.wait(tenant_record, cost, 0.0, now)
            in_share = share_wait == 0.0
            floor = lane_floor if in_share else borrow_floor
            wait = model_bucket.wait(model_record, cost, floor, now)
            if wait > 0:
                if not in_share:
                    # Room comes back either way: the tenant's share refills, or others leave
                    # the model's bucket above the floor.
                    wait = min(
                        wait,
                        max(share_wait, model_bucket.wait(model_record, cost, lane_floor, now)),
                    )
                if line_within_s is None:
                    return Admission(None, wait)
                queued, wait = queue_up(
                    tenant_record, cost, now, wait, line_within_s, rate=tenant_bucket.shard_rate
                )
                # One conditional write for the place in line (none past the deadline).
                if queued is None or self._store.save([queued]):
                    return Admission(None, wait)
                continue
            if peek:
                return Admission(None, 0.0)
            charged = [charge(model_record, cost)]
            buckets = [model_bucket]
            if in_share:
                charged.append(charge(tenant_record, cost))
                buckets.append(tenant_bucket)
            if self._store.save(charged):
                return Admission(
                    Grant(
                        keys=tuple(record.key for record in charged),
                        capacities=tuple(bucket.shard_capacity for bucket in buckets),
                        rates=tuple(bucket.shard_rate for bucket in buckets),
                        cost=cost,
                    )
                )
        return Admission(None, _CONFLICT_WAIT_S)

    def settle(self, grant: Grant, input_tokens: int, output_tokens: int) -> None:
        """Refund a finished call to its real usage (0, 0 when no answer came: nothing was
        generated); the request itself stays spent."""
        back: Levels = (0.0, grant.cost[1] - input_tokens, grant.cost[2] - output_tokens)
        if back == (0.0, 0.0, 0.0):
            return
        for _ in range(_MAX_CONFLICTS):
            now = self._now()
            stored = self._store.load(list(grant.keys))
            records = [
                refund(refill(record, capacity, now, self._tuning, rate=rate), capacity, back)
                for record, capacity, rate in zip(
                    stored, grant.capacities, grant.rates, strict=True
                )
                if record is not None
            ]
            if not records or self._store.save(records):
                return

    def throttled(
        self, provider: str, model: str, retry_after_s: float, *, overloaded: bool = False
    ) -> None:
        """The provider answered 429 (or 529: `overloaded`): every shard of the model's bucket
        drops its limits (multiplicative decrease; a 529's to half at most) and admits
        nothing for `retry_after_s`."""
        bucket = self._model_bucket(provider, model)
        for shard in range(bucket.shards):
            for _ in range(_MAX_CONFLICTS):
                now = self._now()
                (record,) = self._read([(bucket, shard)], now)
                lowered = decrease(
                    record,
                    bucket.shard_capacity,
                    now,
                    retry_after_s,
                    self._tuning,
                    overloaded=overloaded,
                )
                if self._store.save([lowered]):
                    break

    def snapshot(self, provider: str, model: str) -> list[BucketRecord]:
        """The model's shards as of now (for tests, the load simulator and operators)."""
        bucket = self._model_bucket(provider, model)
        return self._read([(bucket, shard) for shard in range(bucket.shards)], self._now())
