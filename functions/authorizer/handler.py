"""API Gateway REQUEST authorizer: the `x-api-key` header -> the tenant, put into the request
context (`tenant_id`) where the API handlers read it, and the tenant's usage key
(`usageIdentifierKey`) that API Gateway throttles and counts by the tenant's usage plan;
unknown or missing key -> 401.

The key's SHA-256 is looked up in the key table (`API_KEYS_TABLE` on AWS, the data directory's
locally; `memwrite keys` creates and revokes them), after the configured keys of the local mode
(`MEMWRITE_API_KEYS`, `api_keys` in the config file; a deployed environment has none). Each
instance keeps a found key's answer for `api_key_cache_secs` (`KEY_CACHE_SECS` unless set),
and API Gateway caches this function's answers too (`infra/api.py`): a revoked key stops
working within both together.
"""

from __future__ import annotations

import os
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from memwrite.auth.api_keys import DEFAULT_KEY_ENV, KeyResolver
from memwrite.auth.tenant import API_KEY_HEADER, usage_key
from memwrite.config.settings import load_settings
from memwrite.wiring import build_api_key_store

logger = Logger(service="memwrite-authorizer")


@cache
def resolver() -> KeyResolver:
    """Built on the first invocation (cold start) and reused while the instance lives."""
    default = os.environ.get(DEFAULT_KEY_ENV, "")  # local only: `local-dev-key=local`
    key, _, tenant = default.partition("=")
    settings = load_settings()
    return KeyResolver(
        settings.api_keys,
        build_api_key_store(),
        default={key: tenant} if key and tenant else None,
        cache_secs=settings.api_key_cache_secs,
    )


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    headers = event.get("headers") or {}
    supplied = next((v for k, v in headers.items() if k.lower() == API_KEY_HEADER), None)
    tenant = resolver().tenant_of(supplied)
    if tenant is None:
        # API Gateway answers 401 for exactly this error message. The key is never logged.
        raise Exception("Unauthorized")
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
        "usageIdentifierKey": usage_key(tenant),
    }
