"""The model budget's store (`memwrite.budget.ports.BudgetStore`), run against DynamoDB on moto
and the SQLite file of the embedded mode: one suite, the same answers. A write lands only on
the version it was read at, two records land together or not at all, and the budget built on
either store charges, refunds and throttles the same."""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import boto3
import pytest

from memwrite.adapters.aws.dynamodb_budget import DynamoBudgetStore
from memwrite.adapters.sqlite.budget import SqliteBudgetStore
from memwrite.adapters.sqlite.database import SqliteDatabase
from memwrite.budget import BucketRecord, BudgetStore, Caller, ModelBudget
from memwrite.config.model_limits import ModelConfig, ModelLimits
from memwrite_local.runtime.aws import LocalAws

NOW = 1_800_000_000.0


@pytest.fixture(scope="module", params=["moto", "sqlite"])
def store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BudgetStore]:
    if request.param == "sqlite":
        yield SqliteBudgetStore(SqliteDatabase(Path(tmp_path_factory.mktemp("budget"))))
        return
    with LocalAws() as aws:
        assert aws.resources is not None
        yield DynamoBudgetStore(boto3.client("dynamodb"), aws.resources.table_names["budget"])


def fresh() -> str:
    return f"model#anthropic/test-{uuid.uuid4().hex[:8]}#0"


def record(key: str, output_tokens: float = 6_000.0) -> BucketRecord:
    return BucketRecord(key, (60.0, 60_000.0, output_tokens), NOW)


def test_a_record_is_stored_once_then_only_on_the_version_read(store: BudgetStore) -> None:
    # Given a bucket never stored
    key = fresh()
    assert store.load([key]) == [None]
    # When two workers both write it as new: the first lands, the second loses
    assert store.save([record(key, 5_000)])
    assert not store.save([record(key, 4_000)])
    (stored,) = store.load([key])
    assert stored is not None
    assert (stored.version, stored.levels[2]) == (1, 5_000)
    # And a write on the version read lands once; a second on the same version loses
    assert store.save([replace(stored, levels=(59.0, 59_000.0, 4_000.0))])
    assert not store.save([replace(stored, levels=(58.0, 58_000.0, 3_000.0))])
    (again,) = store.load([key])
    assert again == replace(stored, levels=(59.0, 59_000.0, 4_000.0), version=2)


def test_two_records_are_written_together_or_not_at_all(store: BudgetStore) -> None:
    # Given two buckets, one of them changed since it was read
    first, second = fresh(), fresh()
    assert store.save([record(second)])
    # When both are written, the second as if never stored
    # Then neither lands
    assert not store.save([record(first), record(second)])
    assert store.load([first, second])[0] is None
    # And with the right versions both land
    (stored,) = store.load([second])
    assert stored is not None
    changed = replace(stored, factor=0.5, blocked_until=NOW + 30, line_at=NOW + 45)
    assert store.save([record(first), changed])
    loaded = store.load([first, second])
    assert [r.version if r else 0 for r in loaded] == [1, 2]
    assert loaded[1] is not None
    assert (loaded[1].factor, loaded[1].blocked_until, loaded[1].line_at) == (
        0.5,
        NOW + 30,
        NOW + 45,
    )


def test_the_budget_on_the_store_charges_refunds_and_throttles(store: BudgetStore) -> None:
    # Given a budget on the store, with a model of its own (a fresh key)
    clock = [NOW]
    model = f"test-{uuid.uuid4().hex[:8]}"
    limits = ModelLimits(
        requests_per_minute=60, input_tokens_per_minute=60_000, output_tokens_per_minute=2_000
    )
    config = ModelConfig(limits={f"anthropic/{model}": limits}, tenant_share=1.0)
    budget = ModelBudget(config, store, now=lambda: clock[0], rng=random.Random(3))
    caller = Caller("acme")
    # When two calls of 1,000 output tokens take the minute's output
    grants = [budget.acquire("anthropic", model, 500, 1_000, caller).grant for _ in range(2)]
    assert all(grants)
    assert budget.acquire("anthropic", model, 500, 1_000, caller).grant is None
    # Then the first's refund (it wrote 200) lets one more in
    assert grants[0] is not None
    budget.settle(grants[0], 500, 200)
    assert budget.acquire("anthropic", model, 500, 500, caller).grant is not None
    # And a 429 with retry-after 20 s stops every call for 20 s
    budget.throttled("anthropic", model, 20.0)
    assert budget.acquire("anthropic", model, 1, 1, caller).wait_s == pytest.approx(20.0)
    # And two batches waiting in line are told places one call's refill (30 s) apart
    first, second = (
        budget.acquire("anthropic", model, 500, 1_000, caller, peek=True, line_within_s=120)
        for _ in range(2)
    )
    assert second.wait_s - first.wait_s == pytest.approx(30.0)
