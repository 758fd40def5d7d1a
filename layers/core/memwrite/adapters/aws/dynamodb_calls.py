"""What every DynamoDB adapter does around a client call: a failed call as the store's
transient error (`unavailable`), the items whose condition cancelled a transaction
(`failed_condition_at`, `failed_conditions_at`), and batched reads and writes with their
unprocessed keys and items resent (`batch_get`, `batch_write`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from memwrite.errors import StoreUnavailable

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

__all__ = [
    "MAX_UNPROCESSED_ROUNDS",
    "batch_get",
    "batch_write",
    "chunks",
    "failed_condition_at",
    "failed_conditions_at",
    "unavailable",
]

_BATCH_GET_LIMIT = 100
_BATCH_WRITE_LIMIT = 25
# How often a batch call is repeated for what DynamoDB left unprocessed (throttling) before
# the call counts as failed.
MAX_UNPROCESSED_ROUNDS = 5


def chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def unavailable(exc: ClientError, operation: str) -> StoreUnavailable:
    """A DynamoDB error as the store's transient error, named by operation and code."""
    code = exc.response.get("Error", {}).get("Code", "Unknown")
    return StoreUnavailable(f"DynamoDB {operation} failed: {code}")


def batch_get(
    client: DynamoDBClient, table: str, keys: Sequence[dict[str, Any]], projection: str
) -> Iterator[dict[str, Any]]:
    """The items at `keys` (those that exist), read in batches of 100 with `projection`,
    unprocessed keys asked again a few times."""
    for chunk in chunks(keys, _BATCH_GET_LIMIT):
        request: dict[str, Any] = {table: {"Keys": list(chunk), "ProjectionExpression": projection}}
        for _ in range(MAX_UNPROCESSED_ROUNDS):
            try:
                response = client.batch_get_item(RequestItems=request)
            except ClientError as exc:
                raise unavailable(exc, "BatchGetItem") from exc
            yield from response.get("Responses", {}).get(table, [])
            request = dict(response.get("UnprocessedKeys") or {})
            if not request:
                break
        else:
            raise StoreUnavailable("DynamoDB BatchGetItem left keys unprocessed")


def batch_write(client: DynamoDBClient, table: str, requests: Sequence[Any]) -> None:
    """Put/delete requests in batches of 25, unprocessed ones resent a few times."""
    for chunk in chunks(requests, _BATCH_WRITE_LIMIT):
        request: dict[str, Any] = {table: list(chunk)}
        for _ in range(MAX_UNPROCESSED_ROUNDS):
            try:
                response = client.batch_write_item(RequestItems=request)
            except ClientError as exc:
                raise unavailable(exc, "BatchWriteItem") from exc
            request = dict(response.get("UnprocessedItems") or {})
            if not request:
                break
        else:
            raise StoreUnavailable(f"DynamoDB BatchWriteItem left {table} items unprocessed")


def failed_conditions_at(exc: ClientError) -> list[int]:
    """The indexes of the transaction items whose condition failed, if that cancelled it."""
    if exc.response.get("Error", {}).get("Code") != "TransactionCanceledException":
        return []
    reasons = exc.response.get("CancellationReasons", [])
    return [i for i, reason in enumerate(reasons) if reason.get("Code") == "ConditionalCheckFailed"]


def failed_condition_at(exc: ClientError) -> int | None:
    """The index of the first transaction item whose condition failed, if that cancelled it."""
    return next(iter(failed_conditions_at(exc)), None)
