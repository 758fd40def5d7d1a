"""API keys on AWS: no key in the template, the settings or any function's environment; the
authorizer alone reads the key table (hashes), and nothing deployed writes it (the operator's
`memwrite keys` does)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra.config import settings_file
from memwrite.auth.api_keys import KEY_PREFIX
from memwrite.config.settings import load_settings
from tests.infrastructure.conftest import Synthesized
from tests.infrastructure.test_stacks import resources

ENVS = ("dev", "staging", "prod")
_KEY_TABLE = "TablesApiKeys"
# CDK's read grant (grant_read_data): item reads, plus stream reads (the table has no stream).
_READ_ACTIONS = {
    "dynamodb:GetItem",
    "dynamodb:Query",
    "dynamodb:Scan",
    "dynamodb:BatchGetItem",
    "dynamodb:ConditionCheckItem",
    "dynamodb:DescribeTable",
    "dynamodb:GetRecords",
    "dynamodb:GetShardIterator",
}
_WRITE_ACTIONS = {
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:BatchWriteItem",
}


def _names_key_table(resource: Any) -> bool:
    return _KEY_TABLE in json.dumps(resource)


def _actions_on_key_table(synth: Synthesized) -> dict[str, set[str]]:
    """Role logical id -> what it may do to the key table (or its index)."""
    allowed: dict[str, set[str]] = {}
    for policy in resources(synth, "AWS::IAM::Policy").values():
        for role in policy["Properties"].get("Roles", []):
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                if _names_key_table(statement["Resource"]):
                    actions = statement["Action"]
                    allowed.setdefault(role["Ref"], set()).update(
                        actions if isinstance(actions, list) else [actions]
                    )
    return allowed


@pytest.mark.parametrize("env", ENVS)
def test_no_api_key_in_the_template_the_settings_or_an_environment(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    synth = synthesized[env]
    # Given the synthesized template and the settings file the functions deploy with
    template = json.dumps(synth.json)
    # Then no key, no key variable, no key setting is in either
    assert KEY_PREFIX not in template
    assert "MEMWRITE_API_KEYS" not in template
    assert "api-keys" not in template  # no secret of keys either (hashes live in the table)
    assert load_settings({"MEMWRITE_CONFIG": str(settings_file(env))}).api_keys == {}
    for function in resources(synth, "AWS::Lambda::Function").values():
        variables = function["Properties"].get("Environment", {}).get("Variables", {})
        # (the model's key: its secret's name only, read at run time; test_secrets.py)
        assert not {name for name in variables if "API_KEYS" in name} - {"API_KEYS_TABLE"}


@pytest.mark.parametrize("env", ENVS)
def test_only_the_authorizer_reads_the_key_table_and_nothing_deployed_writes_it(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    synth = synthesized[env]
    # Given what every role may do to the key table
    allowed = _actions_on_key_table(synth)
    # Then exactly one role has access, the authorizer's, and it may read but not write
    assert len(allowed) == 1, allowed
    ((role, actions),) = allowed.items()
    assert role.startswith("AuthorizerFnRole")
    assert "dynamodb:GetItem" in actions
    assert actions <= _READ_ACTIONS
    assert not actions & _WRITE_ACTIONS
    # And only the authorizer is told the table's name
    told = [
        logical_id
        for logical_id, function in resources(synth, "AWS::Lambda::Function").items()
        if "API_KEYS_TABLE" in function["Properties"].get("Environment", {}).get("Variables", {})
    ]
    assert len(told) == 1 and told[0].startswith("AuthorizerFn")
    variable = resources(synth, "AWS::Lambda::Function")[told[0]]["Properties"]["Environment"]
    assert variable["Variables"]["API_KEYS_TABLE"]["Ref"].startswith(_KEY_TABLE)


@pytest.mark.parametrize("env", ENVS)
def test_the_key_table_is_an_output_for_memwrite_keys(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    outputs = synthesized[env].json["Outputs"]
    assert outputs["ApiKeysTable"]["Value"]["Ref"].startswith(_KEY_TABLE)


def test_settings_naming_api_keys_fail_the_synth(tmp_path, monkeypatch) -> None:
    from infra import config
    from memwrite.errors import ConfigError

    # Given an environment's settings file that names a key
    path = tmp_path / "dev.json"
    path.write_text(json.dumps({"api_keys": {"plain-key": "acme"}}), encoding="utf-8")
    monkeypatch.setattr(config, "settings_file", lambda name: path)
    # Then the stack refuses it before anything is deployed
    with pytest.raises(ConfigError, match="api_keys"):
        config.deployed_settings("dev")
