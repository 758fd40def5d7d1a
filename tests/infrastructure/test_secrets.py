"""No secret in any function's environment (issue: the model's key sat in the functions'
configuration). Over every function of every synthesized environment: no variable's value is a
Secrets Manager dynamic reference (a deploy-time resolved secret) or the key itself; the
functions that call the model hold the secret's name and may read it, the others neither."""

from __future__ import annotations

import json
from typing import Any

from tests.infrastructure.conftest import Synthesized

SECRET_ENV = "ANTHROPIC_API_KEY_SECRET"


def _functions(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        name: resource["Properties"]
        for name, resource in template["Resources"].items()
        if resource["Type"] == "AWS::Lambda::Function"
    }


def _reads_secret(template: dict[str, Any], role: Any) -> bool:
    role_name = role["Fn::GetAtt"][0] if isinstance(role, dict) else None
    for resource in template["Resources"].values():
        # A role's overflow policies (CDK's, past the inline size limit) grant as its own.
        if resource["Type"] not in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            continue
        roles = [r.get("Ref") for r in resource["Properties"].get("Roles", [])]
        text = json.dumps(resource["Properties"]["PolicyDocument"])
        if role_name in roles and "secretsmanager:GetSecretValue" in text:
            return True
    return False


def test_no_function_environment_holds_a_secret(synthesized: dict[str, Synthesized]) -> None:
    for name, synth in synthesized.items():
        template = synth.json
        functions = _functions(template)
        assert functions, name
        model_callers = set()
        for logical, props in functions.items():
            variables = props.get("Environment", {}).get("Variables", {})
            for variable, value in variables.items():
                rendered = json.dumps(value)
                # Then no value is a deploy-time resolved secret, nor the key's own variable
                assert "resolve:secretsmanager" not in rendered, (name, logical, variable)
                assert variable != "ANTHROPIC_API_KEY", (name, logical)
            if SECRET_ENV in variables:
                model_callers.add(logical)
            # And only a function that names the secret may read it
            assert _reads_secret(template, props["Role"]) == (SECRET_ENV in variables), (
                name,
                logical,
            )
        if synth.config.llm_provider.value == "anthropic":
            assert model_callers, name
