"""DynamoDB episodes: items of the turns table (single-table, `EPISODE#tenant#user`, sorted by
turn id), listed in observation order through the table's overloaded `lookup` index
(`USEREPISODES#tenant#user`, `observed_at#turn_id`). `expires_at` is the table's TTL
attribute: DynamoDB deletes an expired episode by itself (lazily; reads treat it as expired
at once). `episode_puts` are the items `DynamoSessionLog.append_batch` writes with a turn.

The batch lane (`memwrite.backfill.ports.EpisodeBatches`) keeps, per provider batch, one item
per episode in it (`EPISODEBATCH#<batch id>`, `MEMBER#tenant#user#turn`) and a marker
(`#batch`) that the `lookup` index lists under `OPENEPISODEBATCHES` until the batch is closed:
no scan finds the open batches, and every item has a TTL past any batch's life."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from memwrite.adapters.aws.dynamodb_calls import batch_write, unavailable
from memwrite.adapters.aws.dynamodb_ledger import episode_item, episode_lookup_key, episode_pk
from memwrite.adapters.page_cursor import decode_trace_cursor, encode_trace_cursor, time_bounds
from memwrite.records.episode import Episode, EpisodePage, EpisodeStatus
from memwrite.schema import (
    LOOKUP_KEY,
    LOOKUP_SORT,
    PARTITION_KEY,
    PENDING_SHARD,
    PENDING_SHARDS,
    PENDING_USER,
    SORT_KEY,
    TTL_ATTRIBUTE,
    TURNS_LOOKUP,
    TURNS_PENDING_EPISODES,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

__all__ = ["DynamoEpisodeStore"]

PK, SK = PARTITION_KEY, SORT_KEY
_BATCH_GET_LIMIT = 100
_OPEN_BATCHES = "OPENEPISODEBATCHES"
_MARKER, _MEMBER = "#batch", "MEMBER#"
# Past the longest batch (Bedrock's 168 hours) with room to apply it: then DynamoDB deletes.
_BATCH_ITEM_TTL_SECS = 8 * 86_400


def _batch_pk(batch_id: str) -> str:
    return f"EPISODEBATCH#{batch_id}"


class DynamoEpisodeStore:
    def __init__(self, client: DynamoDBClient, turns_table: str) -> None:
        self._client = client
        self._table = turns_table

    def episodes_of(
        self,
        tenant: str,
        user_id: str,
        *,
        status: EpisodeStatus | None,
        since: datetime | None,
        until: datetime | None,
        limit: int,
        cursor: str | None,
        now: float,
    ) -> EpisodePage:
        low, high = time_bounds(since, until)
        if cursor:
            low = decode_trace_cursor(cursor) + "\x00"  # strictly after the cursor's key
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": TURNS_LOOKUP.name,
            "KeyConditionExpression": (
                f"{LOOKUP_KEY} = :key AND {LOOKUP_SORT} BETWEEN :low AND :high"
            ),
            "ExpressionAttributeValues": {
                ":key": {"S": episode_lookup_key(tenant, user_id)},
                ":low": {"S": low},
                ":high": {"S": high},
            },
        }
        found: list[Episode] = []
        while len(found) <= limit:
            try:
                response = self._client.query(**kwargs)
            except ClientError as exc:
                raise unavailable(exc, "Query") from exc
            for item in response.get("Items", []):
                episode = Episode.model_validate_json(item["doc"]["S"])
                if episode.sort_key >= high:
                    continue
                if status is None or episode.status_at(now) is status:
                    found.append(episode)
            if "LastEvaluatedKey" not in response:
                break
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        page = found[:limit]
        more = len(found) > limit
        return EpisodePage(page, encode_trace_cursor(page[-1].sort_key) if more and page else None)

    def get_episodes(
        self, tenant: str, user_id: str, turn_ids: Sequence[str]
    ) -> dict[str, Episode]:
        found: dict[str, Episode] = {}
        unique = list(dict.fromkeys(turn_ids))
        for start in range(0, len(unique), _BATCH_GET_LIMIT):
            keys = [
                {PK: {"S": episode_pk(tenant, user_id)}, SK: {"S": turn_id}}
                for turn_id in unique[start : start + _BATCH_GET_LIMIT]
            ]
            request: dict[str, Any] = {self._table: {"Keys": keys, "ConsistentRead": True}}
            while request:
                try:
                    response = self._client.batch_get_item(RequestItems=request)
                except ClientError as exc:
                    raise unavailable(exc, "BatchGetItem") from exc
                for item in response.get("Responses", {}).get(self._table, []):
                    episode = Episode.model_validate_json(item["doc"]["S"])
                    found[episode.turn_id] = episode
                request = response.get("UnprocessedKeys") or {}
        return found

    def update_episodes(self, episodes: Sequence[Episode]) -> None:
        for episode in episodes:
            try:
                self._client.put_item(
                    TableName=self._table,
                    Item=episode_item(episode),
                    # An erased or expired (TTL-deleted) episode is not brought back.
                    ConditionExpression=f"attribute_exists({PK})",
                )
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                    raise unavailable(exc, "PutItem") from exc

    def pending_users(self, tenant: str | None = None) -> list[tuple[str, str]]:
        """From the sparse `pending_episodes` index: one query per shard, reading the keys of
        pending episodes alone (of `tenant`'s users only when given), never the table."""
        users: set[tuple[str, str]] = set()
        for shard in PENDING_SHARDS:
            kwargs: dict[str, Any] = {
                "TableName": self._table,
                "IndexName": TURNS_PENDING_EPISODES.name,
                "KeyConditionExpression": "#shard = :shard",
                "ExpressionAttributeNames": {"#shard": PENDING_SHARD},
                "ExpressionAttributeValues": {":shard": {"S": shard}},
            }
            if tenant is not None:
                kwargs["KeyConditionExpression"] += " AND begins_with(#user, :tenant)"
                kwargs["ExpressionAttributeNames"]["#user"] = PENDING_USER
                kwargs["ExpressionAttributeValues"][":tenant"] = {"S": f"{tenant}#"}
            while True:
                try:
                    response = self._client.query(**kwargs)
                except ClientError as exc:
                    raise unavailable(exc, "Query") from exc
                for item in response.get("Items", []):
                    # tenant#user_id: user ids never hold "#", tenants may.
                    found_tenant, _, user_id = item[PENDING_USER]["S"].rpartition("#")
                    if tenant is None or found_tenant == tenant:
                        users.add((found_tenant, user_id))
                if "LastEvaluatedKey" not in response:
                    break
                kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        return sorted(users)

    def expire(self, now: float) -> list[Episode]:
        # The table's TTL deletes expired episodes; reads already treat them as expired.
        return []

    def _put(self, item: dict[str, Any], condition: str | None = None, **values: Any) -> bool:
        """PutItem; False when `condition` (over `:values`) does not hold."""
        kwargs: dict[str, Any] = {"TableName": self._table, "Item": item}
        if condition is not None:
            kwargs["ConditionExpression"] = condition
            kwargs["ExpressionAttributeNames"] = {"#status": "status"}
            kwargs["ExpressionAttributeValues"] = values
        try:
            self._client.put_item(**kwargs)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise unavailable(exc, "PutItem") from exc
        return True

    def add_to_batch(self, batch_id: str, episodes: Sequence[Episode]) -> list[Episode]:
        now = time.time()
        expires = {"N": str(int(now) + _BATCH_ITEM_TTL_SECS)}
        stamp = datetime.fromtimestamp(now, UTC).isoformat()
        pk = {"S": _batch_pk(batch_id)}
        self._put(
            {
                PK: pk,
                SK: {"S": _MARKER},
                LOOKUP_KEY: {"S": _OPEN_BATCHES},
                LOOKUP_SORT: {"S": f"{stamp}#{batch_id}"},
                "batch_id": {"S": batch_id},
                TTL_ATTRIBUTE: expires,
            }
        )
        marked: list[Episode] = []
        for episode in episodes:
            # The member first: an episode is never in a batch that cannot find it.
            member = f"{_MEMBER}{episode.tenant}#{episode.user_id}#{episode.turn_id}"
            self._put({PK: pk, SK: {"S": member}, TTL_ATTRIBUTE: expires})
            in_batch = episode.model_copy(
                update={"status": EpisodeStatus.IN_BATCH, "batch_id": batch_id}
            )
            # Only a pending one: a live backfill may have taken it meanwhile.
            if self._put(
                episode_item(in_batch),
                "#status = :pending",
                **{":pending": {"S": EpisodeStatus.PENDING.value}},
            ):
                marked.append(in_batch)
                continue
            try:
                self._client.delete_item(TableName=self._table, Key={PK: pk, SK: {"S": member}})
            except ClientError as exc:
                raise unavailable(exc, "DeleteItem") from exc
        return marked

    def _query(self, **kwargs: Any) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        kwargs["TableName"] = self._table
        while True:
            try:
                response = self._client.query(**kwargs)
            except ClientError as exc:
                raise unavailable(exc, "Query") from exc
            items.extend(response.get("Items", []))
            if "LastEvaluatedKey" not in response:
                return items
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def open_batches(self) -> list[str]:
        items = self._query(
            IndexName=TURNS_LOOKUP.name,
            KeyConditionExpression=f"{LOOKUP_KEY} = :key",
            ExpressionAttributeValues={":key": {"S": _OPEN_BATCHES}},
        )
        return [item["batch_id"]["S"] for item in items]

    def _members(self, batch_id: str) -> list[tuple[str, str, str]]:
        items = self._query(
            KeyConditionExpression=f"{PK} = :pk AND begins_with({SK}, :member)",
            ExpressionAttributeValues={
                ":pk": {"S": _batch_pk(batch_id)},
                ":member": {"S": _MEMBER},
            },
            ProjectionExpression=SK,
        )
        members = []
        for item in items:
            # MEMBER#tenant#user#turn: ids never hold "#"
            _, tenant, user_id, turn_id = item[SK]["S"].split("#", 3)
            members.append((tenant, user_id, turn_id))
        return members

    def batch_episodes(self, batch_id: str) -> list[Episode]:
        users: dict[tuple[str, str], list[str]] = {}
        for tenant, user_id, turn_id in self._members(batch_id):
            users.setdefault((tenant, user_id), []).append(turn_id)
        found: list[Episode] = []
        for (tenant, user_id), turn_ids in users.items():
            found.extend(self.get_episodes(tenant, user_id, turn_ids).values())
        return [
            episode
            for episode in found
            if episode.status is EpisodeStatus.IN_BATCH and episode.batch_id == batch_id
        ]

    def close_batch(self, batch_id: str) -> None:
        pk = {"S": _batch_pk(batch_id)}
        # The marker last: until it is gone the batch is listed, and closing can be redone.
        members = [
            {"DeleteRequest": {"Key": {PK: pk, SK: {"S": f"{_MEMBER}{'#'.join(member)}"}}}}
            for member in self._members(batch_id)
        ]
        batch_write(self._client, self._table, members)
        batch_write(
            self._client, self._table, [{"DeleteRequest": {"Key": {PK: pk, SK: {"S": _MARKER}}}}]
        )

    def episodes_in_batches(self) -> int:
        # Members counted, not read (a member whose episode was erased meanwhile still counts).
        total = 0
        for batch_id in self.open_batches():
            kwargs: dict[str, Any] = {
                "TableName": self._table,
                "KeyConditionExpression": f"{PK} = :pk AND begins_with({SK}, :member)",
                "ExpressionAttributeValues": {
                    ":pk": {"S": _batch_pk(batch_id)},
                    ":member": {"S": _MEMBER},
                },
                "Select": "COUNT",
            }
            while True:
                try:
                    response = self._client.query(**kwargs)
                except ClientError as exc:
                    raise unavailable(exc, "Query") from exc
                total += response.get("Count", 0)
                if "LastEvaluatedKey" not in response:
                    break
                kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        return total
