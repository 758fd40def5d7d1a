"""The exports bucket: one per environment, private, SSE-S3, TLS only, objects deleted after a
day, kept or destroyed with the environment's data; only the api function knows it
(`EXPORTS_BUCKET`) and may put and get objects, under `exports/` alone."""

from __future__ import annotations

import pytest

from infra.stack import construct_id
from memwrite.environment import LambdaEnvironment
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
def test_one_private_encrypted_bucket_whose_objects_live_a_day(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    synth = synthesized[env]
    ((bucket_id, bucket),) = resources(synth, "AWS::S3::Bucket").items()
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
    (policy,) = resources(synth, "AWS::S3::BucketPolicy").values()
    assert policy["Properties"]["Bucket"] == {"Ref": bucket_id}
    [deny] = policy["Properties"]["PolicyDocument"]["Statement"]
    assert deny["Effect"] == "Deny" and deny["Action"] == "s3:*"
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


@pytest.mark.parametrize("env", ENVS)
def test_only_api_knows_the_bucket_and_may_put_and_get_under_exports(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    synth = synthesized[env]
    (bucket_id,) = resources(synth, "AWS::S3::Bucket")
    for name, props in our_functions(synth).items():
        loaded = LambdaEnvironment.load(environment(synth, props))
        s3 = [
            s
            for s in _statements(synth, construct_id(name))
            if any(a.startswith("s3:") for a in _actions(s))
        ]
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
    # And no other role (CDK's helpers, the scheduler, the state machine) may touch S3
    granted = [
        statement
        for policy in resources(synth, "AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if any(action.startswith("s3:") for action in _actions(statement))
    ]
    assert len(granted) == 1
