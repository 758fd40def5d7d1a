"""Tenants' usage plans on API Gateway: each tenant's usage key (`memwrite.auth.tenant.usage_key`)
as an API Gateway API key, on one usage plan of the deployment (`memwrite keys plan`).

The authorizer answers the usage key; API Gateway throttles and counts the requests of that key
by the plan it is on, and refuses (403) a key on no plan. A key is on one plan of an API stage
at a time: moving a tenant takes it off its other plans first, so its requests are refused for
the moment between the two calls.

A new tenant goes on the deployment's default plan when its first key is created
(`memwrite keys create`, `admit`): the stack tags that plan with `DEFAULT_PLAN_TAG`, whose value
is the deployment's API key table, so the key table names its own deployment's default plan.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from memwrite.errors import StoreUnavailable

__all__ = ["DEFAULT_PLAN_TAG", "ApiGatewayUsagePlans"]

# On the deployment's default usage plan; its value is the deployment's API key table.
DEFAULT_PLAN_TAG = "memwrite:default-plan-of"


class ApiGatewayUsagePlans:
    def __init__(self, client: Any) -> None:
        self._client = client  # boto3 "apigateway" (no type stubs installed)

    def assign(self, tenant: str, key: str, usage_plan_id: str) -> str:
        """Put the tenant's usage `key` on the plan (as an API key of that name and value,
        created when absent); returns the API key's id. Idempotent: a key on the plan stays."""
        try:
            key_id = self._key_id(tenant, key)
            on = self._plans_of(key_id)
            for other in on - {usage_plan_id}:
                self._client.delete_usage_plan_key(usagePlanId=other, keyId=key_id)
            if usage_plan_id not in on:
                self._client.create_usage_plan_key(
                    usagePlanId=usage_plan_id, keyId=key_id, keyType="API_KEY"
                )
        except ClientError as exc:
            raise _unavailable(exc) from exc
        return key_id

    def admit(self, tenant: str, key: str, api_keys_table: str) -> str | None:
        """Put the tenant's usage `key` on the default plan of the deployment whose key table
        is `api_keys_table`, unless it is on a plan already (a tenant moved to another plan
        stays there); the plan's id, or None when the key is on a plan already. Raises
        LookupError when no plan carries that deployment's default tag."""
        try:
            key_id = self._key_id(tenant, key)
            if self._plans_of(key_id):
                return None
            plans = self._client.get_usage_plans(limit=500).get("items", [])
            default = next(
                (plan["id"] for plan in plans if _default_of(plan) == api_keys_table), None
            )
            if default is None:
                raise LookupError(f"no usage plan tagged {DEFAULT_PLAN_TAG}={api_keys_table}")
            self._client.create_usage_plan_key(usagePlanId=default, keyId=key_id, keyType="API_KEY")
        except ClientError as exc:
            raise _unavailable(exc) from exc
        return str(default)

    def _key_id(self, tenant: str, key: str) -> str:
        """The API key named and valued `key`, created when absent."""
        found = self._client.get_api_keys(nameQuery=key, limit=500).get("items", [])
        key_id = next((item["id"] for item in found if item["name"] == key), None)
        if key_id is None:
            key_id = self._client.create_api_key(
                name=key, value=key, enabled=True, description=f"memwrite tenant {tenant}"
            )["id"]
        return str(key_id)

    def _plans_of(self, key_id: str) -> set[str]:
        plans = self._client.get_usage_plans(keyId=key_id, limit=500).get("items", [])
        return {plan["id"] for plan in plans}


def _default_of(plan: dict[str, Any]) -> str | None:
    """The key table of the deployment this plan is the default of, if it is one."""
    tags: dict[str, str] = plan.get("tags", {})
    return tags.get(DEFAULT_PLAN_TAG)


def _unavailable(exc: ClientError) -> StoreUnavailable:
    code = exc.response.get("Error", {}).get("Code", "")
    return StoreUnavailable(f"API Gateway: {code}")
