"""Which tenant a request belongs to: from the credential, never from the body.

On AWS a Lambda authorizer puts `tenant_id` into the request context. Locally (no authorizer),
an `x-api-key` header is looked up in the configured API keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memwrite.errors import Unauthenticated

__all__ = ["API_KEY_HEADER", "resolve_tenant"]

API_KEY_HEADER = "x-api-key"


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
