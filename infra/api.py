"""The REST API: `/v1/turns` (the pre_filter function) and every other route (the api
function), behind a Lambda authorizer that turns the `x-api-key` header into the tenant, with
stage-wide throttling and access logs.

`API_ROUTES` are the routes `functions/api/handler.py`'s resolver serves (a test compares
the two, so a route added there without one here fails)."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.config import ApiThrottling

__all__ = ["API_ROUTES", "GATEWAY_ERRORS", "PRE_FILTER_ROUTES", "PUBLIC_ROUTES", "MemwriteApi"]

PRE_FILTER_ROUTES = (("POST", "/v1/turns"), ("POST", "/v1/users/{user_id}/memories"))
API_ROUTES = (
    ("GET", "/v1/traces/{trace_id}"),
    ("POST", "/v1/traces/{trace_id}/replay"),
    ("POST", "/v1/traces/{trace_id}/rollback"),
    ("POST", "/v1/search"),
    ("GET", "/v1/memories/{memory_id}"),
    ("PATCH", "/v1/memories/{memory_id}"),
    ("GET", "/v1/memories/{memory_id}/traces"),
    ("GET", "/v1/users/{user_id}/memories"),
    ("DELETE", "/v1/users/{user_id}/memories"),
    ("GET", "/v1/users/{user_id}/traces"),
    ("POST", "/v1/users/{user_id}/replay"),
    ("GET", "/v1/users/{user_id}/export"),
    ("POST", "/v1/users/{user_id}/import"),
    ("GET", "/v1/users/{user_id}/episodes"),
    ("POST", "/v1/users/{user_id}/backfill"),
    ("GET", "/v1/settings"),
    ("PUT", "/v1/settings"),
    ("GET", "/v1/openapi.json"),
)
# The API's own description: no key needed (`functions/openapi.py` marks it so in the document).
PUBLIC_ROUTES = frozenset({("GET", "/v1/openapi.json")})

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
        pre_filter: lambda_.IFunction,
        api: lambda_.IFunction,
        authorizer: lambda_.IFunction,
        throttling: ApiThrottling,
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
            description="memwrite: "
            + ", ".join(f"{method} {path}" for method, path in (*PRE_FILTER_ROUTES, *API_ROUTES)),
            cloud_watch_role=True,
            cloud_watch_role_removal_policy=removal_policy,
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
        options = {"authorizer": tenant_authorizer, "request_validator": validator}
        for routes, function in ((PRE_FILTER_ROUTES, pre_filter), (API_ROUTES, api)):
            integration = apigw.LambdaIntegration(function)
            for method, path in routes:
                resource = self.api.root.resource_for_path(path)
                if (method, path) in PUBLIC_ROUTES:
                    resource.add_method(method, integration, request_validator=validator)
                    continue
                resource.add_method(method, integration, **options)  # type: ignore[arg-type]
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
        cdk.Validations.of(self).acknowledge(
            cdk.Acknowledgment(
                id="AwsSolutions-APIG4",
                reason="Only GET /v1/openapi.json is public: the API's own description, "
                "the same for every caller, served from the api function without a tenant.",
            )
        )
        cdk.Validations.of(self).acknowledge(
            cdk.Acknowledgment(
                id="AwsSolutions-APIG3",
                reason="No WAF yet: stage throttling and the authorizer's cached key check "
                "bound abuse; add a WAF web ACL per environment when the API is public.",
            )
        )
        cdk.Validations.of(self).acknowledge(
            cdk.Acknowledgment(
                id="AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AmazonAPIGatewayPushToCloudWatchLogs]",
                reason="The account-level API Gateway logging role uses AWS's managed policy.",
            )
        )
