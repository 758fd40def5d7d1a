"""Bedrock batch inference for the backfill's batch lane (`pipeline.backfill.mode = batch` with
the provider `bedrock`; `memwrite.adapters.aws.bedrock_batches`): the bucket its jobs read
their JSONL input from and write their output to, the service role Bedrock runs them as, and
what the backfill function needs to submit and read them."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.lambdas import MemwriteFunction
from memwrite.adapters.aws.bedrock_batches import KEY_PREFIX

__all__ = ["BATCH_EXPIRY_DAYS", "BedrockBatchJobs"]

# Past a job's longest life (168 hours) with room to apply its output: then S3 deletes.
BATCH_EXPIRY_DAYS = 14
INPUT, OUTPUT = f"{KEY_PREFIX}input/", f"{KEY_PREFIX}output/"


class BedrockBatchJobs(Construct):
    """The batch bucket (private, SSE-S3, TLS only, objects deleted after `BATCH_EXPIRY_DAYS`)
    and the jobs' service role: trusted by Bedrock for this account's model invocation jobs
    only; it reads `batch/input/`, writes `batch/output/` and lists the bucket under
    `batch/` (the stack grants it the one model, as it grants every model caller)."""

    def __init__(self, scope: Construct, construct_id: str, *, retain: bool) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            lifecycle_rules=[s3.LifecycleRule(expiration=cdk.Duration.days(BATCH_EXPIRY_DAYS))],
            removal_policy=cdk.RemovalPolicy.RETAIN if retain else cdk.RemovalPolicy.DESTROY,
        )
        cdk.Validations.of(self.bucket).acknowledge(
            cdk.Acknowledgment(
                id="AwsSolutions-S1",
                reason="Working copies of batch requests and answers, written and read by the "
                "backfill function and Bedrock only (CloudTrail has their calls); deleted "
                f"after {BATCH_EXPIRY_DAYS} days.",
            )
        )
        self.jobs_arn = stack.format_arn(
            service="bedrock", resource="model-invocation-job", resource_name="*"
        )
        self.role = iam.Role(
            self,
            "ServiceRole",
            assumed_by=iam.ServicePrincipal(
                "bedrock.amazonaws.com",
                conditions={
                    "StringEquals": {"aws:SourceAccount": stack.account},
                    "ArnLike": {"aws:SourceArn": self.jobs_arn},
                },
            ),
            description="Bedrock batch inference jobs of the backfill's batch lane",
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject"], resources=[self.bucket.arn_for_objects(f"{INPUT}*")]
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:PutObject"], resources=[self.bucket.arn_for_objects(f"{OUTPUT}*")]
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[self.bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{KEY_PREFIX}*"]}},
            )
        )
        self._acknowledge_prefixes(self.role, "The jobs' service role")

    def _acknowledge_prefixes(self, scope: Construct, who: str) -> None:
        bucket_id = cdk.Stack.of(self).get_logical_id(_element(self.bucket.node.default_child))
        for prefix in (INPUT, OUTPUT):
            cdk.Validations.of(scope).acknowledge(
                cdk.Acknowledgment(
                    id=f"AwsSolutions-IAM5[Resource::<{bucket_id}.Arn>/{prefix}*]",
                    reason=f"{who}: each job's objects are new keys under the prefix "
                    "(named by the job).",
                )
            )

    def grant_submit(self, fn: MemwriteFunction, model_arns: list[str]) -> None:
        """The backfill function: names the bucket and the role (`BATCH_BUCKET`,
        `BATCH_ROLE_ARN`), puts job input, creates and reads this account's jobs of the one
        model (`model_arns`, passing the role to Bedrock only), lists them and reads their
        output."""
        fn.function.add_environment("BATCH_BUCKET", self.bucket.bucket_name)
        fn.function.add_environment("BATCH_ROLE_ARN", self.role.role_arn)
        fn.role.add_to_policy(
            iam.PolicyStatement(
                actions=["bedrock:CreateModelInvocationJob", "bedrock:GetModelInvocationJob"],
                resources=[self.jobs_arn, *model_arns],
            )
        )
        # A round reads its open jobs' states from one listing; IAM scopes no List action to
        # a resource, so this one action is on "*" (it reads job summaries, nothing else).
        fn.role.add_to_policy(
            iam.PolicyStatement(actions=["bedrock:ListModelInvocationJobs"], resources=["*"])
        )
        fn.role.add_to_policy(
            iam.PolicyStatement(
                actions=["iam:PassRole"],
                resources=[self.role.role_arn],
                conditions={"StringEquals": {"iam:PassedToService": "bedrock.amazonaws.com"}},
            )
        )
        fn.role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:PutObject"], resources=[self.bucket.arn_for_objects(f"{INPUT}*")]
            )
        )
        fn.role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject"], resources=[self.bucket.arn_for_objects(f"{OUTPUT}*")]
            )
        )
        fn.role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[self.bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{OUTPUT}*"]}},
            )
        )
        self._acknowledge_prefixes(fn, "The backfill function")
        cdk.Validations.of(fn).acknowledge(
            cdk.Acknowledgment(
                id="AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:bedrock:<AWS::Region>:"
                "<AWS::AccountId>:model-invocation-job/*]",
                reason="A job's ARN exists only once it is created: this account's and "
                "region's model invocation jobs.",
            )
        )


def _element(node: object) -> cdk.CfnElement:
    assert isinstance(node, cdk.CfnElement)
    return node
