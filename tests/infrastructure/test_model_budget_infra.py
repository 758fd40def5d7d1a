"""The model budget on AWS, synthesized: its table (key design from `memwrite.schema.BUDGET`),
the grants of exactly the functions that call the model, and the DeferredBudget alarm."""

from __future__ import annotations

from typing import Any

import pytest

from infra.access import LLM_CALLERS
from infra.pipeline import EXPRESS_WAIT_LIMIT_SECS
from infra.stack import construct_id
from memwrite.config.settings import load_settings
from memwrite.schema import BUDGET, TTL_ATTRIBUTE
from memwrite.stages import pipeline_stages
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
def test_a_batch_waits_its_place_in_line_in_the_state_machine_then_runs_again(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    # Given the deployed definition's Map iteration, where extract alone waits for the budget
    states = definition(synthesized[env])["States"]["Batches"]["ItemProcessor"]["States"]
    assert [s.name for s in pipeline_stages() if s.waits_for_budget] == ["extract"]
    for stage in pipeline_stages():
        catches = states[stage.name]["Catch"]
        if not stage.waits_for_budget:
            # A stage that never waits for the model budget (extract alone does) has no wait
            assert [c["ErrorEquals"] for c in catches] == [["States.ALL"]], stage.name
            continue
        # Then extract catches BudgetWait first, keeping the batch, and
        # the catch-all still comes after it
        budget, catch_all = catches
        assert budget["ErrorEquals"] == ["BudgetWait"]
        assert budget["ResultPath"] == "$.budget.error"
        assert catch_all["ErrorEquals"] == ["States.ALL"]
        # And it reads the delay from the Lambda's error: Cause, then its errorMessage
        read = states[budget["Next"]]
        assert read["Parameters"] == {"response.$": "States.StringToJson($.budget.error.Cause)"}
        place = states[read["Next"]]
        assert place["Parameters"]["wait.$"] == (
            "States.StringToJson($.budget.error.response.errorMessage)"
        )
        count = states[place["Next"]]
        assert count["Parameters"]["waited_s.$"] == (
            "States.MathAdd($.budget.waited_s, $.budget.wait.wait_s)"
        )
        # And waits exactly that many seconds, then runs the same stage again
        within = states[count["Next"]]
        wait = states[within["Default"]]
        assert wait["Type"] == "Wait"
        assert wait["SecondsPath"] == "$.budget.wait.wait_s"
        assert wait["Next"] == stage.name
        # And the waits of one execution stop short of its 5 minutes: past that, the batch
        # goes to the failure path (dead-lettered) instead of timing out unseen
        (guard,) = within["Choices"]
        assert guard["Variable"] == "$.budget.waited_s"
        assert guard["NumericGreaterThan"] == EXPRESS_WAIT_LIMIT_SECS < 300
        too_long = states[guard["Next"]]
        assert too_long["ResultPath"] == "$.failure"
        assert too_long["Next"] == catch_all["Next"]
    # And the deployed max_wait_s, after which extraction defers the batch, fits that limit
    settings = load_settings({"MEMWRITE_CONFIG": f"infra/settings/{env}.json"})
    assert settings.pipeline.model.max_wait_s < EXPRESS_WAIT_LIMIT_SECS
    # And each iteration starts having waited nothing
    selector = definition(synthesized[env])["States"]["Batches"]["ItemSelector"]
    assert selector["budget"] == {"waited_s": 0}


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
