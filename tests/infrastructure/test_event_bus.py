"""The change feed's EventBridge bus: one per environment, named after it, on the hype
function's environment only, and `events:PutEvents` on that bus granted to hype alone."""

from __future__ import annotations

import pytest

from infra.stack import construct_id
from memwrite.config.environment import LambdaEnvironment
from memwrite.stages import stream_stages
from tests.infrastructure.conftest import Synthesized
from tests.infrastructure.test_function_wiring import (
    ENVS,
    _actions,
    _statements,
    environment,
    our_functions,
)
from tests.infrastructure.test_stacks import resources


@pytest.mark.parametrize("env", ENVS)
def test_one_bus_per_environment_named_after_it(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    synth = synthesized[env]
    synth.template.resource_count_is("AWS::Events::EventBus", 1)
    synth.template.has_resource_properties("AWS::Events::EventBus", {"Name": f"memwrite-{env}"})


@pytest.mark.parametrize("env", ENVS)
def test_only_hype_knows_the_bus_and_may_put_events_on_it_alone(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    synth = synthesized[env]
    (bus_id,) = resources(synth, "AWS::Events::EventBus")
    publishers = {stage.name for stage in stream_stages()}
    assert publishers == {"hype"}
    for name, props in our_functions(synth).items():
        loaded = LambdaEnvironment.load(environment(synth, props))
        put = [
            s for s in _statements(synth, construct_id(name)) if "events:PutEvents" in _actions(s)
        ]
        if name in publishers:
            assert loaded.event_bus_name == f"resolved-{bus_id}", name
            (statement,) = put
            assert statement["Effect"] == "Allow"
            assert _actions(statement) == ["events:PutEvents"]
            assert statement["Resource"] == {"Fn::GetAtt": [bus_id, "Arn"]}
        else:
            assert loaded.event_bus_name is None, name
            assert put == [], name
    # And no other role (CDK's helpers, the scheduler, the state machine) may put events
    granted = [
        statement
        for policy in resources(synth, "AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if any(action.startswith("events:") for action in _actions(statement))
    ]
    assert len(granted) == len(publishers)
