"""API Gateway REQUEST authorizer: the `x-api-key` header -> the tenant, put into the request
context (`tenant_id`) where the API handlers read it; unknown or missing key -> 401.

The keys are the configured API keys (`MEMWRITE_API_KEYS`, `api_keys` in the config file), as
in the local mode. API Gateway caches each key's answer, so most requests skip this function.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from memwrite.auth import resolve_tenant
from memwrite.config import Settings, load_settings
from memwrite.errors import Unauthenticated

logger = Logger(service="memwrite-authorizer")


@cache
def settings() -> Settings:
    return load_settings()


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    try:
        tenant = resolve_tenant(None, event.get("headers") or {}, settings().api_keys)
    except Unauthenticated:
        # API Gateway answers 401 for exactly this error message.
        raise Exception("Unauthorized") from None
    # Any method of this API: the answer is cached per key, not per route.
    api_arn = event["methodArn"].split("/", 2)
    resource = f"{api_arn[0]}/{api_arn[1]}/*"
    return {
        "principalId": tenant,
        "policyDocument": {
            "Version": "2012-10-17",
            "Statement": [
                {"Action": "execute-api:Invoke", "Effect": "Allow", "Resource": resource}
            ],
        },
        "context": {"tenant_id": tenant},
    }
