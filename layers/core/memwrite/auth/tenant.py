"""Which tenant a request belongs to: from the credential, never from the body.

On AWS a Lambda authorizer puts `tenant_id` into the request context. Locally (no authorizer),
an `x-api-key` header is looked up in the configured API keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memwrite.errors import Unauthenticated
from memwrite.ids import content_hash

__all__ = ["API_KEY_HEADER", "USAGE_KEY_PREFIX", "resolve_tenant", "usage_key"]

API_KEY_HEADER = "x-api-key"
USAGE_KEY_PREFIX = "memwrite-tenant-"


def usage_key(tenant: str) -> str:
    """The tenant's API Gateway usage key: what its usage plan counts and throttles.

    Derived from the tenant, so every API key of a tenant shares one quota and the authorizer
    needs no lookup. It is not a secret: the API takes usage keys from the authorizer's answer
    only (key source AUTHORIZER), never from a caller. 48 characters (API Gateway wants 20+).
    """
    return USAGE_KEY_PREFIX + content_hash("usage", tenant)


def resolve_tenant(
    authorizer: Mapping[str, Any] | None,
    headers: Mapping[str, str],
    api_keys: Mapping[str, str],
) -> str:
    tenant = (authorizer or {}).get("tenant_id")
    if isinstance(tenant, str) and tenant:
        return tenant
    supplied = next((v for k, v in headers.items() if k.lower() == API_KEY_HEADER), None)
    if supplied and supplied in api_keys:
        return api_keys[supplied]
    raise Unauthenticated("missing or unknown credential")
