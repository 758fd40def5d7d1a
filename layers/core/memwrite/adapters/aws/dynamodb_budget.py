"""The model budget's buckets on DynamoDB (`memwrite.schema.BUDGET`): one item per shard,
every write conditioned on the version it was read at (`memwrite.budget.ports.BudgetStore`).

One record is a conditional PutItem; two (a call charged to its model's and its tenant's
bucket) are one TransactWriteItems, so a call is charged to both or to neither.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from memwrite.adapters.aws.dynamodb_calls import unavailable
from memwrite.budget.ports import BucketRecord
from memwrite.schema import PARTITION_KEY, TTL_ATTRIBUTE

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

__all__ = ["DynamoBudgetStore"]

# An idle bucket's item expires after this (a missing item reads as a full bucket).
_IDLE_TTL_SECS = 2 * 86_400
_LOST = frozenset({"ConditionalCheckFailedException", "TransactionCanceledException"})


def _number(value: float) -> dict[str, str]:
    return {"N": repr(float(value))}


def _item(record: BucketRecord) -> dict[str, Any]:
    return {
        PARTITION_KEY: {"S": record.key},
        "v": {"N": str(record.version + 1)},
        "r": _number(record.levels[0]),
        "i": _number(record.levels[1]),
        "o": _number(record.levels[2]),
        "at": _number(record.updated_at),
        "f": _number(record.factor),
        "blocked": _number(record.blocked_until),
        "decreased": _number(record.decreased_at),
        "line": _number(record.line_at),
        TTL_ATTRIBUTE: {"N": str(int(record.updated_at) + _IDLE_TTL_SECS)},
    }


def _condition(record: BucketRecord) -> dict[str, Any]:
    if record.version == 0:
        return {
            "ConditionExpression": "attribute_not_exists(#pk)",
            "ExpressionAttributeNames": {"#pk": PARTITION_KEY},
        }
    return {
        "ConditionExpression": "#v = :read",
        "ExpressionAttributeNames": {"#v": "v"},
        "ExpressionAttributeValues": {":read": {"N": str(record.version)}},
    }


def _record(item: dict[str, Any]) -> BucketRecord:
    def number(name: str) -> float:
        return float(item[name]["N"])

    return BucketRecord(
        key=item[PARTITION_KEY]["S"],
        levels=(number("r"), number("i"), number("o")),
        updated_at=number("at"),
        version=int(item["v"]["N"]),
        factor=number("f"),
        blocked_until=number("blocked"),
        decreased_at=number("decreased"),
        # Items written before the line was kept have none: nobody waits in it.
        line_at=number("line") if "line" in item else 0.0,
    )


class DynamoBudgetStore:
    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def load(self, keys: Sequence[str]) -> list[BucketRecord | None]:
        # Strongly consistent: a stale read would only lose its conditional write.
        request: dict[str, Any] = {
            self._table: {
                "Keys": [{PARTITION_KEY: {"S": key}} for key in dict.fromkeys(keys)],
                "ConsistentRead": True,
            }
        }
        found: dict[str, BucketRecord] = {}
        while request:
            try:
                response = self._client.batch_get_item(RequestItems=request)
            except ClientError as exc:
                raise unavailable(exc, "BatchGetItem") from exc
            for item in response.get("Responses", {}).get(self._table, []):
                record = _record(item)
                found[record.key] = record
            request = dict(response.get("UnprocessedKeys") or {})
        return [found.get(key) for key in keys]

    def save(self, records: Sequence[BucketRecord]) -> bool:
        try:
            if len(records) == 1:
                (record,) = records
                self._client.put_item(
                    TableName=self._table, Item=_item(record), **_condition(record)
                )
            else:
                puts: list[dict[str, Any]] = [
                    {"Put": {"TableName": self._table, "Item": _item(r), **_condition(r)}}
                    for r in records
                ]
                self._client.transact_write_items(TransactItems=puts)  # type: ignore[arg-type]
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in _LOST:
                return False
            raise unavailable(exc, "TransactWriteItems") from exc
        return True
