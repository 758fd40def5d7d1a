"""The API key table on DynamoDB (`memwrite.schema.API_KEYS`): one item per key hash."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from memwrite.adapters.aws.dynamodb_calls import unavailable
from memwrite.errors import ApiKeyExists
from memwrite.ports import ApiKeyRecord
from memwrite.schema import (
    API_KEYS_BY_ID,
    API_KEYS_LISTING,
    KEY_LISTING_SHARDS,
    PARTITION_KEY,
    key_listing_shard_of,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

__all__ = ["DynamoApiKeyStore"]

_KEY_ID = API_KEYS_BY_ID.partition_key
_SHARD, _LISTED = API_KEYS_LISTING.partition_key, API_KEYS_LISTING.sort_key or ""


def _record(item: dict[str, Any]) -> ApiKeyRecord:
    return ApiKeyRecord(
        key_id=item[_KEY_ID]["S"],
        key_hash=item[PARTITION_KEY]["S"],
        tenant=item["tenant"]["S"],
        created_at=item["created_at"]["S"],
    )


class DynamoApiKeyStore:
    """The authorizer reads one item by hash (GetItem, strongly consistent: a revocation is
    seen at once); `memwrite keys` writes with the operator's credentials."""

    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def add(self, record: ApiKeyRecord) -> None:
        if self._ids_of(record.key_id):
            raise ApiKeyExists(f"key id {record.key_id} is taken")
        try:
            self._client.put_item(
                TableName=self._table,
                Item={
                    PARTITION_KEY: {"S": record.key_hash},
                    _KEY_ID: {"S": record.key_id},
                    "tenant": {"S": record.tenant},
                    "created_at": {"S": record.created_at},
                    _SHARD: {"S": key_listing_shard_of(record.key_id)},
                    _LISTED: {"S": f"{record.tenant}#{record.created_at}#{record.key_id}"},
                },
                ConditionExpression="attribute_not_exists(#pk)",
                ExpressionAttributeNames={"#pk": PARTITION_KEY},
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                raise ApiKeyExists("a key with this hash is stored already") from exc
            raise unavailable(exc, "PutItem") from exc

    def tenant_of(self, key_hash: str) -> str | None:
        try:
            response = self._client.get_item(
                TableName=self._table,
                Key={PARTITION_KEY: {"S": key_hash}},
                ConsistentRead=True,
                ProjectionExpression="tenant",
            )
        except ClientError as exc:
            raise unavailable(exc, "GetItem") from exc
        item = response.get("Item")
        return item["tenant"]["S"] if item else None

    def list_keys(self, tenant: str | None = None) -> list[ApiKeyRecord]:
        """A query per shard of the `listing` index (of `tenant`'s keys only when given)."""
        records: list[ApiKeyRecord] = []
        for shard in KEY_LISTING_SHARDS:
            kwargs: dict[str, Any] = {
                "TableName": self._table,
                "IndexName": API_KEYS_LISTING.name,
                "KeyConditionExpression": "#shard = :shard",
                "ExpressionAttributeNames": {"#shard": _SHARD},
                "ExpressionAttributeValues": {":shard": {"S": shard}},
            }
            if tenant is not None:
                kwargs["KeyConditionExpression"] += " AND begins_with(#listed, :tenant)"
                kwargs["ExpressionAttributeNames"]["#listed"] = _LISTED
                kwargs["ExpressionAttributeValues"][":tenant"] = {"S": f"{tenant}#"}
            while True:
                try:
                    response = self._client.query(**kwargs)
                except ClientError as exc:
                    raise unavailable(exc, "Query") from exc
                records.extend(_record(item) for item in response.get("Items", []))
                if "LastEvaluatedKey" not in response:
                    break
                kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        # A tenant holding "#" shares a prefix with another: keep the exact tenant's.
        chosen = [r for r in records if tenant is None or r.tenant == tenant]
        return sorted(chosen, key=lambda r: (r.created_at, r.key_id))

    def revoke(self, key_id: str) -> ApiKeyRecord | None:
        found = self._ids_of(key_id)
        for record in found:
            try:
                self._client.delete_item(
                    TableName=self._table, Key={PARTITION_KEY: {"S": record.key_hash}}
                )
            except ClientError as exc:
                raise unavailable(exc, "DeleteItem") from exc
        return found[0] if found else None

    def _ids_of(self, key_id: str) -> list[ApiKeyRecord]:
        try:
            response = self._client.query(
                TableName=self._table,
                IndexName=API_KEYS_BY_ID.name,
                KeyConditionExpression="#id = :id",
                ExpressionAttributeNames={"#id": _KEY_ID},
                ExpressionAttributeValues={":id": {"S": key_id}},
            )
        except ClientError as exc:
            raise unavailable(exc, "Query") from exc
        return [_record(item) for item in response.get("Items", [])]
