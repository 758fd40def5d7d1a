"""The exports bucket: one per environment, private, SSE-S3, TLS only, objects deleted after a
day, kept or destroyed with the environment's data; only the api function knows it
(`EXPORTS_BUCKET`) and may put and get objects, under `exports/` alone."""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra.stack import construct_id
from memwrite.config.environment import LambdaEnvironment
from tests.infrastructure.conftest import Synthesized
from tests.infrastructure.test_function_wiring import (
    ENVS,
    _actions,
    _statements,
    environment,
    our_functions,
)
from tests.infrastructure.test_stacks import resources


def exports_bucket(synth: Synthesized) -> tuple[str, dict[str, Any]]:
    """The exports bucket's logical id and resource (Bedrock's batch bucket is another)."""
    ((bucket_id, bucket),) = (
        (k, v) for k, v in resources(synth, "AWS::S3::Bucket").items() if k.startswith("Exports")
    )
    return bucket_id, bucket


@pytest.mark.parametrize("env", ENVS)
def test_one_private_encrypted_bucket_whose_objects_live_a_day(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    synth = synthesized[env]
    bucket_id, bucket = exports_bucket(synth)
    props = bucket["Properties"]
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    [encryption] = props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert encryption["ServerSideEncryptionByDefault"] == {"SSEAlgorithm": "AES256"}
    assert props["LifecycleConfiguration"]["Rules"] == [
        {"ExpirationInDays": 1, "Status": "Enabled"}
    ]
    kept = "Retain" if synth.config.retain_data else "Delete"
    assert (bucket["DeletionPolicy"], bucket["UpdateReplacePolicy"]) == (kept, kept)
    # And a request without TLS is denied
    (policy,) = (
        p
        for p in resources(synth, "AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"] == {"Ref": bucket_id}
    )
    [deny] = policy["Properties"]["PolicyDocument"]["Statement"]
    assert deny["Effect"] == "Deny" and deny["Action"] == "s3:*"
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


@pytest.mark.parametrize("env", ENVS)
def test_only_api_knows_the_bucket_and_may_put_and_get_under_exports(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    synth = synthesized[env]
    bucket_id, _ = exports_bucket(synth)

    def on_exports(statement: dict[str, Any]) -> bool:
        return any(a.startswith("s3:") for a in _actions(statement)) and bucket_id in json.dumps(
            statement["Resource"]
        )

    for name, props in our_functions(synth).items():
        loaded = LambdaEnvironment.load(environment(synth, props))
        s3 = [s for s in _statements(synth, construct_id(name)) if on_exports(s)]
        if name == "api":
            assert loaded.exports_bucket == f"resolved-{bucket_id}"
            (statement,) = s3
            assert statement["Effect"] == "Allow"
            assert sorted(_actions(statement)) == ["s3:GetObject", "s3:PutObject"]
            assert statement["Resource"] == {
                "Fn::Join": ["", [{"Fn::GetAtt": [bucket_id, "Arn"]}, "/exports/*"]]
            }
        else:
            assert loaded.exports_bucket is None, name
            assert s3 == [], name
    # And no other role (CDK's helpers, the scheduler, the state machine) may touch it
    granted = [
        statement
        for policy in resources(synth, "AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if on_exports(statement)
    ]
    assert len(granted) == 1
