"""One Lambda function as memwrite deploys them all: its own role (no managed policies), its
own log group with the environment's retention, X-Ray tracing, the shared layer and code."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.config import FunctionSize
from infra.layer import LAMBDA_ARCHITECTURE, LAMBDA_RUNTIME

__all__ = ["MemwriteFunction"]


class MemwriteFunction(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        handler: str,
        code: lambda_.Code,
        layer: lambda_.ILayerVersion,
        size: FunctionSize,
        environment: dict[str, str],
        log_retention: logs.RetentionDays,
        removal_policy: cdk.RemovalPolicy,
    ) -> None:
        super().__init__(scope, construct_id)
        self.log_group = logs.LogGroup(
            self, "Logs", retention=log_retention, removal_policy=removal_policy
        )
        # A role per function, granted only what it declares (its StageDef, infra/access.py).
        self.role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=LAMBDA_RUNTIME,
            architecture=LAMBDA_ARCHITECTURE,
            handler=handler,
            code=code,
            layers=[layer],
            memory_size=size.memory_mb,
            timeout=cdk.Duration.seconds(size.timeout_secs),
            environment=environment,
            role=self.role,
            log_group=self.log_group,
            logging_format=lambda_.LoggingFormat.JSON,
            tracing=lambda_.Tracing.ACTIVE,
        )
        # The function's own log streams only (grant_write would leave CreateLogGroup out).
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[self.log_group.log_group_arn],
            )
        )
        cdk.Validations.of(self).acknowledge(
            cdk.Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason="X-Ray PutTraceSegments/PutTelemetryRecords support no resource-level "
                "permissions; CDK adds them for active tracing.",
            )
        )
        cdk.Validations.of(self).acknowledge(
            cdk.Acknowledgment(
                id="AwsSolutions-L1",
                reason="python3.12 is the runtime the layer's wheels are built and tested for "
                "(the library targets 3.11+; 3.11 runs on AL2, where numpy 2.4 has no wheel).",
            )
        )
