"""The shape that holds at scale (docs/scale.md): intake derived from the model limits, a
high-throughput FIFO turn queue, no function waiting on a pipeline run, per-tenant API
quotas (the backfill's schedule, on by default, is in test_stacks)."""

from __future__ import annotations

from typing import Any

import pytest

from functions.routes import ROUTES, Auth
from infra.scaling import turn_queue_concurrency, webhook_lane_concurrency
from memwrite.adapters.aws.apigateway_plans import DEFAULT_PLAN_TAG
from memwrite.config.model_limits import ModelLimits
from memwrite.config.settings import Settings, load_settings
from memwrite.schema import API_KEYS_LISTING, TURNS_PENDING_EPISODES
from tests.infrastructure.conftest import Synthesized
from tests.infrastructure.test_stacks import definition, resources

ENVS = ("dev", "staging", "prod")


def _queue(synth: Synthesized, prefix: str) -> dict[str, Any]:
    (queue,) = (
        q["Properties"]
        for k, q in resources(synth, "AWS::SQS::Queue").items()
        if k.startswith(prefix) and "Dlq" not in k
    )
    return queue


def _event_source_of(synth: Synthesized, queue_prefix: str) -> dict[str, Any]:
    (mapping,) = (
        m["Properties"]
        for m in resources(synth, "AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]
        .get("EventSourceArn", {})
        .get("Fn::GetAtt", [""])[0]
        .startswith(queue_prefix)
    )
    return mapping


def _deployed(env: str) -> Settings:
    return load_settings({"MEMWRITE_CONFIG": f"infra/settings/{env}.json"})


@pytest.mark.parametrize("env", ENVS)
def test_the_turn_queue_is_high_throughput_fifo(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    # Given the synthesized turn queue
    queue = _queue(synthesized[env], "QueuesTurns")
    # Then deduplication and the throughput quota are per message group (tenant and user)
    assert queue["FifoQueue"] is True
    assert queue["DeduplicationScope"] == "messageGroup"
    assert queue["FifoThroughputLimit"] == "perMessageGroupId"
    assert queue.get("ContentBasedDeduplication", False) is False  # the turn id is the dedup id


@pytest.mark.parametrize("env", ENVS)
def test_both_queue_event_sources_take_in_what_the_model_limits_sustain(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    # Given the model budget's limits an environment deploys for its extraction model, and
    # the max_tokens each call reserves
    synth = synthesized[env]
    pipeline = _deployed(env).pipeline
    limits = pipeline.model.limits_for(pipeline.extract.provider, pipeline.extract.model)
    max_tokens = pipeline.extract.max_output_tokens
    # Then the turn queue's event source is capped at the concurrency derived from them
    turns = _event_source_of(synth, "QueuesTurns")
    assert turns["ScalingConfig"] == {
        "MaximumConcurrency": turn_queue_concurrency(limits, max_tokens)
    }
    assert turns["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    # And so is the webhook lane's
    webhooks = _event_source_of(synth, "WebhookLaneQueue")
    assert webhooks["ScalingConfig"] == {
        "MaximumConcurrency": webhook_lane_concurrency(limits, max_tokens)
    }
    # And each within CloudFormation's bounds
    for mapping in (turns, webhooks):
        assert 2 <= mapping["ScalingConfig"]["MaximumConcurrency"] <= 1_000


def test_larger_model_limits_take_in_more() -> None:
    # Given limits where the output tokens bind, and the same limits doubled
    limits = ModelLimits(
        requests_per_minute=100_000,
        input_tokens_per_minute=100_000_000,
        output_tokens_per_minute=800_000,
    )
    doubled = limits.model_copy(
        update={name: 2 * value for name, value in limits.model_dump().items()}
    )
    # Then the derived intake grows with them, and a smaller max_tokens reservation lets more in
    assert turn_queue_concurrency(doubled, 8_192) > turn_queue_concurrency(limits, 8_192)
    assert turn_queue_concurrency(limits, 1_024) > turn_queue_concurrency(limits, 8_192)


@pytest.mark.parametrize("env", ENVS)
def test_no_function_waits_for_a_pipeline_run(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    # Given the dispatcher's grants and timeout
    synth = synthesized[env]
    actions = {
        action
        for policy in resources(synth, "AWS::IAM::Policy").values()
        if any(
            role["Ref"].startswith("DispatchFn") for role in policy["Properties"].get("Roles", [])
        )
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        for action in (
            statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        )
    }
    # Then it may start executions asynchronously, never synchronously
    assert "states:StartExecution" in actions
    assert "states:StartSyncExecution" not in actions
    (dispatcher,) = (
        f["Properties"]
        for k, f in resources(synth, "AWS::Lambda::Function").items()
        if k.startswith("DispatchFn")
    )
    assert dispatcher["Timeout"] <= 30  # well under an Express run's 5 minutes


@pytest.mark.parametrize("env", ENVS)
def test_the_state_machine_routes_its_own_failures_to_the_dlq(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    # Given the state machine's definition
    states = definition(synthesized[env])["States"]
    batches = states["Batches"]
    inner = batches["ItemProcessor"]["States"]
    # Then the failure path of an iteration writes error spans (dead_letter), then the DLQ
    assert inner["Record failure"]["Type"] == "Task"
    assert inner["Record failure"]["Next"] == "Send to DLQ"
    # And a failure of the Map as a whole sends every batch of the execution to the DLQ
    (catch,) = batches["Catch"]
    assert catch["ErrorEquals"] == ["States.ALL"]
    send = states[catch["Next"]]
    assert send["Resource"] == "arn:aws:states:::sqs:sendMessage"
    assert send["Parameters"]["MessageBody"]["batches.$"] == "$.batches"
    assert send["Retry"][0]["ErrorEquals"] == ["States.ALL"]
    # And still one Lambda task per pipeline stage (the state machine is the only runner)
    lambda_tasks = [s for s in inner.values() if s.get("Resource", "").endswith(":lambda:invoke")]
    functions = {s["Parameters"]["FunctionName"]["Fn::GetAtt"][0] for s in lambda_tasks}
    assert len(lambda_tasks) == len(functions)


@pytest.mark.parametrize("env", ENVS)
def test_each_tenant_has_its_own_quota_through_a_usage_plan(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    synth = synthesized[env]
    # Given the API: its usage keys come from the authorizer, never from a header
    (api,) = resources(synth, "AWS::ApiGateway::RestApi").values()
    assert api["Properties"]["ApiKeySourceType"] == "AUTHORIZER"
    # Then every keyed method is counted against the caller's usage plan; the public one not
    methods = [
        m["Properties"]
        for m in resources(synth, "AWS::ApiGateway::Method").values()
        if m["Properties"]["HttpMethod"] != "OPTIONS"
    ]
    keyed = [m for m in methods if m["AuthorizationType"] == "CUSTOM"]
    assert len(keyed) == sum(route.auth is Auth.API_KEY for route in ROUTES)
    assert all(m["ApiKeyRequired"] is True for m in keyed)
    assert not any(m.get("ApiKeyRequired") for m in methods if m["AuthorizationType"] == "NONE")
    # And one usage plan per configured plan, on the API's stage, with its limits
    plans = {
        p["Properties"]["UsagePlanName"]: p["Properties"]
        for p in resources(synth, "AWS::ApiGateway::UsagePlan").values()
    }
    assert set(plans) == {f"{synth.config.stack_name}-{name}" for name in synth.config.api_plans}
    for name, plan in synth.config.api_plans.items():
        deployed = plans[f"{synth.config.stack_name}-{name}"]
        assert deployed["Throttle"] == {"RateLimit": plan.rate_per_sec, "BurstLimit": plan.burst}
        if plan.requests_per_day:
            assert deployed["Quota"] == {"Limit": plan.requests_per_day, "Period": "DAY"}
        else:
            assert "Quota" not in deployed
        assert len(deployed["ApiStages"]) == 1
    # And the first is the default plan, tagged with the key table `memwrite keys create` names
    tagged = {
        name: [t["Value"] for t in plan.get("Tags", []) if t["Key"] == DEFAULT_PLAN_TAG]
        for name, plan in plans.items()
    }
    table = synth.json["Outputs"]["ApiKeysTable"]["Value"]
    default = f"{synth.config.stack_name}-{next(iter(synth.config.api_plans))}"
    assert tagged.pop(default) == [table]
    assert not any(tagged.values())
    # And a tenant on no plan yet is told so in the handlers' error shape
    responses = {
        r["Properties"]["ResponseType"]: r["Properties"]
        for r in resources(synth, "AWS::ApiGateway::GatewayResponse").values()
    }
    assert responses["INVALID_API_KEY"]["StatusCode"] == "403"


@pytest.mark.parametrize("env", ["prod"])
def test_the_backfill_and_the_key_listing_read_sparse_indexes(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    # Given the deployed tables' indexes
    indexes = {
        index["IndexName"]: index
        for table in resources(synthesized[env], "AWS::DynamoDB::Table").values()
        for index in table["Properties"].get("GlobalSecondaryIndexes", [])
    }
    # Then the pending episodes are listed by shard and user, keys only (what the backfill reads)
    pending = indexes[TURNS_PENDING_EPISODES.name]
    assert [k["AttributeName"] for k in pending["KeySchema"]] == ["pending_shard", "pending_user"]
    assert pending["Projection"] == {"ProjectionType": "KEYS_ONLY"}
    # And the API keys by shard and tenant (what `memwrite keys list` reads)
    listing = indexes[API_KEYS_LISTING.name]
    assert [k["AttributeName"] for k in listing["KeySchema"]] == ["listing_shard", "listing_sort"]


@pytest.mark.parametrize("env", ENVS)
def test_only_the_api_and_the_backfill_itself_may_invoke_the_backfill_function(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    # Given the deployed functions and every policy statement that allows a Lambda invoke
    functions = resources(synthesized[env], "AWS::Lambda::Function")
    (backfill,) = (k for k in functions if k.startswith("BackfillFn"))
    (api,) = (k for k in functions if k.startswith("QueryFn"))
    role_of = {k: f["Properties"]["Role"]["Fn::GetAtt"][0] for k, f in functions.items()}
    function_roles = set(role_of.values())  # the custom resource's framework invokes too
    invoking: dict[str, list[Any]] = {}
    policies = [
        *resources(synthesized[env], "AWS::IAM::Policy").values(),
        *resources(synthesized[env], "AWS::IAM::ManagedPolicy").values(),  # CDK's overflow
    ]
    for policy in policies:
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"]
            if "lambda:InvokeFunction" in (actions if isinstance(actions, list) else [actions]):
                for role in policy["Properties"]["Roles"]:
                    if role["Ref"] in function_roles:
                        invoking.setdefault(role["Ref"], []).append(statement["Resource"])
    # Then, of the functions, the api function and the backfill function itself (its fan-out)
    # alone may invoke the backfill function; the backfill invokes nothing else, the api
    # besides it only the expire function (a topic sweep)
    backfill_arn = {"Fn::GetAtt": [backfill, "Arn"]}
    assert sorted(r for r, granted in invoking.items() if backfill_arn in granted) == sorted(
        [role_of[api], role_of[backfill]]
    )
    assert invoking[role_of[backfill]] == [backfill_arn]
    (expire,) = (k for k in functions if k.startswith("ExpireFn"))
    expire_arn = {"Fn::GetAtt": [expire, "Arn"]}
    assert sorted(map(str, invoking[role_of[api]])) == sorted(
        map(str, [backfill_arn, [expire_arn, {"Fn::Join": ["", [expire_arn, ":*"]]}]])
    )
    # And the api function names it, for its asynchronous invoke
    variables = functions[api]["Properties"]["Environment"]["Variables"]
    assert variables["BACKFILL_FUNCTION_NAME"] == {"Ref": backfill}
