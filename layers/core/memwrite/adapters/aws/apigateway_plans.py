"""Tenants' usage plans on API Gateway: each tenant's usage key (`memwrite.auth.tenant.usage_key`)
as an API Gateway API key, on one usage plan of the deployment (`memwrite keys plan`).

The authorizer answers the usage key; API Gateway throttles and counts the requests of that key
by the plan it is on, and refuses (403) a key on no plan. A key is on one plan of an API stage
at a time: moving a tenant takes it off its other plans first, so its requests are refused for
the moment between the two calls.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from memwrite.errors import StoreUnavailable

__all__ = ["ApiGatewayUsagePlans"]


class ApiGatewayUsagePlans:
    def __init__(self, client: Any) -> None:
        self._client = client  # boto3 "apigateway" (no type stubs installed)

    def assign(self, tenant: str, key: str, usage_plan_id: str) -> str:
        """Put the tenant's usage `key` on the plan (as an API key of that name and value,
        created when absent); returns the API key's id. Idempotent: a key on the plan stays."""
        try:
            found = self._client.get_api_keys(nameQuery=key, limit=500).get("items", [])
            key_id = next((item["id"] for item in found if item["name"] == key), None)
            if key_id is None:
                key_id = self._client.create_api_key(
                    name=key,
                    value=key,
                    enabled=True,
                    description=f"memwrite tenant {tenant}",
                )["id"]
            plans = self._client.get_usage_plans(keyId=key_id, limit=500).get("items", [])
            on = {plan["id"] for plan in plans}
            for other in on - {usage_plan_id}:
                self._client.delete_usage_plan_key(usagePlanId=other, keyId=key_id)
            if usage_plan_id not in on:
                self._client.create_usage_plan_key(
                    usagePlanId=usage_plan_id, keyId=key_id, keyType="API_KEY"
                )
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            raise StoreUnavailable(f"API Gateway: {code}") from exc
        return str(key_id)
