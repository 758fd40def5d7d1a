"""The usage meter on DynamoDB (`memwrite.schema.USAGE`): one item per tenant and UTC hour
(`memwrite.metering.ports.UsageMeter`).

An add is one UpdateItem of `ADD` actions: DynamoDB applies them atomically, so concurrent
units of work all count and none reads first. A report is one query of the tenant's hours
(never a scan); a month is some 744 small items, a page or two.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from memwrite.adapters.aws.dynamodb_calls import unavailable
from memwrite.metering.counts import COUNTERS, UsageCounts, hour_key
from memwrite.schema import PARTITION_KEY, SORT_KEY

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

__all__ = ["DynamoUsageMeter"]

_COST_DIGITS = 8
_HOUR = timedelta(hours=1)


def _number(value: int | float) -> dict[str, str]:
    # Decimal arithmetic in DynamoDB: a cost sums exactly to its eighth decimal.
    exact = Decimal(value) if isinstance(value, int) else round(Decimal(repr(value)), _COST_DIGITS)
    return {"N": str(exact)}


class DynamoUsageMeter:
    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def add(self, tenant: str, hour: datetime, counts: UsageCounts) -> None:
        values = counts.values()
        added = [i for i, value in enumerate(values) if value]
        if not added:
            return
        try:
            self._client.update_item(
                TableName=self._table,
                Key={PARTITION_KEY: {"S": tenant}, SORT_KEY: {"S": hour_key(hour)}},
                # Placeholders for the names: no counter meets a reserved word.
                UpdateExpression="ADD " + ", ".join(f"#c{i} :c{i}" for i in added),
                ExpressionAttributeNames={f"#c{i}": COUNTERS[i] for i in added},
                ExpressionAttributeValues={f":c{i}": _number(values[i]) for i in added},
            )
        except ClientError as exc:
            raise unavailable(exc, "UpdateItem") from exc

    def read(self, tenant: str, start: datetime, end: datetime) -> UsageCounts:
        totals = dict.fromkeys(COUNTERS, Decimal(0))
        request: dict[str, Any] = {
            "TableName": self._table,
            # The hours in [start, end): the sort key is the hour, string order is time order.
            "KeyConditionExpression": "#pk = :tenant AND #sk BETWEEN :first AND :last",
            "ExpressionAttributeNames": {"#pk": PARTITION_KEY, "#sk": SORT_KEY},
            "ExpressionAttributeValues": {
                ":tenant": {"S": tenant},
                ":first": {"S": hour_key(start)},
                ":last": {"S": hour_key(end - _HOUR)},
            },
        }
        while True:
            try:
                page = self._client.query(**request)
            except ClientError as exc:
                raise unavailable(exc, "Query") from exc
            for item in page.get("Items", []):
                for name in COUNTERS:
                    if name in item:
                        totals[name] += Decimal(item[name]["N"])
            if "LastEvaluatedKey" not in page:
                break
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return UsageCounts(
            **{name: int(value) for name, value in totals.items() if name != "cost_usd"},
            cost_usd=float(round(totals["cost_usd"], _COST_DIGITS)),
        )
