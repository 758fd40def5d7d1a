"""One user's store as export reads it and import writes it back (`UserPortability`), in the
DynamoDB tables; the twin of `sqlite/portability.py`.

A snapshot reads the user's partitions (memories, entity_facts, entities, and the retrieval
counters and episodes in the turns table) with consistent queries; it is not one point in
time (DynamoDB has no multi-partition read transaction over queries), as any paginated read of
a live user is not. A restore is one `TransactWriteItems`: every item put only if absent, so
a unit lands whole or not at all, and of two concurrent imports of one unit exactly one writes
it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from memwrite.adapters.aws.dynamodb_calls import unavailable
from memwrite.adapters.aws.dynamodb_ledger import episode_pk, episode_puts
from memwrite.adapters.aws.dynamodb_store import (
    access_key,
    memory_put,
    outbox_put,
    transact,
    user_key,
)
from memwrite.claims.entities import Entity, VersionedEntity
from memwrite.records.entity_facts import FactObservation
from memwrite.records.episode import Episode
from memwrite.records.memory import MemoryUnit
from memwrite.records.store import OutboxOp, OutboxRow
from memwrite.records.user_snapshot import RestoreUnit, StoredFactRow, StoredMemory, UserSnapshot
from memwrite.schema import PARTITION_KEY, SORT_KEY

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

__all__ = ["DynamoPortability", "PortabilityTables"]

PK, SK = PARTITION_KEY, SORT_KEY


class PortabilityTables:
    def __init__(
        self, *, memories: str, entity_facts: str, entities: str, outbox: str, turns: str
    ) -> None:
        self.memories = memories
        self.entity_facts = entity_facts
        self.entities = entities
        self.outbox = outbox
        self.turns = turns


class DynamoPortability:
    def __init__(self, client: DynamoDBClient, tables: PortabilityTables) -> None:
        self._client = client
        self._tables = tables

    def _partition(self, table: str, partition: str) -> Iterator[dict[str, Any]]:
        kwargs: dict[str, Any] = {
            "TableName": table,
            "KeyConditionExpression": f"{PK} = :pk",
            "ExpressionAttributeValues": {":pk": {"S": partition}},
            "ConsistentRead": True,
        }
        while True:
            try:
                response = self._client.query(**kwargs)
            except ClientError as exc:
                raise unavailable(exc, "Query") from exc
            yield from response.get("Items", [])
            if "LastEvaluatedKey" not in response:
                return
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def snapshot(self, tenant: str, user_id: str) -> UserSnapshot:
        t, user = self._tables, user_key(tenant, user_id)
        counters = {
            item[SK]["S"]: (int(item["access_count"]["N"]), item["last_accessed"]["S"])
            for item in self._partition(t.turns, access_key(tenant, user_id))
        }
        memories = []
        for item in self._partition(t.memories, user):
            memory = MemoryUnit.model_validate_json(item["doc"]["S"])
            count, last = counters.get(memory.memory_id, (0, ""))
            memories.append(
                StoredMemory(
                    memory,
                    int(item["rev"]["N"]),
                    count,
                    datetime.fromisoformat(last) if last else None,
                )
            )
        rows = [
            StoredFactRow(
                item[SK]["S"],
                {
                    mid: FactObservation.model_validate(fact)
                    for mid, fact in json.loads(item["facts"]["S"]).items()
                },
                int(item["version"]["N"]),
            )
            for item in self._partition(t.entity_facts, user)
        ]
        entities = [
            VersionedEntity(
                Entity.model_validate_json(item["doc"]["S"]),
                int(item.get("version", {}).get("N", "1")),
            )
            for item in self._partition(t.entities, user)
        ]
        episodes = [
            Episode.model_validate_json(item["doc"]["S"])
            for item in self._partition(t.turns, episode_pk(tenant, user_id))
        ]
        return UserSnapshot(entities=entities, fact_rows=rows, memories=memories, episodes=episodes)

    def restore(self, unit: RestoreUnit) -> None:
        t, user = self._tables, user_key(unit.tenant, unit.user_id)
        absent = f"attribute_not_exists({PK})"
        items: list[dict[str, Any]] = []
        for versioned in unit.entities:
            item = {
                PK: {"S": user},
                SK: {"S": versioned.entity.entity_id},
                "doc": {"S": versioned.entity.model_dump_json()},
                "version": {"N": str(versioned.version)},
            }
            items.append(
                {"Put": {"TableName": t.entities, "Item": item, "ConditionExpression": absent}}
            )
        for stored in unit.memories:
            memory = stored.memory
            # `memory_put` writes rev = read rev + 1 and its condition is "absent" for None.
            put = memory_put(t.memories, memory, None)
            put["Item"]["rev"] = {"N": str(stored.rev)}
            items.append({"Put": put})
            op = OutboxOp.UPSERT if memory.active else OutboxOp.DELETE
            row = OutboxRow(memory.memory_id, op, memory.trace_id)
            doc = put["Item"]["doc"]["S"]
            items.append({"Put": outbox_put(t.outbox, user, row, doc, stored.rev)})
            if stored.access_count:
                last = stored.last_accessed.isoformat() if stored.last_accessed else ""
                counter = {
                    PK: {"S": access_key(unit.tenant, unit.user_id)},
                    SK: {"S": memory.memory_id},
                    "access_count": {"N": str(stored.access_count)},
                    "last_accessed": {"S": last},
                }
                items.append({"Put": {"TableName": t.turns, "Item": counter}})
        for fact_row in unit.fact_rows:
            facts = {mid: fact.model_dump(mode="json") for mid, fact in fact_row.facts.items()}
            item = {
                PK: {"S": user},
                SK: {"S": fact_row.key},
                "version": {"N": str(fact_row.version)},
                "facts": {"S": json.dumps(facts, sort_keys=True)},
            }
            put_row = {"TableName": t.entity_facts, "Item": item, "ConditionExpression": absent}
            items.append({"Put": put_row})
        for episode in unit.episodes:
            # The episode item only if absent, and its outbox row: stage 7 indexes it.
            episode_put, outbox = episode_puts(t.turns, t.outbox, episode)
            episode_put["Put"]["ConditionExpression"] = absent
            items.extend([episode_put, outbox])
        if items:
            transact(self._client, items)
