"""The topic sweep's reads and episode removals on DynamoDB (`memwrite.edit.ports.
TopicSweepStore`); the twin of `SqliteTopicSweepStore`.

No index lists a tenant's users, so `users_of` scans two tables keys-only, filtered by the
tenant's prefix: the memories table (`tenant#user`) and the turns table's episode items
(`EPISODE#tenant#user`). It reads every key of both tables once (a scan is billed on what it
reads, filter or not): acceptable for a job started by a settings change and run in the
background (the expire function, invoked asynchronously), never on a request. Per user the
sweep then queries (memories by partition, episodes through the `lookup` index)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from memwrite.adapters.aws.dynamodb_calls import unavailable
from memwrite.adapters.aws.dynamodb_ledger import EPISODE_OUTBOX_OP, episode_pk
from memwrite.adapters.aws.dynamodb_store import transact
from memwrite.errors import WriteConflict
from memwrite.records.episode import Episode, episode_doc_id
from memwrite.schema import OUTBOX_PENDING, PARTITION_KEY, SORT_KEY, outbox_sort_key

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

__all__ = ["DynamoTopicSweepStore"]

PK, SK = PARTITION_KEY, SORT_KEY
_REMOVE_REV = 2  # an episode's document is indexed at rev 1, removed at rev 2


class DynamoTopicSweepStore:
    def __init__(
        self, client: DynamoDBClient, *, memories_table: str, turns_table: str, outbox_table: str
    ) -> None:
        self._client = client
        self._memories = memories_table
        self._turns = turns_table
        self._outbox = outbox_table

    def _users_under(self, table: str, prefix: str) -> set[str]:
        kwargs: dict[str, Any] = {
            "TableName": table,
            "ProjectionExpression": "#pk",
            "FilterExpression": "begins_with(#pk, :prefix)",
            "ExpressionAttributeNames": {"#pk": PK},
            "ExpressionAttributeValues": {":prefix": {"S": prefix}},
        }
        users: set[str] = set()
        while True:
            try:
                response = self._client.scan(**kwargs)
            except ClientError as exc:
                raise unavailable(exc, "Scan") from exc
            for item in response.get("Items", []):
                user_id = item[PK]["S"][len(prefix) :]
                if "#" not in user_id:  # user ids never hold "#": another tenant's key
                    users.add(user_id)
            if "LastEvaluatedKey" not in response:
                return users
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def users_of(self, tenant: str) -> list[str]:
        users = self._users_under(self._memories, f"{tenant}#")
        users |= self._users_under(self._turns, episode_pk(tenant, ""))
        return sorted(users)

    def remove_episodes(self, episodes: Sequence[Episode]) -> int:
        removed = 0
        for episode in episodes:
            partition = f"{episode.tenant}#{episode.user_id}"
            doc_id = episode_doc_id(episode.turn_id)
            outbox = {
                PK: {"S": partition},
                SK: {"S": outbox_sort_key(doc_id, _REMOVE_REV)},
                "memory_id": {"S": doc_id},
                "op": {"S": EPISODE_OUTBOX_OP},
                "trace_id": {"S": episode.turn.trace_id},
                "doc": {"S": "{}"},
                OUTBOX_PENDING.partition_key: {"S": partition},
            }
            key = {
                PK: {"S": episode_pk(episode.tenant, episode.user_id)},
                SK: {"S": episode.turn_id},
            }
            items: list[dict[str, Any]] = [
                {
                    "Delete": {
                        "TableName": self._turns,
                        "Key": key,
                        "ConditionExpression": "attribute_exists(#pk)",
                        "ExpressionAttributeNames": {"#pk": PK},
                    }
                },
                {"Put": {"TableName": self._outbox, "Item": outbox}},
            ]
            try:
                transact(self._client, items)
            except WriteConflict:
                continue  # gone already (expired by TTL, erased)
            removed += 1
        return removed
