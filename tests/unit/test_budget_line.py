"""The model budget's line of waiting callers (`memwrite.budget`, docs/budget.md): batches that
wait for room are told to come back one at a time, a call's refill apart, instead of all at
the moment the bucket has room for one; a place past the caller's deadline is not taken; one
tenant's line never pushes another's back; and the line never makes the budget admit more."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memwrite.adapters.in_memory import InMemoryBudgetStore
from memwrite.budget import Caller, ModelBudget
from memwrite.config.model_limits import ModelConfig, ModelLimits

PROVIDER, MODEL = "anthropic", "claude-haiku-4-5"
# One shard: 60 requests, 60,000 input and 6,000 output tokens a minute. A call of max_tokens
# 1,000 refills in 10 s (output is the slowest dimension).
LIMITS = ModelLimits(
    requests_per_minute=60, input_tokens_per_minute=60_000, output_tokens_per_minute=6_000
)
STEP_S = 10.0
DANA = Caller("dana-co")
ALEX = Caller("alex-co")


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def budget(clock: Clock, **changes: object) -> ModelBudget:
    config = ModelConfig.model_validate(
        {"limits": {f"{PROVIDER}/{MODEL}": LIMITS}, "tenant_share": 1.0, **changes}
    )
    return ModelBudget(config, InMemoryBudgetStore(), now=clock, rng=random.Random(7))


def take(b: ModelBudget, caller: Caller = DANA) -> bool:
    return b.acquire(PROVIDER, MODEL, 1_000, 1_000, caller).grant is not None


def wait_in_line(b: ModelBudget, caller: Caller = DANA, within_s: float = 120.0) -> float:
    admission = b.acquire(PROVIDER, MODEL, 1_000, 1_000, caller, peek=True, line_within_s=within_s)
    assert admission.grant is None
    return admission.wait_s


def emptied(clock: Clock, **changes: object) -> ModelBudget:
    b = budget(clock, **changes)
    while take(b):
        pass
    return b


def test_waiting_callers_are_told_to_come_back_a_calls_refill_apart() -> None:
    # Given an empty budget, room for the next call in 10 s
    clock = Clock()
    b = emptied(clock)
    # When five batches ask without a place in line, as before
    # Then all five are told the same moment: they would all come back together
    alone = [b.acquire(PROVIDER, MODEL, 1_000, 1_000, DANA, peek=True).wait_s for _ in range(5)]
    assert alone == pytest.approx([STEP_S] * 5)
    # When five batches wait in line
    # Then each is told one call's refill later than the one before
    waits = [wait_in_line(b) for _ in range(5)]
    assert waits == pytest.approx([STEP_S * (i + 1) for i in range(5)])


def test_callers_coming_back_at_their_place_each_find_room() -> None:
    # Given an empty budget and twenty batches waiting in line
    clock = Clock()
    b = emptied(clock)
    due = sorted(clock.now + wait_in_line(b, within_s=3_600) for _ in range(20))
    # When each comes back at its place, a little after it as a queue delivers (the clock
    # moving a second at a time from half a second on)
    clock.now += 0.5
    tries = 0
    while due:
        clock.now += 1
        for at in [at for at in due if at <= clock.now]:
            tries += 1
            if take(b):
                due.remove(at)
            else:
                due.remove(at)
                due.append(clock.now + wait_in_line(b, within_s=3_600))
    # Then every one finds room the first time it comes back
    assert tries == 20


def test_a_place_past_the_callers_deadline_is_not_taken() -> None:
    # Given an empty budget with three batches in line (places at 10, 20, 30 s)
    clock = Clock()
    b = emptied(clock)
    assert [wait_in_line(b) for _ in range(3)] == pytest.approx([10.0, 20.0, 30.0])
    # When a batch that may wait 25 s more asks
    # Then it is told its place would come in 40 s, and takes none
    assert wait_in_line(b, within_s=25.0) == pytest.approx(40.0)
    # And the next batch with time to wait gets that place
    assert wait_in_line(b) == pytest.approx(40.0)


def test_one_tenants_line_never_pushes_another_tenants_back() -> None:
    # Given two tenants with half the model each, both shares empty
    clock = Clock()
    b = budget(clock, tenant_share=0.5, borrow_floor=0.0)
    while take(b, DANA) or take(b, ALEX):
        pass
    # When one tenant's burst puts fifty batches in its line
    burst = [wait_in_line(b, DANA, within_s=3_600) for _ in range(50)]
    # Then the other tenant's first waiting batch is told as soon as its own share has room
    assert wait_in_line(b, ALEX) == pytest.approx(min(burst))
    assert max(burst) > 10 * min(burst)


def test_a_lost_write_for_a_place_in_line_is_read_again() -> None:
    # Given an empty budget whose next place-in-line write loses to another worker's
    clock = Clock()
    config = ModelConfig.model_validate({"limits": {"*": LIMITS}, "tenant_share": 1.0})
    store = InMemoryBudgetStore()
    b = ModelBudget(config, store, now=clock, rng=random.Random(7))
    while take(b):
        pass
    store.conflicts = 1
    # When two batches wait in line
    # Then each has its own place
    assert [wait_in_line(b), wait_in_line(b)] == pytest.approx([10.0, 20.0])


@settings(max_examples=15, deadline=None, derandomize=True)
@given(
    requests=st.integers(min_value=1, max_value=2_000),
    output_limit=st.integers(min_value=2_000, max_value=400_000),
    out=st.integers(min_value=100, max_value=8_192),
    waiting=st.integers(min_value=1, max_value=4),
)
def test_the_line_never_makes_the_budget_admit_more_than_the_providers_buckets(
    requests: int, output_limit: int, out: int, waiting: int
) -> None:
    # Given any account whose shards each hold a call, and batches that wait in line
    shards = max(1, min(8, requests // 100))
    out = min(out, output_limit // shards, output_limit // 2)
    limits = ModelLimits(
        requests_per_minute=requests,
        input_tokens_per_minute=10_000_000,
        output_tokens_per_minute=output_limit,
    )
    clock = Clock()
    b = budget(clock, limits={"*": limits}, borrow_floor=0.0, tenant_share=0.5)
    per_minute = (requests, 10_000_000, output_limit)
    capacity = (max(requests, 1), 10_000_000, output_limit)
    start, spent = clock.now, [0.0, 0.0, 0.0]
    callers = [Caller(f"t{i}") for i in range(3)]
    # When each second every tenant's waiting batches ask for a place, then try to call
    for _ in range(60):
        for caller in callers:
            for _ in range(waiting):
                b.acquire(PROVIDER, MODEL, 1_000, out, caller, peek=True, line_within_s=120)
                if b.acquire(PROVIDER, MODEL, 1_000, out, caller).grant is not None:
                    spent = [spent[0] + 1, spent[1] + 1_000, spent[2] + out]
        # Then every dimension stays within what the provider's bucket admits by then
        elapsed = clock.now - start
        for used, held, limit in zip(spent, capacity, per_minute, strict=True):
            assert used <= held + limit * elapsed / 60 + 1e-6
        clock.now += 1
