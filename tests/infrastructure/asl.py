"""The deployed state machine definition, with its CloudFormation references resolved the way
a deployment would resolve them (Lambda ARNs named after their logical ids), for moto."""

from __future__ import annotations

import json
from typing import Any

ACCOUNT, REGION = "123456789012", "us-east-1"


def lambda_arn(logical_id: str) -> str:
    return f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{logical_id}"


def _resolve(value: Any, queue_urls: dict[str, str]) -> str:
    if isinstance(value, str):
        return value
    if "Fn::GetAtt" in value:
        logical_id, attribute = value["Fn::GetAtt"]
        assert attribute == "Arn", value
        return lambda_arn(logical_id)
    if "Ref" in value:
        ref = value["Ref"]
        pseudo = {"AWS::Partition": "aws", "AWS::Region": REGION, "AWS::AccountId": ACCOUNT}
        return pseudo.get(ref) or queue_urls[ref]
    raise AssertionError(f"unexpected reference in the definition: {value}")


def state_machine_definition(template: dict[str, Any], queue_urls: dict[str, str]) -> str:
    """The ASL of the stack's only state machine; `queue_urls` maps queue logical ids."""
    (machine,) = [
        r for r in template["Resources"].values() if r["Type"] == "AWS::StepFunctions::StateMachine"
    ]
    definition = machine["Properties"]["DefinitionString"]
    if isinstance(definition, str):
        return definition
    _, parts = definition["Fn::Join"]
    text = "".join(_resolve(part, queue_urls) for part in parts)
    json.loads(text)  # a valid document, every reference resolved
    return text


def function_handlers(template: dict[str, Any]) -> dict[str, str]:
    """Lambda logical id -> its `Handler` (module.function), as deployed."""
    return {
        logical_id: resource["Properties"]["Handler"]
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] == "AWS::Lambda::Function" and "Handler" in resource["Properties"]
    }
