"""The model budget on AWS, synthesized: its table (key design from `memwrite.schema.BUDGET`),
the grants of exactly the functions that call the model, and the DeferredBudget alarm."""

from __future__ import annotations

from typing import Any

import pytest

from infra.access import LLM_CALLERS
from infra.stack import construct_id
from memwrite.config import load_settings
from memwrite.schema import BUDGET, TTL_ATTRIBUTE
from tests.infrastructure.conftest import Synthesized
from tests.infrastructure.test_stacks import ENVS, _actions_on, definition, resources

BUDGET_TABLE_PREFIX = "TablesBudget"


def budget_table(synth: Synthesized) -> dict[str, Any]:
    (table,) = (
        table
        for logical_id, table in resources(synth, "AWS::DynamoDB::Table").items()
        if logical_id.startswith(BUDGET_TABLE_PREFIX)
    )
    return table


@pytest.mark.parametrize("env", ENVS)
def test_the_budget_table_is_keyed_by_shard_with_a_ttl(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    # Given the stack / Then the budget table has the schema's key and TTL, on demand
    properties = budget_table(synthesized[env])["Properties"]
    assert properties["KeySchema"] == [{"AttributeName": BUDGET.partition_key, "KeyType": "HASH"}]
    assert properties["TimeToLiveSpecification"] == {
        "AttributeName": TTL_ATTRIBUTE,
        "Enabled": True,
    }
    assert properties["BillingMode"] == "PAY_PER_REQUEST"


def test_every_function_that_calls_the_model_charges_the_budget_and_no_other(
    synthesized: dict[str, Synthesized],
) -> None:
    synth = synthesized["dev"]
    functions = resources(synth, "AWS::Lambda::Function")
    for name in ("extract", "resolve_refs", "dedupe", "persist", "hype", "api", "backfill"):
        assert name in LLM_CALLERS
        # Then each caller may read the shards and put them whole (under a version condition,
        # two at once in a transaction), never delete or update one in place
        actions = _actions_on(synth, construct_id(name), BUDGET_TABLE_PREFIX)
        assert {"dynamodb:BatchGetItem", "dynamodb:PutItem"} <= actions, name
        assert not actions & {"dynamodb:DeleteItem", "dynamodb:UpdateItem"}, name
        # And it is told the table's name
        prefix = f"{construct_id(name)}Function"
        env = next(
            fn["Properties"]["Environment"]["Variables"]
            for logical_id, fn in functions.items()
            if logical_id.startswith(prefix)
        )
        assert "BUDGET_TABLE" in env, name
    # And a function that calls no model has no access to it
    for name in ("dispatch", "authorizer", "conflict", "pre_filter"):
        assert name not in LLM_CALLERS
        assert _actions_on(synth, construct_id(name), BUDGET_TABLE_PREFIX) == set(), name


@pytest.mark.parametrize("env", ENVS)
def test_turns_deferred_for_want_of_budget_raise_an_alarm(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    # Given the stack / Then an alarm pages on any turn deferred as DeferredBudget
    alarms = resources(synthesized[env], "AWS::CloudWatch::Alarm")
    (alarm,) = (a for logical_id, a in alarms.items() if "DeferredBudget" in logical_id)
    properties = alarm["Properties"]
    assert properties["MetricName"] == "extraction.deferred_budget"
    assert {"Name": "Stage", "Value": "extract"} in properties["Dimensions"]
    assert properties["Threshold"] == 1
    assert properties["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"


@pytest.mark.parametrize("env", ENVS)
def test_a_batch_waits_for_the_budget_in_the_state_machine_long_enough_to_defer(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    # Given the deployed settings' wait for the model budget
    settings = load_settings({"MEMWRITE_CONFIG": f"infra/settings/{env}.json"})
    max_wait_s = settings.pipeline.model.max_wait_s
    # When the extract task's retriers are read
    states = definition(synthesized[env])["States"]["Batches"]["ItemProcessor"]["States"]
    retry = states["extract"]["Retry"][0]
    # Then BudgetWait is retried first, without jitter, for longer than max_wait_s in all: the
    # last attempt finds the wait over and defers the batch as episodes (never the DLQ)
    assert retry["ErrorEquals"] == ["BudgetWait"]
    assert "JitterStrategy" not in retry or retry["JitterStrategy"] == "NONE"
    delay, waited = float(retry["IntervalSeconds"]), 0.0
    for _ in range(retry["MaxAttempts"] - 1):
        waited += delay
        delay = min(delay * retry["BackoffRate"], retry["MaxDelaySeconds"])
    assert waited >= max_wait_s
    # And the whole wait fits an Express execution (5 minutes) with time left for the stages
    assert waited + delay < 300


@pytest.mark.parametrize("env", ENVS)
def test_pending_episodes_near_expiry_with_no_model_raise_an_alarm(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    # Given the stack / Then an alarm pages on the scheduled backfill's hourly count of
    # pending episodes near their expiry (counted only while no model is configured)
    alarms = resources(synthesized[env], "AWS::CloudWatch::Alarm")
    (alarm,) = (a for logical_id, a in alarms.items() if "PendingEpisodesNearExpiry" in logical_id)
    properties = alarm["Properties"]
    assert properties["MetricName"] == "episodes.pending_near_expiry"
    assert {"Name": "Stage", "Value": "backfill"} in properties["Dimensions"]
    assert (properties["Period"], properties["Statistic"]) == (3600, "Maximum")
    assert properties["Threshold"] == 1
