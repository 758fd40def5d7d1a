"""The outbox table as the indexer's change feed: pending rows (the sparse `pending` index)
and marking rows done (removing their `pending_key`).

On AWS the table's stream delivers new rows to the hype Lambda, which only marks them done;
`pending` serves the local runner, which delivers the rows itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from memwrite.adapters.aws.dynamodb_calls import unavailable
from memwrite.payloads import OutboxChange
from memwrite.records.change_events import is_erasure_row
from memwrite.schema import OUTBOX_PENDING, PARTITION_KEY, SORT_KEY, outbox_sort_key

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

__all__ = ["DynamoOutbox"]


class DynamoOutbox:
    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def pending(self, limit: int) -> list[OutboxChange]:
        """A scan of the sparse pending index (it holds only undone rows), sorted by user and
        then `memory_id#rev`: one memory's rows come in the order they were written."""
        rows: list[OutboxChange] = []
        kwargs: dict[str, Any] = {"TableName": self._table, "IndexName": OUTBOX_PENDING.name}
        while True:
            try:
                response = self._client.scan(**kwargs)
            except ClientError as exc:
                raise unavailable(exc, "Scan") from exc
            for item in response.get("Items", []):
                plain = {
                    name: item[name]["S"]
                    for name in (PARTITION_KEY, SORT_KEY, "trace_id")
                    if name in item
                }
                rows.append(OutboxChange.from_row(plain))
            if "LastEvaluatedKey" not in response:
                break
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        rows.sort(key=lambda row: (row.tenant, row.user_id, row.memory_id, row.rev))
        return rows[:limit]

    def mark_done(self, changes: Sequence[OutboxChange]) -> None:
        """Row by row: a batch write can neither condition a row nor remove one attribute."""
        for change in changes:
            self._mark_done(change)

    def _mark_done(self, change: OutboxChange) -> None:
        key = {
            PARTITION_KEY: {"S": f"{change.tenant}#{change.user_id}"},
            SORT_KEY: {"S": outbox_sort_key(change.memory_id, change.rev)},
        }
        try:
            if is_erasure_row(change.memory_id):
                # An erasure's own row goes: it names the user it announced.
                self._client.delete_item(TableName=self._table, Key=key)
                return
            self._client.update_item(
                TableName=self._table,
                Key=key,
                UpdateExpression=f"REMOVE {OUTBOX_PENDING.partition_key}",
                # An erased user's row must stay gone, not come back as a bare key.
                ConditionExpression=f"attribute_exists({PARTITION_KEY})",
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise unavailable(exc, "UpdateItem") from exc
