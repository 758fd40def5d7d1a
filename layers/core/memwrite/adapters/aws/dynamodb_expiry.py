"""The memories whose user expiry is due, from the memories table's sparse `expiry_due` GSI:
one query per shard (`memwrite.schema.EXPIRY_SHARDS`), each reading only due items."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from memwrite.adapters.aws.dynamodb_calls import unavailable
from memwrite.ports import DueExpiry
from memwrite.schema import (
    EXPIRY_DUE,
    EXPIRY_SHARD,
    EXPIRY_SHARDS,
    MEMORIES_EXPIRY_DUE,
    PARTITION_KEY,
    SORT_KEY,
    expiry_due_sort,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

__all__ = ["DynamoExpiryFinder"]


class DynamoExpiryFinder:
    def __init__(self, client: DynamoDBClient, memories_table: str) -> None:
        self._client = client
        self._table = memories_table

    def due(self, now: datetime, limit: int) -> list[DueExpiry]:
        found: list[DueExpiry] = []
        for shard in EXPIRY_SHARDS:
            # Each shard's earliest `limit` (one page): the earliest `limit` overall are among them.
            try:
                response = self._client.query(
                    TableName=self._table,
                    IndexName=MEMORIES_EXPIRY_DUE.name,
                    KeyConditionExpression=f"{EXPIRY_SHARD} = :shard AND {EXPIRY_DUE} <= :now",
                    ExpressionAttributeValues={
                        ":shard": {"S": shard},
                        ":now": {"S": expiry_due_sort(now)},
                    },
                    ProjectionExpression=f"{PARTITION_KEY}, {SORT_KEY}, {EXPIRY_DUE}",
                    Limit=limit,
                )
            except ClientError as exc:
                raise unavailable(exc, "Query") from exc
            found.extend(_due(item) for item in response.get("Items", []))
        found.sort(key=lambda expiry: expiry.due)
        return found[:limit]


def _due(item: dict[str, Any]) -> DueExpiry:
    # pk = tenant#user_id; user ids never hold "#" (URL-safe characters), tenants may.
    tenant, _, user_id = item[PARTITION_KEY]["S"].rpartition("#")
    return DueExpiry(
        tenant=tenant,
        user_id=user_id,
        memory_id=item[SORT_KEY]["S"],
        due=datetime.fromisoformat(item[EXPIRY_DUE]["S"]),
    )
