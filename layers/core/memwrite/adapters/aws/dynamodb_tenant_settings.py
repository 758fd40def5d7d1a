"""Tenants' stored settings on DynamoDB (`memwrite.schema.TENANT_SETTINGS`): one item each."""

from __future__ import annotations

from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from memwrite.adapters.aws.dynamodb_calls import unavailable
from memwrite.config.tenant_overrides import TenantOverrides
from memwrite.schema import PARTITION_KEY

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

__all__ = ["DynamoTenantSettingsStore"]


class DynamoTenantSettingsStore:
    """GetItem (strongly consistent) and PutItem of the tenant's JSON document."""

    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def get(self, tenant: str) -> TenantOverrides | None:
        try:
            item = self._client.get_item(
                TableName=self._table,
                Key={PARTITION_KEY: {"S": tenant}},
                ConsistentRead=True,
            ).get("Item")
        except ClientError as exc:
            raise unavailable(exc, "GetItem") from exc
        if item is None:
            return None
        return TenantOverrides.model_validate_json(item["settings"]["S"])

    def put(self, tenant: str, settings: TenantOverrides, updated_at: str) -> None:
        try:
            self._client.put_item(
                TableName=self._table,
                Item={
                    PARTITION_KEY: {"S": tenant},
                    "settings": {"S": settings.model_dump_json(exclude_none=True)},
                    "updated_at": {"S": updated_at},
                },
            )
        except ClientError as exc:
            raise unavailable(exc, "PutItem") from exc
