"""What each synthesized function is given, checked against what its code reads and calls:
its environment against `LambdaEnvironment`, the API's methods against the route table,
its model, search and table grants against the deployed settings and `infra/access.py`."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from functions.routes import ROUTES, Auth
from infra.access import EMBEDDING_CALLERS, FUNCTION_ACCESS, LLM_CALLERS, SEARCH_ACCESS
from infra.config import LlmProvider, deployed_settings, settings_file
from infra.stack import bedrock_llm_models, construct_id
from memwrite.config.environment import LambdaEnvironment
from memwrite.config.settings import PipelineConfig
from memwrite.schema import API_KEYS, TABLES
from memwrite.stages import STAGES
from tests.infrastructure.conftest import Synthesized
from tests.infrastructure.test_stacks import resources

ENVS = ("dev", "staging", "prod")
# Read by the Lambda runtime and Powertools, not by memwrite.
RUNTIME_VARIABLES = {
    "POWERTOOLS_SERVICE_NAME",
    "POWERTOOLS_METRICS_NAMESPACE",
    "POWERTOOLS_LOG_LEVEL",
}
# Read by `memwrite.config.settings.load_settings` (LambdaEnvironment.settings).
SETTINGS_VARIABLES = {"MEMWRITE_CONFIG", "MEMWRITE_API_KEYS"}


def function_name(logical_id: str, handler: str) -> str:
    """The `infra/access.py` name of a function: its folder (a stage's is the stage's name)."""
    return handler.split(".")[1]


def our_functions(synth: Synthesized) -> dict[str, dict[str, Any]]:
    """name -> properties of every function running memwrite code (not CDK's helpers)."""
    return {
        function_name(k, r["Properties"]["Handler"]): r["Properties"]
        for k, r in resources(synth, "AWS::Lambda::Function").items()
        if r["Properties"].get("Handler", "").startswith("functions.")
    }


def resolved(value: Any) -> str:
    """A deploy-time value, as CloudFormation would hand it to the function (shape only)."""
    if isinstance(value, str):
        return value
    if "Ref" in value:
        return f"resolved-{value['Ref']}"
    if "Fn::GetAtt" in value:
        target, attribute = value["Fn::GetAtt"]
        if attribute == "Arn":  # a role the function passes on (BATCH_ROLE_ARN)
            return f"resolved-{target}"
        assert attribute == "CollectionEndpoint", value
        return f"https://{target.lower()}.us-east-1.aoss.amazonaws.com"
    if "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(resolved(part) for part in parts)
    raise AssertionError(f"unexpected deploy-time value {value}")


def environment(synth: Synthesized, props: dict[str, Any]) -> dict[str, str]:
    variables = {k: resolved(v) for k, v in props["Environment"]["Variables"].items()}
    # The handler code asset puts infra/settings/ under /var/task.
    deployed = variables["MEMWRITE_CONFIG"]
    assert deployed == f"/var/task/infra/settings/{synth.config.name}.json"
    return {**variables, "MEMWRITE_CONFIG": str(settings_file(synth.config.name))}


@pytest.mark.parametrize("env", ENVS)
def test_every_function_environment_is_what_lambda_environment_reads(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    synth = synthesized[env]
    aliases = {field.alias for field in LambdaEnvironment.model_fields.values() if field.alias}
    functions = our_functions(synth)
    assert set(functions) >= {*(s.name for s in STAGES), *FUNCTION_ACCESS}
    for name, props in functions.items():
        variables = environment(synth, props)
        # Every variable set is one the code reads (no misspelt name silently ignored)
        unknown = set(variables) - aliases - RUNTIME_VARIABLES - SETTINGS_VARIABLES
        assert unknown == set(), (name, unknown)
        # And the model accepts the whole environment (tables, settings file, types)
        loaded = LambdaEnvironment.load(variables)
        assert loaded.settings == deployed_settings(env), name
        assert loaded.turns_table == f"resolved-{next(iter(_table_refs(props, 'TURNS')))}"
        # And what each function needs beyond the tables is there
        if name == "pre_filter":
            assert loaded.queue_url().startswith("resolved-QueuesTurns")
        if name == "dispatch":
            assert loaded.state_machine_arn().startswith("resolved-PipelineStateMachine")
        if name in SEARCH_ACCESS:
            assert loaded.opensearch_endpoint is not None, name
            assert loaded.opensearch_endpoint.startswith("https://search")
            assert loaded.opensearch_service == "aoss"
            assert loaded.opensearch_index == synth.config.search.index_name
        else:
            assert loaded.opensearch_endpoint is None, name
        wants_key = name in LLM_CALLERS and synth.config.llm_provider is LlmProvider.ANTHROPIC
        # The secret's name only, read at run time: never the key, never a resolved reference
        assert loaded.anthropic_api_key is None, name
        assert (loaded.anthropic_api_key_secret is not None) == wants_key, name
        if wants_key:
            assert loaded.anthropic_api_key_secret == synth.config.anthropic_secret_name


def _table_refs(props: dict[str, Any], prefix: str) -> set[str]:
    return {
        v["Ref"]
        for k, v in props["Environment"]["Variables"].items()
        if k.startswith(prefix) and isinstance(v, dict)
    }


def test_table_variables_name_the_tables_of_the_schema(
    synthesized: dict[str, Synthesized],
) -> None:
    functions = our_functions(synthesized["dev"])
    for table in TABLES:
        # The key table is named to the authorizer alone (tests/infrastructure/test_api_keys_infra)
        props = functions["authorizer" if table is API_KEYS else "api"]
        (ref,) = _table_refs(props, f"{table.logical_name.upper()}_TABLE")
        assert ref.startswith("Tables" + table.logical_name.title().replace("_", ""))


def test_the_api_deploys_every_route_of_the_table_to_its_function_with_its_authorization(
    synthesized: dict[str, Synthesized],
) -> None:
    # Given the dev API's methods by (method, path)
    synth = synthesized["dev"]
    paths = {
        k: r["Properties"]["PathPart"]
        for k, r in resources(synth, "AWS::ApiGateway::Resource").items()
    }
    parents = {
        k: r["Properties"]["ParentId"]
        for k, r in resources(synth, "AWS::ApiGateway::Resource").items()
    }

    def path_of(resource_id: str) -> str:
        parts = []
        while resource_id in paths:
            parts.append(paths[resource_id])
            resource_id = parents[resource_id].get("Ref", "")
        return "/" + "/".join(reversed(parts))

    deployed = {}
    for method in resources(synth, "AWS::ApiGateway::Method").values():
        props = method["Properties"]
        key = (props["HttpMethod"], path_of(props["ResourceId"]["Ref"]))
        deployed[key] = props
    # Then they are the route table's, and nothing else
    assert set(deployed) == {(route.method, route.path) for route in ROUTES}
    for route in ROUTES:
        props = deployed[(route.method, route.path)]
        # And each goes to the function its row names, behind the tenant authorizer unless
        # the row is public
        assert construct_id(route.function) in json.dumps(props["Integration"]["Uri"]), route
        expected = "NONE" if route.auth is Auth.PUBLIC else "CUSTOM"
        assert props["AuthorizationType"] == expected, route


def _statements(synth: Synthesized, function_prefix: str) -> list[dict[str, Any]]:
    """Every statement of every policy attached to a function's role (CDK moves what does not
    fit the role's inline policy into managed "overflow" policies)."""
    found = []
    policies = [
        *resources(synth, "AWS::IAM::Policy").values(),
        *resources(synth, "AWS::IAM::ManagedPolicy").values(),
    ]
    for policy in policies:
        roles = json.dumps(policy["Properties"].get("Roles", []))
        if f'"{function_prefix}Role' in roles:
            found.extend(policy["Properties"]["PolicyDocument"]["Statement"])
    return found


def _actions(statement: dict[str, Any]) -> list[str]:
    action = statement["Action"]
    return action if isinstance(action, list) else [action]


@pytest.mark.parametrize("env", ENVS)
def test_only_model_callers_may_invoke_and_only_the_deployed_models(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    synth = synthesized[env]
    settings = deployed_settings(env)
    for name in our_functions(synth):
        # Given the model ARNs the function's role may invoke, as "<kind>/<model id>"
        invoked = {
            re.sub(r"^.*:(foundation-model|inference-profile)/", r"\1/", resolved(resource))
            for statement in _statements(synth, construct_id(name))
            if "bedrock:InvokeModel" in _actions(statement)
            for resource in _listed(statement["Resource"])
        }
        # Then they are exactly the models its code calls with the deployed settings
        expected = set()
        if name in EMBEDDING_CALLERS:
            expected.add(f"foundation-model/{settings.pipeline.search.bedrock_model}")
        if name in LLM_CALLERS and synth.config.llm_provider is not LlmProvider.ANTHROPIC:
            for model in bedrock_llm_models(settings.pipeline):
                expected |= {
                    f"inference-profile/{model}",
                    f"foundation-model/{model.split('.', 1)[1]}",
                }
        assert invoked == expected, name


def test_every_model_a_task_calls_is_granted_once() -> None:
    # Given Nova Lite extracts and Claude Sonnet judges (pipeline.model.tasks)
    sonnet = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
    pipeline = PipelineConfig.model_validate(
        {
            "extract": {"provider": "bedrock-converse", "model": "us.amazon.nova-lite-v1:0"},
            "model": {"tasks": {"dedupe_judge": sonnet, "resolve_judge": sonnet}},
        }
    )
    # Then the model callers may invoke both, and nothing else
    assert bedrock_llm_models(pipeline) == ["us.amazon.nova-lite-v1:0", sonnet]


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def test_hype_invokes_titan_and_with_bedrock_the_claude_model_it_writes_questions_with(
    synthesized: dict[str, Synthesized],
) -> None:
    dev = json.dumps(_statements(synthesized["dev"], "HypeFn"))
    assert "foundation-model/amazon.titan-embed-text-v2:0" in dev
    # dev calls Claude with an API key (its secret readable), not through Bedrock
    assert "anthropic.claude" not in dev and "inference-profile" not in dev
    assert "secretsmanager:GetSecretValue" in dev
    staging = json.dumps(_statements(synthesized["staging"], "HypeFn"))
    assert "inference-profile/us.anthropic.claude-haiku-4-5-20251001-v1:0" in staging


@pytest.mark.parametrize("env", ENVS)
def test_search_access_is_granted_to_exactly_the_functions_that_use_the_index(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    synth = synthesized[env]
    (collection_id,) = resources(synth, "AWS::OpenSearchServerless::Collection")
    for name in our_functions(synth):
        api_access = [
            s for s in _statements(synth, construct_id(name)) if "aoss:APIAccessAll" in _actions(s)
        ]
        if name in SEARCH_ACCESS:
            (statement,) = api_access
            assert statement["Resource"] == {"Fn::GetAtt": [collection_id, "Arn"]}
        else:
            assert api_access == [], name
    # And the data access policy lets each of them do only its kind of access
    (policy,) = resources(synth, "AWS::OpenSearchServerless::AccessPolicy").values()
    text = json.dumps(policy["Properties"]["Policy"])
    for name, access in SEARCH_ACCESS.items():
        assert f"{construct_id(name)}Role" in text, name
        assert access.value in {"read", "read_write", "admin"}
    assert "aoss:WriteDocument" in text and "aoss:CreateIndex" in text


def test_the_api_function_deletes_exactly_the_tables_the_erase_route_touches(
    synthesized: dict[str, Synthesized],
) -> None:
    import inspect

    from memwrite.adapters.aws.dynamodb_erase import EraseTables

    erased = set(inspect.signature(EraseTables).parameters)
    assert erased == {"memories", "entity_facts", "entities", "outbox", "turns", "spans"}
    synth = synthesized["dev"]
    tables = {
        k: next(
            t.logical_name
            for t in TABLES
            if k.startswith("Tables" + t.logical_name.title().replace("_", ""))
        )
        for k in resources(synth, "AWS::DynamoDB::Table")
    }

    def tables_allowed(action: str) -> set[str]:
        return {
            tables[resource["Fn::GetAtt"][0]]
            for statement in _statements(synth, construct_id("api"))
            if action in _actions(statement)
            for resource in statement["Resource"]
            if isinstance(resource, dict) and "Fn::GetAtt" in resource
        }

    assert tables_allowed("dynamodb:DeleteItem") == erased
    # The settings routes read and replace a tenant's settings item: never a delete.
    # And its model calls read (and put) the model budget's shards; the usage route queries
    # the tenant's hours.
    assert tables_allowed("dynamodb:Query") == erased | {"tenant_settings", "budget", "usage"}
    # The rollback route's one transaction (`memwrite.adapters.aws.dynamodb_rollback`) puts
    # memories, fact rows, outbox rows and its record (turns), then its span. Retrieval
    # counters (turns) are updated in place. The backfill route runs the pipeline's stages
    # in-process: resolve_refs writes entities; the import route puts entities (if absent).
    written = {"memories", "entity_facts", "entities", "outbox", "turns", "spans"}
    assert tables_allowed("dynamodb:PutItem") == written | {"tenant_settings", "budget"}
    # Each request adds to its tenant's usage counters (`memwrite.metering`).
    assert tables_allowed("dynamodb:UpdateItem") == written | {"usage"}


def test_tenant_settings_are_read_by_the_functions_that_use_them_and_written_by_api_only(
    synthesized: dict[str, Synthesized],
) -> None:
    from infra.access import FUNCTION_ACCESS, STAGE_ACCESS

    synth = synthesized["dev"]
    (table,) = (
        k for k in resources(synth, "AWS::DynamoDB::Table") if k.startswith("TablesTenantSettings")
    )
    actions = {
        name: {
            action
            for statement in _statements(synth, construct_id(name))
            for resource in statement["Resource"]
            if isinstance(resource, dict) and resource.get("Fn::GetAtt", [None])[0] == table
            for action in _actions(statement)
        }
        for name in (*STAGE_ACCESS, *FUNCTION_ACCESS)
    }
    # The pre-filter (skip patterns, PII, limits), extract and the scheduled backfill
    # (instructions, topics, verifier), hype and the webhook delivery lane (the change feed's
    # webhooks), api (the settings routes, replay, backfill) and expire (a topic sweep: the
    # tenant's own topic terms) read them; only api writes, never a delete
    readers = {name for name, allowed in actions.items() if "dynamodb:GetItem" in allowed}
    writers = {name for name, allowed in actions.items() if "dynamodb:PutItem" in allowed}
    assert readers == {
        "pre_filter",
        "extract",
        "backfill",
        "hype",
        "webhook_delivery",
        "api",
        "expire",
    }
    assert writers == {"api"}
    assert not any("dynamodb:DeleteItem" in allowed for allowed in actions.values())
