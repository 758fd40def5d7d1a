"""Bedrock batch inference for the batch lane, where the model is Bedrock (staging, prod): a
private bucket whose objects live 14 days, a service role only Bedrock's jobs of this account
may assume (read input, write output, list, the one model), and a backfill function that names
both and may only put input, create and read jobs, pass that role to Bedrock and read output.
With the Anthropic API (dev) there is none of it: the Message Batches API needs only the key."""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra.stack import construct_id
from memwrite.config.environment import LambdaEnvironment
from tests.infrastructure.conftest import Synthesized
from tests.infrastructure.test_function_wiring import (
    _actions,
    _statements,
    environment,
    our_functions,
)
from tests.infrastructure.test_stacks import resources

BEDROCK_ENVS = ("staging", "prod")


def batch_bucket(synth: Synthesized) -> tuple[str, dict[str, Any]]:
    ((bucket_id, bucket),) = (
        (k, v) for k, v in resources(synth, "AWS::S3::Bucket").items() if k.startswith("BatchJobs")
    )
    return bucket_id, bucket


def service_role(synth: Synthesized) -> tuple[str, dict[str, Any]]:
    ((role_id, role),) = (
        (k, v) for k, v in resources(synth, "AWS::IAM::Role").items() if k.startswith("BatchJobs")
    )
    return role_id, role


def object_arn(bucket_id: str, prefix: str) -> dict[str, Any]:
    return {"Fn::Join": ["", [{"Fn::GetAtt": [bucket_id, "Arn"]}, f"/{prefix}*"]]}


def by_action(statements: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {action: s for s in statements for action in _actions(s)}


@pytest.mark.parametrize("env", BEDROCK_ENVS)
def test_the_batch_bucket_is_private_encrypted_and_its_objects_live_two_weeks(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    synth = synthesized[env]
    bucket_id, bucket = batch_bucket(synth)
    props = bucket["Properties"]
    assert all(props["PublicAccessBlockConfiguration"].values())
    [encryption] = props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert encryption["ServerSideEncryptionByDefault"] == {"SSEAlgorithm": "AES256"}
    assert props["LifecycleConfiguration"]["Rules"] == [
        {"ExpirationInDays": 14, "Status": "Enabled"}
    ]
    (policy,) = (
        p
        for p in resources(synth, "AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"] == {"Ref": bucket_id}
    )
    [deny] = policy["Properties"]["PolicyDocument"]["Statement"]
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


@pytest.mark.parametrize("env", BEDROCK_ENVS)
def test_only_bedrock_jobs_of_this_account_assume_the_service_role_and_it_reads_and_writes_batch(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    synth = synthesized[env]
    bucket_id, _ = batch_bucket(synth)
    role_id, role = service_role(synth)
    # Given its trust policy: Bedrock, for this account's model invocation jobs only
    [trust] = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "bedrock.amazonaws.com"}
    assert trust["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
    assert "model-invocation-job/*" in json.dumps(trust["Condition"]["ArnLike"])
    # Then it reads input, writes output, lists under batch/ and invokes the deployed model
    statements = [
        statement
        for policy in resources(synth, "AWS::IAM::Policy").values()
        if {"Ref": role_id} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]
    granted = by_action(statements)
    assert set(granted) == {"s3:GetObject", "s3:PutObject", "s3:ListBucket", "bedrock:InvokeModel"}
    assert granted["s3:GetObject"]["Resource"] == object_arn(bucket_id, "batch/input/")
    assert granted["s3:PutObject"]["Resource"] == object_arn(bucket_id, "batch/output/")
    assert granted["s3:ListBucket"]["Condition"] == {"StringLike": {"s3:prefix": ["batch/*"]}}
    model = "us.anthropic.claude-haiku-4-5-20251001-v1:0"
    assert model in json.dumps(granted["bedrock:InvokeModel"]["Resource"])


@pytest.mark.parametrize("env", BEDROCK_ENVS)
def test_the_backfill_function_submits_jobs_as_the_service_role_and_reads_their_output(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    synth = synthesized[env]
    bucket_id, _ = batch_bucket(synth)
    role_id, _ = service_role(synth)
    # Given the backfill function's environment: the bucket and the role
    loaded = LambdaEnvironment.load(environment(synth, our_functions(synth)["backfill"]))
    assert loaded.batch_bucket() == f"resolved-{bucket_id}"
    assert loaded.batch_role_arn() == f"resolved-{role_id}"
    # Then it may create and read jobs, pass the role to Bedrock only, put input, read output
    granted = by_action(_statements(synth, construct_id("backfill")))
    jobs = granted["bedrock:CreateModelInvocationJob"]
    assert jobs is granted["bedrock:GetModelInvocationJob"]
    assert "model-invocation-job/*" in json.dumps(jobs["Resource"])
    # And list them (a round's one request for its open jobs' states): IAM has no resource
    # for a List action, so that action alone is on "*"
    listing = granted["bedrock:ListModelInvocationJobs"]
    assert (listing["Action"], listing["Resource"]) == ("bedrock:ListModelInvocationJobs", "*")
    passing = granted["iam:PassRole"]
    assert passing["Resource"] == {"Fn::GetAtt": [role_id, "Arn"]}
    assert passing["Condition"] == {
        "StringEquals": {"iam:PassedToService": "bedrock.amazonaws.com"}
    }
    assert granted["s3:PutObject"]["Resource"] == object_arn(bucket_id, "batch/input/")
    assert granted["s3:GetObject"]["Resource"] == object_arn(bucket_id, "batch/output/")
    assert granted["s3:ListBucket"]["Condition"] == {
        "StringLike": {"s3:prefix": ["batch/output/*"]}
    }
    # And no other function knows the bucket or may pass a role
    for name, props in our_functions(synth).items():
        if name == "backfill":
            continue
        assert LambdaEnvironment.load(environment(synth, props)).batch_bucket_name is None
        assert "iam:PassRole" not in by_action(_statements(synth, construct_id(name)))


def test_with_the_anthropic_api_there_is_no_batch_bucket_or_role(
    synthesized: dict[str, Synthesized],
) -> None:
    synth = synthesized["dev"]
    assert not any(k.startswith("BatchJobs") for k in synth.json["Resources"])
    loaded = LambdaEnvironment.load(environment(synth, our_functions(synth)["backfill"]))
    assert (loaded.batch_bucket_name, loaded.batch_role) == (None, None)
