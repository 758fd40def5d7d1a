"""The usage meter on AWS, synthesized: its table (key design from `memwrite.schema.USAGE`),
UpdateItem for exactly the functions that meter a tenant's work, the query for the api
function's `GET /v1/usage`, and nothing for the rest."""

from __future__ import annotations

import pytest

from infra.access import USAGE_WRITERS
from infra.stack import construct_id
from memwrite.schema import USAGE
from tests.infrastructure.conftest import Synthesized
from tests.infrastructure.test_stacks import ENVS, _actions_on, resources

USAGE_TABLE_PREFIX = "TablesUsage"
WRITES = {"dynamodb:PutItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"}


@pytest.mark.parametrize("env", ENVS)
def test_the_usage_table_is_keyed_by_tenant_and_hour(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    # Given the stack
    (table,) = (
        table
        for logical_id, table in resources(synthesized[env], "AWS::DynamoDB::Table").items()
        if logical_id.startswith(USAGE_TABLE_PREFIX)
    )
    # Then the usage table has the schema's keys (tenant, hour), on demand, no TTL
    properties = table["Properties"]
    assert properties["KeySchema"] == [
        {"AttributeName": USAGE.partition_key, "KeyType": "HASH"},
        {"AttributeName": USAGE.sort_key, "KeyType": "RANGE"},
    ]
    assert properties["BillingMode"] == "PAY_PER_REQUEST"
    assert "TimeToLiveSpecification" not in properties


def test_every_function_that_meters_may_add_to_the_counters_only(
    synthesized: dict[str, Synthesized],
) -> None:
    synth = synthesized["dev"]
    metering = ("pre_filter", "extract", "resolve_refs", "dedupe", "persist", "hype", "backfill")
    for name in (*metering, "api"):
        assert name in USAGE_WRITERS
        # Then it may add to an hour's counters, never replace or delete one
        actions = _actions_on(synth, construct_id(name), USAGE_TABLE_PREFIX)
        assert "dynamodb:UpdateItem" in actions, name
        assert not actions & WRITES, name
        # And only the api function (its usage route) reads them
        reads = {"dynamodb:Query", "dynamodb:GetItem", "dynamodb:Scan"}
        assert bool(actions & reads) is (name == "api"), name
    # And a function that meters nothing has no access at all
    for name in ("dispatch", "authorizer", "conflict", "dead_letter", "webhook_delivery", "expire"):
        assert name not in USAGE_WRITERS
        assert _actions_on(synth, construct_id(name), USAGE_TABLE_PREFIX) == set(), name


@pytest.mark.parametrize("env", ENVS)
def test_usage_the_meter_could_not_count_raises_an_alarm(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    # Given the stack / Then one refused add to the usage table (the meter's
    # `usage.unmetered`, Stage usage) pages within one 5-minute period
    alarms = resources(synthesized[env], "AWS::CloudWatch::Alarm")
    (alarm,) = (a for logical_id, a in alarms.items() if "UsageUnmetered" in logical_id)
    properties = alarm["Properties"]
    assert properties["MetricName"] == "usage.unmetered"
    assert properties["Dimensions"] == [{"Name": "Stage", "Value": "usage"}]
    assert (properties["Statistic"], properties["Threshold"]) == ("Sum", 1)
    assert properties["EvaluationPeriods"] == 1
    assert properties["AlarmActions"]
