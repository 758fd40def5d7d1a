"""The model budget's buckets (`memwrite.budget`), driven by a fake clock: a call is charged
its input estimate and max_tokens, refunded to its usage, refilled over time; a 429 lowers the
limits and honours retry-after, time restores them; one tenant's burst leaves the others their
share; backfill takes only spare capacity."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memwrite.adapters.in_memory import InMemoryBudgetStore
from memwrite.budget import Caller, Lane, ModelBudget
from memwrite.config.model_limits import ModelConfig, ModelLimits

PROVIDER, MODEL = "anthropic", "claude-haiku-4-5"
# Small limits, one shard (fewer than 100 requests a minute), so the arithmetic reads plainly.
LIMITS = ModelLimits(
    requests_per_minute=60, input_tokens_per_minute=60_000, output_tokens_per_minute=6_000
)
DANA = Caller("dana-co")
ALEX = Caller("alex-co")


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def budget(clock: Clock, **changes: object) -> tuple[ModelBudget, InMemoryBudgetStore]:
    config = ModelConfig.model_validate(
        {"limits": {f"{PROVIDER}/{MODEL}": LIMITS}, "tenant_share": 1.0, **changes}
    )
    store = InMemoryBudgetStore()
    return ModelBudget(config, store, now=clock, rng=random.Random(7)), store


def take(b: ModelBudget, caller: Caller = DANA, inp: int = 1_000, out: int = 1_000) -> float:
    """0 when admitted, else the seconds the budget says to wait."""
    admission = b.acquire(PROVIDER, MODEL, inp, out, caller)
    return 0.0 if admission.grant is not None else admission.wait_s


def test_a_call_is_charged_its_max_tokens_and_refunded_to_its_usage() -> None:
    # Given a budget of 6,000 output tokens a minute
    clock = Clock()
    b, _ = budget(clock)
    # When six calls of max_tokens 1,000 start
    grants = [b.acquire(PROVIDER, MODEL, 1_000, 1_000, DANA).grant for _ in range(6)]
    # Then a seventh finds no room, and is told how long until one second of refill fits it
    assert all(grants)
    assert take(b) == pytest.approx(10.0)
    # When the six end having written 100 tokens each
    for grant in grants:
        assert grant is not None
        b.settle(grant, 1_000, 100)
    # Then what they did not use is back: five more calls fit at once
    assert [take(b) for _ in range(5)] == [0.0] * 5


def test_a_peek_charges_nothing_and_says_what_acquiring_would() -> None:
    # Given a budget with room for six calls of max_tokens 1,000
    clock = Clock()
    b, _ = budget(clock)
    # When it is asked about a call a hundred times
    asked = [b.acquire(PROVIDER, MODEL, 1_000, 1_000, DANA, peek=True) for _ in range(100)]
    # Then every answer is "now", with no grant, and the six calls still fit
    assert {(a.grant, a.wait_s) for a in asked} == {(None, 0.0)}
    assert [take(b) for _ in range(6)] == [0.0] * 6
    # And once it is empty both say the same wait (one second of refill: 10 s)
    peeked = b.acquire(PROVIDER, MODEL, 1_000, 1_000, DANA, peek=True)
    assert peeked.grant is None
    assert peeked.wait_s == pytest.approx(10.0)
    assert take(b) == pytest.approx(10.0)


def test_the_buckets_refill_with_time_up_to_one_minute_of_limit() -> None:
    # Given an empty output bucket
    clock = Clock()
    b, _ = budget(clock)
    while take(b) == 0:
        pass
    # When 20 s pass (a third of a minute: 2,000 output tokens)
    clock.now += 20
    # Then two calls fit, the third waits
    assert [take(b), take(b)] == [0.0, 0.0]
    assert take(b) > 0
    # And after an hour idle the bucket holds one minute's worth, no more
    clock.now += 3_600
    admitted = 0
    while take(b) == 0:
        admitted += 1
    assert admitted == 6


def test_a_worker_whose_clock_is_behind_refills_no_second_twice() -> None:
    # Given a full bucket (six calls a minute), five calls charged at t = 1,000 s
    clock = Clock()
    b, _ = budget(clock)
    assert [take(b) for _ in range(5)] == [0.0] * 5
    # When a worker whose clock reads 20 s earlier charges the sixth
    clock.now -= 20
    assert take(b) == 0.0
    # Then 20 s after the first charges the bucket holds the 20 s of refill since them (two
    # calls), not the 40 s since the late worker's clock
    clock.now += 40
    assert [take(b), take(b)] == [0.0, 0.0]
    assert take(b) > 0


def test_a_429_halves_the_limits_honours_retry_after_then_recovers_additively() -> None:
    # Given a full budget
    clock = Clock()
    b, _ = budget(clock, aimd_recovery_per_minute=0.1)
    # When the provider answers 429 with retry-after 30 s
    b.throttled(PROVIDER, MODEL, 30.0)
    # Then nothing is admitted for 30 s
    assert take(b) == pytest.approx(30.0)
    (shard,) = b.snapshot(PROVIDER, MODEL)
    assert shard.factor == pytest.approx(0.5)
    # And a second 429 reported by another worker at once does not halve it again
    b.throttled(PROVIDER, MODEL, 1.0)
    (shard,) = b.snapshot(PROVIDER, MODEL)
    assert shard.factor == pytest.approx(0.5)
    # When 30 s pass: the factor has recovered by 0.05 (additive), so the full bucket holds
    # 0.55 * 6,000 output tokens: three calls of 1,000
    clock.now += 30
    assert [take(b) for _ in range(4)][:3] == [0.0, 0.0, 0.0]
    assert take(b) > 0
    # And five minutes later the limits are whole again
    clock.now += 300
    (shard,) = b.snapshot(PROVIDER, MODEL)
    assert shard.factor == 1.0


def test_an_outage_of_529s_halves_the_limits_once_so_they_are_whole_soon_after() -> None:
    # Given a full budget
    clock = Clock()
    b, _ = budget(clock, aimd_recovery_per_minute=0.1)
    # When the provider is overloaded for ten minutes: every try, 5 s apart, answered 529
    for _ in range(120):
        clock.now += 5
        b.throttled(PROVIDER, MODEL, 5.0, overloaded=True)
    # Then the limits were halved, not compounded down to the floor
    (shard,) = b.snapshot(PROVIDER, MODEL)
    assert shard.factor == pytest.approx(0.5)
    # And five minutes after the outage they are whole again
    clock.now += 300
    (shard,) = b.snapshot(PROVIDER, MODEL)
    assert shard.factor == 1.0
    # While 429s (the account's own limits) compound, down to the floor
    for _ in range(10):
        clock.now += 5
        b.throttled(PROVIDER, MODEL, 5.0)
    (shard,) = b.snapshot(PROVIDER, MODEL)
    assert shard.factor == pytest.approx(0.05)
    # And a 529 then does not raise them
    b.throttled(PROVIDER, MODEL, 5.0, overloaded=True)
    (shard,) = b.snapshot(PROVIDER, MODEL)
    assert shard.factor == pytest.approx(0.05)


def test_a_tenants_burst_takes_only_what_others_leave_above_the_floor() -> None:
    # Given two tenants each guaranteed half the model (weight 1, tenant_share 0.5) and a
    # borrower allowed down to half of the model's bucket
    clock = Clock()
    b, _ = budget(clock, tenant_share=0.5, borrow_floor=0.5)
    # When one tenant bursts: its own half, then borrowing until the floor
    burst = 0
    while take(b, DANA) == 0:
        burst += 1
    # Then it got its share (3 calls) and nothing beyond what would dig into the floor
    assert burst == 3
    # And the other tenant still gets its whole share at once
    assert [take(b, ALEX) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert take(b, ALEX) > 0


def test_a_tenant_borrows_capacity_nobody_else_uses() -> None:
    # Given a tenant guaranteed a tenth of the model and a low borrow floor
    clock = Clock()
    b, _ = budget(clock, tenant_share=0.1, borrow_floor=0.0)
    # When it is alone: it takes the whole model's bucket, beyond its share
    admitted = 0
    while take(b, DANA) == 0:
        admitted += 1
    assert admitted == 6


def test_a_heavier_tenant_is_guaranteed_more() -> None:
    # Given weights 1 and 2 at a sixth of the model each, and no borrowing
    clock = Clock()
    b, _ = budget(clock, tenant_share=1 / 6, borrow_floor=0.99)
    heavy = Caller("heavy-co", weight=2.0)
    # Then the light one gets one call of 1,000 output tokens, the heavy one two
    assert [take(b, DANA), take(b, DANA)][1] > 0
    assert [take(b, heavy), take(b, heavy)] == [0.0, 0.0]
    assert take(b, heavy) > 0


def test_a_tenants_own_limits_replace_its_share() -> None:
    # Given a tenant with its own limit of 2,000 output tokens a minute and no borrowing
    clock = Clock()
    b, _ = budget(clock, tenant_share=0.01, borrow_floor=0.99)
    own = ModelLimits(
        requests_per_minute=60, input_tokens_per_minute=60_000, output_tokens_per_minute=2_000
    )
    caller = Caller("own-co", own_limits={"*": own})
    # Then it gets two calls of 1,000
    assert [take(b, caller), take(b, caller)] == [0.0, 0.0]
    assert take(b, caller) > 0


def test_backfill_takes_only_spare_capacity_above_the_live_reserve() -> None:
    # Given a budget that keeps half of the model for live calls
    clock = Clock()
    b, _ = budget(clock, backfill_floor=0.5)
    backfill = Caller("dana-co", lane=Lane.BACKFILL)
    # When a backfill drains what it may
    taken = 0
    while take(b, backfill) == 0:
        taken += 1
    # Then it stopped at half, and live calls still find the other half
    assert taken == 3
    assert [take(b, DANA) for _ in range(3)] == [0.0, 0.0, 0.0]


def test_a_call_larger_than_a_minute_of_the_limit_goes_and_is_paid_back_at_its_rate() -> None:
    # Given calls asking for more output tokens than a minute of the limit (6,000)
    clock = Clock()
    b, _ = budget(clock, borrow_floor=0.0)
    # Then the model's bucket holds two of them, rather than refusing them for ever
    assert [take(b, out=10_000), take(b, out=10_000)] == [0.0, 0.0]
    # And the third waits for one call's worth at the limit's rate: 10,000 at 100 a second
    assert take(b, out=10_000) == pytest.approx(100.0)


def admitted_within_the_accounts_bucket(
    limits: ModelLimits, inp: int, out: int, tries_per_second: int, seconds: int
) -> bool:
    """Whether what the budget admits, second by second from full (no call refunded), always
    fits in what the provider's own bucket of `limits` admits by then: a minute's worth (one
    request at least) plus its refill."""
    clock = Clock()
    b, _ = budget(clock, limits={"*": limits}, borrow_floor=0.0)
    start, spent = clock.now, [0.0, 0.0, 0.0]
    per_minute = (
        limits.requests_per_minute,
        limits.input_tokens_per_minute,
        limits.output_tokens_per_minute,
    )
    provider_capacity = (max(per_minute[0], 1), per_minute[1], per_minute[2])
    for _ in range(seconds):
        for _ in range(tries_per_second):
            if take(b, inp=inp, out=out) == 0.0:
                spent = [spent[0] + 1, spent[1] + inp, spent[2] + out]
        elapsed = clock.now - start
        for used, capacity, limit in zip(spent, provider_capacity, per_minute, strict=True):
            if used > capacity + limit * elapsed / 60 + 1e-6:
                return False
        clock.now += 1
    return True


def test_the_shards_together_never_admit_more_than_the_accounts_bucket() -> None:
    # Given an account of 800 requests and 16,000 output tokens a minute: eight shards of
    # 2,000 output tokens, each holding one call of max_tokens 1,500 but not two
    limits = ModelLimits(
        requests_per_minute=800, input_tokens_per_minute=800_000, output_tokens_per_minute=16_000
    )
    # When calls try all the time for two minutes
    # Then the shards never admit more than the account's bucket would: its minute of output
    # tokens plus what refilled (not a floor of two calls on each of eight shards)
    assert admitted_within_the_accounts_bucket(limits, 1_000, 1_500, 20, 120)


def test_an_account_of_one_request_a_minute_gets_one_call_a_minute() -> None:
    # Given an account of one request a minute and room for many calls' tokens
    clock = Clock()
    limits = ModelLimits(
        requests_per_minute=1, input_tokens_per_minute=60_000, output_tokens_per_minute=60_000
    )
    b, _ = budget(clock, limits={"*": limits})
    # When two calls start at once
    # Then the second waits a minute, as the provider would make it (one request in its bucket)
    assert take(b) == 0.0
    assert take(b) == pytest.approx(60.0)


@settings(max_examples=25, deadline=None, derandomize=True)
@given(
    requests=st.integers(min_value=1, max_value=2_000),
    output_limit=st.integers(min_value=2_000, max_value=400_000),
    out=st.integers(min_value=100, max_value=8_192),
    tries=st.integers(min_value=1, max_value=8),
)
def test_the_budget_never_admits_more_than_the_providers_buckets(
    requests: int, output_limit: int, out: int, tries: int
) -> None:
    # Given any account whose every shard's part of the output limit holds a call, and whose
    # output limit holds two (the model bucket's depth)
    shards = max(1, min(8, requests // 100))
    out = min(out, output_limit // shards, output_limit // 2)
    limits = ModelLimits(
        requests_per_minute=requests,
        input_tokens_per_minute=10_000_000,
        output_tokens_per_minute=output_limit,
    )
    # When calls try every second for a minute and a half
    # Then every dimension stays within what the provider's bucket admits
    assert admitted_within_the_accounts_bucket(limits, 1_000, out, tries, 90)


def test_small_shares_are_work_conserving_and_a_burst_leaves_the_others_theirs() -> None:
    # Given the load test's shape: 20 tenants, each share (a twentieth of 8 calls a minute)
    # smaller than one call of 4,400 input and 2,048 output tokens
    clock = Clock()
    limits = ModelLimits(
        requests_per_minute=8, input_tokens_per_minute=36_000, output_tokens_per_minute=2_000
    )
    b, _ = budget(clock, limits={"*": limits}, tenant_share=0.05)
    tenants = [Caller(f"t{i:02d}") for i in range(20)]

    def call(caller: Caller) -> float:
        admission = b.acquire(PROVIDER, MODEL, 4_400, 2_048, caller)
        if admission.grant is None:
            return admission.wait_s
        b.settle(admission.grant, 4_400, 240)
        return 0.0

    # When one tenant calls alone, well under the model's limit, three calls 10 s apart
    # Then each goes at once: capacity nobody else uses is its to take
    for _ in range(3):
        assert call(tenants[1]) == 0.0
        clock.now += 10
    # When a burst tenant tries every 10 s for 25 minutes while each other tenant calls at
    # its share's rate (a twentieth of 8 a minute: once every 150 s, staggered)
    clock.now += 60
    start, burst, waits = clock.now, 0, []
    due = {tenant.tenant: start + 150 * i / 19 for i, tenant in enumerate(tenants[1:])}
    while clock.now < start + 25 * 60:
        for tenant in tenants[1:]:
            if due[tenant.tenant] <= clock.now and call(tenant) == 0.0:
                waits.append(clock.now - due[tenant.tenant])
                due[tenant.tenant] += 150
        while call(tenants[0]) == 0.0:
            burst += 1
        clock.now += 10
    # Then the burst got what the others left, and no other tenant was starved: each call of
    # theirs went within a minute
    assert burst > 0
    assert len(waits) >= 19 * 9
    assert max(waits) <= 60


def test_a_write_lost_to_another_worker_is_read_again_and_retried() -> None:
    # Given a store whose next two conditional writes lose to another worker
    clock = Clock()
    b, store = budget(clock)
    store.conflicts = 2
    # When a call is admitted
    assert take(b) == 0.0
    # Then it was charged exactly once
    (shard,) = b.snapshot(PROVIDER, MODEL)
    assert shard.levels[2] == pytest.approx(5_000)
