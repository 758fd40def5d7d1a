"""DynamoDB episodes: items of the turns table (single-table, `EPISODE#tenant#user`, sorted by
turn id), listed in observation order through the table's overloaded `lookup` index
(`USEREPISODES#tenant#user`, `observed_at#turn_id`). `expires_at` is the table's TTL
attribute: DynamoDB deletes an expired episode by itself (lazily; reads treat it as expired
at once). `episode_puts` are the items `DynamoSessionLog.append` adds to its transaction."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from memwrite.adapters.aws.dynamodb_calls import unavailable
from memwrite.adapters.aws.dynamodb_ledger import episode_item, episode_lookup_key, episode_pk
from memwrite.adapters.page_cursor import decode_trace_cursor, encode_trace_cursor, time_bounds
from memwrite.episode import Episode, EpisodePage, EpisodeStatus
from memwrite.schema import (
    LOOKUP_KEY,
    LOOKUP_SORT,
    PARTITION_KEY,
    PENDING_SHARD,
    PENDING_SHARDS,
    PENDING_USER,
    SORT_KEY,
    TURNS_LOOKUP,
    TURNS_PENDING_EPISODES,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

__all__ = ["DynamoEpisodeStore"]

PK, SK = PARTITION_KEY, SORT_KEY
_BATCH_GET_LIMIT = 100


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
