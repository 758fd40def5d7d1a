"""The REST API: one method per row of the route table (`functions/routes.py`), integrated
with the function the row names (pre_filter: stage 1; api: the rest), behind a Lambda
authorizer that turns the `x-api-key` header into the tenant unless the row is public, with
access logs.

Limits are per tenant: the authorizer answers each tenant's usage key (`usageIdentifierKey`,
`memwrite.auth.tenant.usage_key`; the API's key source is AUTHORIZER, so a caller can never
name one), and API Gateway throttles and counts each key by the usage plan it is on (one per
`EnvConfig.api_plans` entry; `memwrite keys plan` puts a tenant on one). The first entry is the
default plan, tagged with the API key table's name: `memwrite keys create` puts a tenant on no
plan yet on it. The stage's own throttling is the whole API's ceiling, every tenant together."""

from __future__ import annotations

from collections.abc import Mapping

import aws_cdk as cdk
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from functions.routes import ROUTES, Auth
from infra.config import ApiPlan, ApiThrottling
from memwrite.adapters.aws.apigateway_plans import DEFAULT_PLAN_TAG

__all__ = ["GATEWAY_ERRORS", "MemwriteApi"]

# How long API Gateway reuses the authorizer's answer for one key; with the authorizer's own
# cache (memwrite.auth.api_keys.KEY_CACHE_SECS) it bounds how long a revoked key keeps working.
AUTHORIZER_CACHE_SECS = 30
_AUTHORIZER_CACHE = cdk.Duration.seconds(AUTHORIZER_CACHE_SECS)

# What API Gateway answers itself (the request never reached a handler) in the handlers' shape,
# `{"error": <code>, "message"}`, the codes the client maps to its exceptions: response type ->
# (status, code). A status of None keeps the gateway's own (DEFAULT_4XX/5XX cover several).
GATEWAY_ERRORS: dict[apigw.ResponseType, tuple[str | None, str]] = {
    apigw.ResponseType.UNAUTHORIZED: ("401", "unauthenticated"),
    apigw.ResponseType.ACCESS_DENIED: ("403", "forbidden"),
    apigw.ResponseType.THROTTLED: ("429", "throttled"),
    apigw.ResponseType.QUOTA_EXCEEDED: ("429", "throttled"),
    # A tenant whose usage key is on no plan yet (`memwrite keys plan`).
    apigw.ResponseType.INVALID_API_KEY: ("403", "forbidden"),
    apigw.ResponseType.REQUEST_TOO_LARGE: ("413", "payload_too_large"),
    apigw.ResponseType.UNSUPPORTED_MEDIA_TYPE: ("415", "unsupported_media_type"),
    apigw.ResponseType.BAD_REQUEST_PARAMETERS: ("400", "invalid_request"),
    apigw.ResponseType.BAD_REQUEST_BODY: ("400", "invalid_request"),
    apigw.ResponseType.DEFAULT_4_XX: (None, "request_refused"),
    apigw.ResponseType.DEFAULT_5_XX: (None, "unavailable"),
}
# How long a throttled client waits before its retry (the client honours Retry-After).
_THROTTLED_RETRY_AFTER_SECS = 1


class MemwriteApi(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        functions: Mapping[str, lambda_.IFunction],
        authorizer: lambda_.IFunction,
        throttling: ApiThrottling,
        plans: Mapping[str, ApiPlan],
        api_keys_table: str,
        log_retention: logs.RetentionDays,
        removal_policy: cdk.RemovalPolicy,
    ) -> None:
        super().__init__(scope, construct_id)
        access_logs = logs.LogGroup(
            self, "AccessLogs", retention=log_retention, removal_policy=removal_policy
        )
        self.api = apigw.RestApi(
            self,
            "Api",
            description="memwrite: " + ", ".join(f"{r.method} {r.path}" for r in ROUTES),
            cloud_watch_role=True,
            cloud_watch_role_removal_policy=removal_policy,
            # The usage key comes from the authorizer's answer, never from a header.
            api_key_source_type=apigw.ApiKeySourceType.AUTHORIZER,
            deploy_options=apigw.StageOptions(
                stage_name="v1",
                throttling_rate_limit=throttling.rate_per_sec,
                throttling_burst_limit=throttling.burst,
                tracing_enabled=True,
                logging_level=apigw.MethodLoggingLevel.ERROR,
                data_trace_enabled=False,  # request bodies hold turn text
                access_log_destination=apigw.LogGroupLogDestination(access_logs),
                access_log_format=apigw.AccessLogFormat.json_with_standard_fields(
                    caller=False,
                    http_method=True,
                    ip=True,
                    protocol=True,
                    request_time=True,
                    resource_path=True,
                    response_length=True,
                    status=True,
                    user=False,
                ),
            ),
        )
        tenant_authorizer = apigw.RequestAuthorizer(
            self,
            "TenantAuthorizer",
            handler=authorizer,
            identity_sources=[apigw.IdentitySource.header("x-api-key")],
            results_cache_ttl=_AUTHORIZER_CACHE,
        )
        # The handlers validate bodies against their pydantic models (field-level 400s);
        # no API Gateway model is declared, so this validator checks parameters only.
        validator = self.api.add_request_validator(
            "Requests", validate_request_parameters=True, validate_request_body=True
        )
        # One integration per function (`functions`: the route table's function name -> its
        # Lambda), shared by its methods.
        integrations = {name: apigw.LambdaIntegration(fn) for name, fn in functions.items()}
        for route in ROUTES:
            resource = self.api.root.resource_for_path(route.path)
            integration = integrations[route.function]
            if route.auth is Auth.PUBLIC:
                resource.add_method(route.method, integration, request_validator=validator)
            else:
                resource.add_method(
                    route.method,
                    integration,
                    authorizer=tenant_authorizer,
                    api_key_required=True,  # counted against the tenant's usage plan
                    request_validator=validator,
                )
        self.plans = {
            name: self.api.add_usage_plan(
                f"Plan{name.title().replace('_', '')}",
                name=f"{cdk.Stack.of(self).stack_name}-{name}",
                description=f"memwrite tenants on the {name!r} plan (memwrite keys plan)",
                throttle=apigw.ThrottleSettings(
                    rate_limit=plan.rate_per_sec, burst_limit=plan.burst
                ),
                quota=apigw.QuotaSettings(limit=plan.requests_per_day, period=apigw.Period.DAY)
                if plan.requests_per_day
                else None,
                api_stages=[
                    apigw.UsagePlanPerApiStage(api=self.api, stage=self.api.deployment_stage)
                ],
            )
            for name, plan in plans.items()
        }
        # `memwrite keys create --table T` finds its deployment's default plan by this tag.
        cdk.Tags.of(next(iter(self.plans.values()))).add(DEFAULT_PLAN_TAG, api_keys_table)
        for name, usage_plan in self.plans.items():
            cdk.CfnOutput(
                self,
                f"UsagePlan{name.title().replace('_', '')}",
                value=usage_plan.usage_plan_id,
                description=f"the {name!r} plan: memwrite keys plan --usage-plan <this>",
            )
        for response_type, (status, code) in GATEWAY_ERRORS.items():
            headers = {"Content-Type": "'application/json'"}
            if code == "throttled":
                headers["Retry-After"] = f"'{_THROTTLED_RETRY_AFTER_SECS}'"
            self.api.add_gateway_response(
                f"Gateway{response_type.response_type}",
                type=response_type,
                status_code=status,
                response_headers=headers,
                templates={
                    "application/json": f'{{"error": "{code}", '
                    '"message": $context.error.messageString}'
                },
            )
        cdk.Validations.of(self).acknowledge(
            cdk.Acknowledgment(
                id="AwsSolutions-COG4",
                reason="Agents authenticate with per-tenant API keys through the Lambda "
                "authorizer (the tenant comes from the key); there are no Cognito users.",
            )
        )
        public = ", ".join(f"{r.method} {r.path}" for r in ROUTES if r.auth is Auth.PUBLIC)
        cdk.Validations.of(self).acknowledge(
            cdk.Acknowledgment(
                id="AwsSolutions-APIG4",
                reason=f"Only {public} is public (functions/routes.py): the API's own "
                "description, the same for every caller, served without reading a tenant.",
            )
        )
        cdk.Validations.of(self).acknowledge(
            cdk.Acknowledgment(
                id="AwsSolutions-APIG3",
                reason="No WAF yet: per-tenant usage plans, the stage's ceiling and the "
                "authorizer's cached key check bound abuse; add a WAF web ACL per environment "
                "when the API is public.",
            )
        )
        cdk.Validations.of(self).acknowledge(
            cdk.Acknowledgment(
                id="AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AmazonAPIGatewayPushToCloudWatchLogs]",
                reason="The account-level API Gateway logging role uses AWS's managed policy.",
            )
        )
