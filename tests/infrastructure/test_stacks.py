"""Assertions on the synthesized stacks: what each environment deploys (cdk-nag already passed
in the fixture: an unacknowledged finding fails the synth)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Match

from functions.routes import ROUTES, Auth
from infra.access import STAGE_ACCESS
from infra.pipeline import LAMBDA_TRANSIENT_ERRORS, transient_error_names
from infra.stack import construct_id
from memwrite.adapters.aws.opensearch_index import index_body
from memwrite.client.errors import MemwriteApiError, error_for
from memwrite.config.settings import load_settings
from memwrite.ids import content_hash
from memwrite.schema import OUTBOX, TABLES
from memwrite.stages import STAGES, pipeline_stages, stream_stages
from tests.infrastructure.conftest import Synthesized

ENVS = ("dev", "staging", "prod")


def resources(synth: Synthesized, kind: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in synth.json["Resources"].items() if v["Type"] == kind}


def definition(synth: Synthesized) -> dict[str, Any]:
    from tests.infrastructure.asl import state_machine_definition

    queue_urls = {k: f"https://sqs/{k}" for k in resources(synth, "AWS::SQS::Queue")}
    result: dict[str, Any] = json.loads(state_machine_definition(synth.json, queue_urls))
    return result


@pytest.mark.parametrize("env", ENVS)
def test_every_stage_has_its_lambda_and_the_state_machine_runs_them_in_order(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    # Given the synthesized stack of one environment
    synth = synthesized[env]
    handlers = {
        r["Properties"]["Handler"]
        for r in resources(synth, "AWS::Lambda::Function").values()
        if "Handler" in r["Properties"]
    }
    # Then every stage of STAGES has its function
    for stage in STAGES:
        assert f"functions.{stage.function_dir}.handler.lambda_handler" in handlers
    # And the Map's iteration chains the pipeline stages in the list's order
    states = definition(synth)["States"]["Batches"]["ItemProcessor"]
    order, name = [], states["StartAt"]
    while name in {s.name for s in pipeline_stages()}:
        order.append(name)
        name = states["States"][name]["Next"]
    assert order == [s.name for s in pipeline_stages()]
    assert states["States"][name]["Type"] == "Pass"  # the small status object


@pytest.mark.parametrize("env", ENVS)
def test_every_stage_task_retries_transient_errors_and_catches_the_rest(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    states = definition(synthesized[env])["States"]["Batches"]["ItemProcessor"]["States"]
    for stage in pipeline_stages():
        task = states[stage.name]
        # Then Retry names every TransientError subclass and the Lambda service errors but
        # the wait for the model budget (its Catch: tests/infrastructure/test_model_budget_infra.py)
        (retry,) = task["Retry"]
        assert set(retry["ErrorEquals"]) == {*transient_error_names(), *LAMBDA_TRANSIENT_ERRORS}
        assert "WriteConflict" in retry["ErrorEquals"] and "LlmUnavailable" in retry["ErrorEquals"]
        assert "BudgetWait" not in retry["ErrorEquals"]
        assert retry["IntervalSeconds"] >= 1  # moto and AWS both require it
        # And everything else goes to the failure path: error spans, then the pipeline DLQ
        catch = task["Catch"][-1]
        assert catch["ErrorEquals"] == ["States.ALL"]
        failed = states[catch["Next"]]
        assert failed["Parameters"]["stage"] == stage.name
        record = states[failed["Next"]]
        assert record["Type"] == "Task"
        assert states[record["Next"]]["Resource"] == "arn:aws:states:::sqs:sendMessage"


@pytest.mark.parametrize("env", ENVS)
def test_the_pipeline_is_an_express_machine_fed_by_the_dispatcher(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    synth = synthesized[env]
    synth.template.has_resource_properties(
        "AWS::StepFunctions::StateMachine",
        {"StateMachineType": "EXPRESS", "TracingConfiguration": {"Enabled": True}},
    )
    synth.template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {"BatchSize": 10, "FunctionResponseTypes": ["ReportBatchItemFailures"]},
    )


@pytest.mark.parametrize("env", ENVS)
def test_tables_come_from_the_library_schema(synthesized: dict[str, Synthesized], env: str) -> None:
    tables = list(resources(synthesized[env], "AWS::DynamoDB::Table").values())
    assert len(tables) == len(TABLES)
    by_keys = {json.dumps(t["Properties"]["KeySchema"], sort_keys=True): t for t in tables}
    for schema in TABLES:
        props = next(
            t["Properties"]
            for t in tables
            if {i["IndexName"] for i in t["Properties"].get("GlobalSecondaryIndexes", [])}
            == {i.name for i in schema.indexes}
            and ("TimeToLiveSpecification" in t["Properties"]) == bool(schema.ttl_attribute)
            and ("StreamSpecification" in t["Properties"]) == bool(schema.stream)
        )
        assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
        assert props["SSESpecification"]["SSEEnabled"] is True
        assert props["BillingMode"] == "PAY_PER_REQUEST"
        if schema.stream:
            assert props["StreamSpecification"]["StreamViewType"] == schema.stream.value
    assert by_keys  # every table keyed pk/sk as the schema says
    assert OUTBOX.stream is not None


@pytest.mark.parametrize("env", ENVS)
def test_every_queue_has_a_dlq_or_is_one(synthesized: dict[str, Synthesized], env: str) -> None:
    queues = resources(synthesized[env], "AWS::SQS::Queue")
    with_redrive = {k for k, q in queues.items() if "RedrivePolicy" in q["Properties"]}
    dlqs = {k for k in queues if "Dlq" in k}
    assert with_redrive | dlqs == set(queues)
    assert len(dlqs) == 4  # turns, pipeline, stream, webhook deliveries


@pytest.mark.parametrize("env", ENVS)
def test_no_wildcard_actions_anywhere(synthesized: dict[str, Synthesized], env: str) -> None:
    policies = [
        *resources(synthesized[env], "AWS::IAM::Policy").values(),
        *resources(synthesized[env], "AWS::IAM::ManagedPolicy").values(),
    ]
    for policy in policies:
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = (
                statement["Action"]
                if isinstance(statement["Action"], list)
                else [statement["Action"]]
            )
            assert not any(a == "*" or a.endswith(":*") for a in actions), actions


def _role_statements(synth: Synthesized, function_prefix: str) -> list[dict[str, Any]]:
    """Every statement of a function's role: its default policy's, and those CDK moves to an
    overflow managed policy when the default one outgrows IAM's inline size limit."""
    return [
        statement
        for kind in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy")
        for logical_id, policy in resources(synth, kind).items()
        if logical_id.startswith(f"{function_prefix}Role")
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def _tables_written(synth: Synthesized, function_prefix: str) -> set[str]:
    """Logical ids of the tables a function's role may write."""
    written: set[str] = set()
    for statement in _role_statements(synth, function_prefix):
        actions = (
            statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        )
        if "dynamodb:PutItem" in actions:
            written.update(
                ref["Fn::GetAtt"][0]
                for ref in statement["Resource"]
                if isinstance(ref, dict) and "Fn::GetAtt" in ref
            )
    return written


def _actions_on(synth: Synthesized, function_prefix: str, table_prefix: str) -> set[str]:
    """What a function's role may do to the tables whose logical id starts with the prefix."""
    allowed: set[str] = set()
    for statement in _role_statements(synth, function_prefix):
        resources_ = statement["Resource"]
        named = resources_ if isinstance(resources_, list) else [resources_]
        if any(
            isinstance(ref, dict) and ref.get("Fn::GetAtt", [""])[0].startswith(table_prefix)
            for ref in named
        ):
            actions = statement["Action"]
            allowed.update(actions if isinstance(actions, list) else [actions])
    return allowed


# The logical ids deployed functions were created with. CloudFormation replaces a resource whose
# logical id changes (a new function, role and log group): a rename of a function's folder must
# leave these alone (infra/stack.py `DEPLOYED_CONSTRUCT_IDS` keeps the API function's).
DEPLOYED_LOGICAL_IDS = {
    # functions/api/ was deployed as the query function
    "functions.api.handler.lambda_handler": {
        "AWS::Lambda::Function": "QueryFnFunctionF5715B54",
        "AWS::Logs::LogGroup": "QueryFnLogsB265B84B",
        "AWS::IAM::Role": "QueryFnRoleF81C2916",
    },
    # functions/pre_filter/ was deployed as the ingest function (its id was the stage's already)
    "functions.pre_filter.handler.lambda_handler": {
        "AWS::Lambda::Function": "PreFilterFnFunctionAA87E088",
    },
}


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_renamed_functions_keep_the_logical_ids_they_were_deployed_with(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    # Given the stack's functions by handler
    synth = synthesized[env]
    by_handler = {
        r["Properties"].get("Handler"): k
        for k, r in resources(synth, "AWS::Lambda::Function").items()
    }
    for handler, deployed in DEPLOYED_LOGICAL_IDS.items():
        # Then each is the resource first deployed, with its log group and role
        assert by_handler[handler] == deployed["AWS::Lambda::Function"], handler
        for kind, logical_id in deployed.items():
            assert logical_id in resources(synth, kind), (handler, kind)


def test_roles_follow_the_declared_access(synthesized: dict[str, Synthesized]) -> None:
    # Given the dev stack
    synth = synthesized["dev"]
    # Then the dispatcher starts executions and writes no table
    dispatch = [
        a
        for s in _role_statements(synth, "DispatchFn")
        for a in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])
    ]
    assert "states:StartExecution" in dispatch
    assert "states:StartSyncExecution" not in dispatch  # it waits for no run
    assert _tables_written(synth, "DispatchFn") == set()
    # And dedupe and conflict write only spans (and dedupe, which calls the model, the model
    # budget's shards); persist writes the store
    for reader, written in (("DedupeFn", {"Spans", "Budge"}), ("ConflictFn", {"Spans"})):
        assert {t.removeprefix("Tables")[:5] for t in _tables_written(synth, reader)} == written
    persisted = {
        t.removeprefix("Tables").rstrip("0123456789ABCDEF")
        for t in _tables_written(synth, "PersistFn")
    }
    assert persisted >= {"Memories", "EntityFacts", "Outbox", "Turns", "Spans"}
    # And persist's transaction may check its source trace; the erase route may mark it erased
    assert "dynamodb:ConditionCheckItem" in _actions_on(synth, "PersistFn", "TablesTurns")
    assert "dynamodb:UpdateItem" in _actions_on(synth, construct_id("api"), "TablesTurns")
    assert set(STAGE_ACCESS) >= {s.name for s in STAGES}


@pytest.mark.parametrize("env", ENVS)
def test_the_api_authenticates_with_the_tenant_authorizer_and_throttles(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    synth = synthesized[env]
    synth.template.has_resource_properties(
        "AWS::ApiGateway::Authorizer",
        {"Type": "REQUEST", "IdentitySource": "method.request.header.x-api-key"},
    )
    methods = resources(synth, "AWS::ApiGateway::Method").values()
    # Every method but the public OpenAPI document (test_function_wiring checks which one)
    authorized = [
        m["Properties"]["AuthorizationType"]
        for m in methods
        if m["Properties"]["HttpMethod"] != "OPTIONS"
    ]
    assert authorized.count("NONE") == sum(route.auth is Auth.PUBLIC for route in ROUTES)
    assert {kind for kind in authorized if kind != "NONE"} == {"CUSTOM"}
    throttling = synth.config.throttling
    synth.template.has_resource_properties(
        "AWS::ApiGateway::Stage",
        {
            "MethodSettings": Match.array_with(
                [
                    Match.object_like(
                        {
                            "ThrottlingRateLimit": throttling.rate_per_sec,
                            "ThrottlingBurstLimit": throttling.burst,
                        }
                    )
                ]
            )
        },
    )


@pytest.mark.parametrize("env", ["dev"])
def test_the_gateways_own_errors_have_the_handlers_shape_and_the_clients_codes(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    answers = {
        props["ResponseType"]: props
        for props in (
            r["Properties"]
            for r in resources(synthesized[env], "AWS::ApiGateway::GatewayResponse").values()
        )
    }
    # Refusals before any handler runs: no key, a denied key, throttling, anything else
    assert {"UNAUTHORIZED", "ACCESS_DENIED", "THROTTLED", "DEFAULT_4XX", "DEFAULT_5XX"} <= set(
        answers
    )
    for kind, props in answers.items():
        template = props["ResponseTemplates"]["application/json"]
        # `$context.error.messageString` is already a quoted JSON string
        body = json.loads(template.replace("$context.error.messageString", '"Unauthorized"'))
        assert set(body) == {"error", "message"}, kind
        status = props.get("StatusCode")
        if status is not None:
            # The client raises the exception of that status, and its code is the body's
            error = error_for(int(status), body)
            assert type(error) is not MemwriteApiError, kind
            assert error.code == type(error).code == body["error"], kind
    assert answers["THROTTLED"]["ResponseParameters"]["gatewayresponse.header.Retry-After"]


@pytest.mark.parametrize("env", ENVS)
def test_dashboard_has_a_section_per_stage_and_the_alarms_exist(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    synth = synthesized[env]
    (dashboard,) = resources(synth, "AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    for stage in STAGES:
        assert f"## {stage.name} ({stage.placement.value})" in body
    alarms = resources(synth, "AWS::CloudWatch::Alarm")
    names = " ".join(alarms)
    for stage in STAGES:
        assert f"{stage.name}ErrorRate".replace("_", "") in names.replace("_", "")
    for stage in stream_stages():  # hype: the outbox lag, its outcomes, the stream DLQ
        for title in ("outbox lag", "errors", "records given up (stream DLQ)"):
            assert f"{stage.name}: {title}" in body
        assert f"{stage.name}OutboxLag" in names
    for queue in ("TurnsDlq", "PipelineDlq", "StreamDlq"):
        assert f"{queue}Depth" in names
    rate = next(a for k, a in alarms.items() if "PrefilterRejectionRateShift" in k)
    assert rate["Properties"]["ThresholdMetricId"] == "band"


def dashboard_widgets(synth: Synthesized) -> dict[str, dict[str, Any]]:
    """The dashboard's widgets by title, its body joined with each deploy-time token as "?"."""
    (dashboard,) = resources(synth, "AWS::CloudWatch::Dashboard").values()
    body = dashboard["Properties"]["DashboardBody"]
    parts = body["Fn::Join"][1] if isinstance(body, dict) else [body]
    text = "".join(part if isinstance(part, str) else "?" for part in parts)
    widgets = json.loads(text)["widgets"]
    return {w["properties"]["title"]: w for w in widgets if "title" in w.get("properties", {})}


def expressions(widget: dict[str, Any]) -> list[str]:
    return [
        entry["expression"]
        for line in widget["properties"]["metrics"]
        for entry in line
        if isinstance(entry, dict) and "expression" in entry
    ]


@pytest.mark.parametrize("env", ENVS)
def test_malformed_llm_output_is_shown_only_for_stages_that_read_model_answers(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    titles = set(dashboard_widgets(synthesized[env]))
    malformed = {t.split(":")[0] for t in titles if t.endswith("/ malformed LLM output")}
    assert malformed == {"extract", "resolve_refs", "dedupe", "persist"}
    assert "pre_filter: passed / transformed" in titles


@pytest.mark.parametrize("env", ENVS)
def test_the_dashboard_shows_llm_cost_and_tokens_for_every_stage_that_calls_a_model(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    widgets = dashboard_widgets(synthesized[env])
    # The overview: cost per stage and model, their total, and the total over the time range
    cost = expressions(widgets["LLM cost (USD per 5 min) by stage and model"])
    assert any('MetricName="llm.cost_usd"' in e and not e.startswith("SUM") for e in cost)
    assert any(e.startswith("SUM(SEARCH(") and "llm.cost_usd" in e for e in cost)
    total = widgets["LLM cost (USD) over the dashboard's time range"]["properties"]
    assert total["view"] == "singleValue" and total["setPeriodToTimeRange"] is True
    # Each stage that calls a model: its calls and cost, its tokens in and out, by model
    for stage in STAGES:
        calls_cost = widgets.get(f"{stage.name}: LLM calls / cost (USD)")
        tokens = widgets.get(f"{stage.name}: LLM tokens in / out")
        if not stage.calls_model:
            assert calls_cost is None and tokens is None, stage.name
            continue
        assert calls_cost is not None and tokens is not None, stage.name
        for widget, metrics in (
            (calls_cost, ("llm.calls", "llm.cost_usd")),
            (tokens, ("llm.input_tokens", "llm.output_tokens")),
        ):
            searches = expressions(widget)
            for metric in metrics:
                assert any(
                    f'MetricName="{metric}" Stage="{stage.name}"' in e
                    and "{memwrite,Model,Stage}" in e
                    for e in searches
                ), (stage.name, metric)


@pytest.mark.parametrize("env", ENVS)
def test_the_stream_stage_gets_the_outbox_stream_the_index_and_the_lag_alarm(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    # Given the stack of STAGES, whose hype stage is placed on the outbox stream
    synth = synthesized[env]
    (stream_stage,) = stream_stages()
    # Then its Lambda consumes the outbox stream with partial batch responses and a DLQ
    (mapping,) = [
        m
        for m in resources(synth, "AWS::Lambda::EventSourceMapping").values()
        if "StartingPosition" in m["Properties"]
    ]
    props = mapping["Properties"]
    assert props["EventSourceArn"]["Fn::GetAtt"][1] == "StreamArn"
    assert props["EventSourceArn"]["Fn::GetAtt"][0].startswith("TablesOutbox")
    assert props["FunctionName"]["Ref"].startswith(
        "".join(p.title() for p in stream_stage.name.split("_")) + "Fn"
    )
    assert props["StartingPosition"] == "TRIM_HORIZON"
    assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert props["BisectBatchOnFunctionError"] is True
    assert props["DestinationConfig"]["OnFailure"]["Destination"]["Fn::GetAtt"][0].startswith(
        "QueuesStreamDlq"
    )
    # And the search collection with its policies and the deploy-time index step exists
    synth.template.resource_count_is("AWS::OpenSearchServerless::Collection", 1)
    synth.template.resource_count_is("AWS::OpenSearchServerless::SecurityPolicy", 2)
    synth.template.resource_count_is("AWS::OpenSearchServerless::AccessPolicy", 1)
    synth.template.resource_count_is("AWS::CloudFormation::CustomResource", 1)
    assert any(
        f"{stream_stage.name}OutboxLag" in k for k in resources(synth, "AWS::CloudWatch::Alarm")
    )


@pytest.mark.parametrize("env", ENVS)
def test_deployed_settings_match_the_environment(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    from infra.layer import REPO

    config = synthesized[env].config
    settings = load_settings({"MEMWRITE_CONFIG": str(REPO / "infra" / "settings" / f"{env}.json")})
    assert settings.pipeline.search.embedder == "bedrock"  # Titan v2 on AWS
    # The layer has no WordLlama (the `local` extra): dedupe compares with the hashing embedder
    assert settings.pipeline.dedupe.embedder == "hashing"
    assert settings.pipeline.extract.provider == config.llm_provider.value


@pytest.mark.parametrize("env", ENVS)
def test_cfn_lint_is_clean(synthesized: dict[str, Synthesized], env: str) -> None:
    # W3005: CDK makes each function depend on its role's policy explicitly (DependsOn) so
    # the policy exists before the first invocation; cfn-lint calls that redundant.
    result = subprocess.run(
        [
            str(Path(sys.executable).parent / "cfn-lint"),
            "--ignore-checks",
            "W3005",
            "--",
            str(synthesized[env].template_file),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_layer_holds_the_library_and_runtime_dependencies_only() -> None:
    from infra.layer import LOCAL_ONLY_DEPENDENCIES, layer_requirements

    requirements = layer_requirements()
    assert any(r.startswith("pydantic==") for r in requirements)
    assert not any(r.split("==")[0] in LOCAL_ONLY_DEPENDENCIES for r in requirements)
    assert not any(
        r.startswith(("moto", "aws-cdk-lib", "pytest", "wordllama")) for r in requirements
    )
    # The `server` extra is what the functions run on; the client and MCP extras are not
    assert any(r.startswith(("boto3==", "aws-lambda-powertools[")) for r in requirements)
    assert not any(r.startswith(("httpx", "mcp")) for r in requirements)


def schedule_of(synth: Synthesized, function_prefix: str) -> dict[str, Any]:
    """The properties of the one schedule that invokes the function."""
    (properties,) = (
        schedule["Properties"]
        for schedule in resources(synth, "AWS::Scheduler::Schedule").values()
        if schedule["Properties"]["Target"]["Arn"]["Fn::GetAtt"][0].startswith(function_prefix)
    )
    return properties


@pytest.mark.parametrize("env", ENVS)
def test_the_backfill_schedule_is_on_by_default(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    # Given a synthesized environment (none turns the backfill off)
    synth = synthesized[env]
    # Then one EventBridge schedule invokes the backfill function, enabled, without retries
    properties = schedule_of(synth, "BackfillFn")
    assert synth.config.backfill_schedule_enabled
    assert properties["State"] == "ENABLED"
    assert properties["ScheduleExpression"] == synth.config.backfill_schedule
    assert properties["Target"]["Arn"]["Fn::GetAtt"][0].startswith("BackfillFn")
    assert properties["Target"]["RetryPolicy"] == {"MaximumRetryAttempts": 0}


@pytest.mark.parametrize("env", ENVS)
def test_the_expiry_sweep_runs_on_a_schedule_with_the_store_writes_it_makes_only(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    # Given a synthesized environment
    synth = synthesized[env]
    # Then an enabled schedule invokes the expire function every few minutes, without retries
    properties = schedule_of(synth, "ExpireFn")
    assert properties["State"] == "ENABLED"
    assert properties["ScheduleExpression"] == synth.config.expiry_schedule == "rate(5 minutes)"
    assert properties["Target"]["RetryPolicy"] == {"MaximumRetryAttempts": 0}
    # And the schedule's role may invoke that function alone
    (role_id,) = (
        k
        for k, role in resources(synth, "AWS::IAM::Role").items()
        if k.startswith("ExpiryScheduleRole")
    )
    assert properties["Target"]["RoleArn"] == {"Fn::GetAtt": [role_id, "Arn"]}
    invoked = {
        ref["Fn::GetAtt"][0]
        for k, policy in resources(synth, "AWS::IAM::Policy").items()
        if k.startswith("ExpiryScheduleRole")
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        for ref in statement["Resource"]
        if isinstance(ref, dict) and "Fn::GetAtt" in ref
    }
    assert invoked and all(target.startswith("ExpireFn") for target in invoked)
    # And the function reads and puts memories (the due index, the new rev) and outbox rows;
    # a topic sweep handed to it also deletes memories (fact rows, outbox, spans) and episodes
    # (turns): it writes no other table, reads the tenants' settings, and no model
    written = {
        t.removeprefix("Tables").rstrip("0123456789ABCDEF")
        for t in _tables_written(synth, "ExpireFn")
    }
    assert written == {"Memories", "Outbox", "EntityFacts", "Turns", "Spans"}
    memories = _actions_on(synth, "ExpireFn", "TablesMemories")
    assert {"dynamodb:Query", "dynamodb:BatchGetItem", "dynamodb:PutItem"} <= memories
    assert "dynamodb:PutItem" not in _actions_on(synth, "ExpireFn", "TablesTenantSettings")
    # And the api function hands it a topic sweep: it names it and may invoke it
    (api_fn,) = (
        props
        for k, props in resources(synth, "AWS::Lambda::Function").items()
        if k.startswith("QueryFn")
    )
    sweep_fn = api_fn["Properties"]["Environment"]["Variables"]["TOPIC_SWEEP_FUNCTION"]
    assert sweep_fn["Ref"].startswith("ExpireFn")
    assert "lambda:InvokeFunction" in _actions_on(synth, "QueryFn", "ExpireFn")
    actions = {
        action
        for statement in _role_statements(synth, "ExpireFn")
        for action in (
            statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        )
    }
    assert not any(a.startswith(("aoss:", "bedrock:", "events:")) for a in actions)


@pytest.mark.parametrize("env", ["dev"])
def test_a_field_added_to_the_index_mapping_makes_the_deploy_update_the_index(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    # Given the index setup resource (CloudFormation runs its Update only when a property
    # changes)
    [setup] = resources(synthesized[env], "AWS::CloudFormation::CustomResource").values()
    mapping = index_body(1)["mappings"]

    # Then it carries the mapping's identity: another field would be another value
    assert setup["Properties"]["mapping"] == content_hash(json.dumps(mapping, sort_keys=True))
    grown = {**mapping, "properties": {**mapping["properties"], "new": {"type": "keyword"}}}
    assert content_hash(json.dumps(grown, sort_keys=True)) != setup["Properties"]["mapping"]
