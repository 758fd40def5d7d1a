"""DynamoDB memory store: memories, entity_facts, the trace ledger and the outbox, committed in
one `TransactWriteItems` per candidate (all or nothing; a lost race is a `WriteConflict`), on
the condition that the source trace still exists and is not being erased (`SourceErased`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from memwrite.adapters.aws.dynamodb_calls import failed_condition_at, unavailable
from memwrite.adapters.aws.dynamodb_ledger import (
    memory_traces_key,
    rollback_absent_check,
    source_trace_check,
    trace_memories_pk,
)
from memwrite.adapters.page_cursor import decode_cursor, encode_cursor
from memwrite.claims.entities import Entity, VersionedEntity
from memwrite.errors import MemwriteError, SourceErased, SourceRolledBack, WriteConflict
from memwrite.ports import MemoryPage
from memwrite.records.entity_facts import FactObservation
from memwrite.records.memory import MemoryUnit
from memwrite.records.store import Commit, FactRow, OutboxRow, VersionedMemory
from memwrite.schema import (
    EXPIRY_DUE,
    EXPIRY_SHARD,
    LOOKUP_KEY,
    LOOKUP_SORT,
    MEMORIES_BY_ID,
    OUTBOX_PENDING,
    PARTITION_KEY,
    SORT_KEY,
    TTL_ATTRIBUTE,
    expiry_due_sort,
    expiry_shard_of,
    outbox_sort_key,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

__all__ = [
    "DynamoEntityStore",
    "DynamoMemoryStore",
    "StoreTables",
    "access_key",
    "memory_put",
    "outbox_put",
    "transact",
    "user_key",
]

PK, SK = PARTITION_KEY, SORT_KEY
_BATCH_GET_LIMIT = 100
_CONFLICT_CODES = frozenset({"ConditionalCheckFailed", "TransactionConflict"})


def _is_transaction_conflict(exc: ClientError) -> bool:
    """A transaction cancelled by a version condition or a concurrent transaction."""
    if exc.response.get("Error", {}).get("Code") != "TransactionCanceledException":
        return False
    reasons = exc.response.get("CancellationReasons", [])
    return not reasons or bool({reason.get("Code") for reason in reasons} & _CONFLICT_CODES)


class StoreTables:
    def __init__(self, *, memories: str, entity_facts: str, outbox: str, turns: str) -> None:
        self.memories = memories
        self.entity_facts = entity_facts
        self.outbox = outbox
        self.turns = turns


def user_key(tenant: str, user_id: str) -> str:
    return f"{tenant}#{user_id}"


def access_key(tenant: str, user_id: str) -> str:
    """Partition (in the turns table) of a user's retrieval counters, one item per memory."""
    return f"ACCESS#{tenant}#{user_id}"


def memory_put(table: str, memory: MemoryUnit, expected: int | None) -> dict[str, Any]:
    """A transaction's put of a whole memory on the rev read (None: must not exist)."""
    item: dict[str, Any] = {
        PK: {"S": user_key(memory.tenant, memory.user_id)},
        SK: {"S": memory.memory_id},
        MEMORIES_BY_ID.partition_key: {"S": f"{memory.tenant}#{memory.memory_id}"},
        "rev": {"N": str((expected or 0) + 1)},
        "doc": {"S": memory.model_dump_json()},
    }
    if memory.expires_at is not None:
        item[TTL_ATTRIBUTE] = {"N": str(memory.expires_at)}
    # In the sparse `expiry_due` index while its expiry is still to be announced: every write
    # of a memory goes through here, so clearing, moving or announcing it keeps the index right.
    if memory.expiry_due is not None:
        item[EXPIRY_SHARD] = {"S": expiry_shard_of(memory.memory_id)}
        item[EXPIRY_DUE] = {"S": expiry_due_sort(memory.expiry_due)}
    put: dict[str, Any] = {"TableName": table, "Item": item}
    if expected is None:
        put["ConditionExpression"] = f"attribute_not_exists({PK})"
    else:
        put["ConditionExpression"] = "rev = :rev"
        put["ExpressionAttributeValues"] = {":rev": {"N": str(expected)}}
    return put


def outbox_put(table: str, partition: str, row: OutboxRow, doc: str, rev: int) -> dict[str, Any]:
    """A transaction's put of one outbox row (pending: in the sparse `pending` index)."""
    return {
        "TableName": table,
        "Item": {
            PK: {"S": partition},
            SK: {"S": outbox_sort_key(row.memory_id, rev)},
            "memory_id": {"S": row.memory_id},
            "op": {"S": row.op.value},
            "trace_id": {"S": row.trace_id},
            "doc": {"S": doc},
            OUTBOX_PENDING.partition_key: {"S": partition},
        },
    }


def transact(
    client: DynamoDBClient,
    items: list[dict[str, Any]],
    *,
    refused: Sequence[MemwriteError] = (),
) -> None:
    """`TransactWriteItems`; a failed condition or a conflicting transaction is a
    `WriteConflict` (nothing applied), anything else the store being unavailable.
    `refused[i]` is raised instead when the condition of item i (one of the leading checks:
    the source trace's) failed first."""
    try:
        client.transact_write_items(TransactItems=items)  # type: ignore[arg-type]
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "TransactionCanceledException":
            reasons = exc.response.get("CancellationReasons", [])
            failed = failed_condition_at(exc)
            if failed is not None and failed < len(refused):
                raise refused[failed] from exc
            codes = {reason.get("Code") for reason in reasons}
            if codes & _CONFLICT_CODES or not reasons:
                raise WriteConflict("a concurrent write changed what was read") from exc
        raise unavailable(exc, "TransactWriteItems") from exc


class DynamoMemoryStore:
    def __init__(self, client: DynamoDBClient, tables: StoreTables) -> None:
        self._client = client
        self._tables = tables

    def get_memories(
        self, tenant: str, user_id: str, ids: Sequence[str]
    ) -> dict[str, VersionedMemory]:
        found: dict[str, VersionedMemory] = {}
        unique = sorted(set(ids))
        for start in range(0, len(unique), _BATCH_GET_LIMIT):
            keys: list[dict[str, Any]] = [
                {PK: {"S": user_key(tenant, user_id)}, SK: {"S": memory_id}}
                for memory_id in unique[start : start + _BATCH_GET_LIMIT]
            ]
            request: dict[str, Any] = {
                self._tables.memories: {"Keys": keys, "ConsistentRead": True}
            }
            while request:
                try:
                    response = self._client.batch_get_item(RequestItems=request)
                except ClientError as exc:
                    raise unavailable(exc, "BatchGetItem") from exc
                for item in response.get("Responses", {}).get(self._tables.memories, []):
                    memory = MemoryUnit.model_validate_json(item["doc"]["S"])
                    found[memory.memory_id] = VersionedMemory(memory, int(item["rev"]["N"]))
                request = dict(response.get("UnprocessedKeys") or {})
        return found

    def get_fact_row(self, tenant: str, user_id: str, key: str) -> FactRow:
        try:
            response = self._client.get_item(
                TableName=self._tables.entity_facts,
                Key={PK: {"S": user_key(tenant, user_id)}, SK: {"S": key}},
                ConsistentRead=True,
            )
        except ClientError as exc:
            raise unavailable(exc, "GetItem") from exc
        item = response.get("Item")
        if item is None:
            return FactRow()
        facts = {
            memory_id: FactObservation.model_validate(fact)
            for memory_id, fact in json.loads(item["facts"]["S"]).items()
        }
        return FactRow(facts=facts, version=int(item["version"]["N"]))

    def pending_memories(self, tenant: str, user_id: str, limit: int) -> list[MemoryUnit]:
        try:
            response = self._client.query(
                TableName=self._tables.outbox,
                IndexName=OUTBOX_PENDING.name,
                KeyConditionExpression=f"{OUTBOX_PENDING.partition_key} = :user",
                ExpressionAttributeValues={":user": {"S": user_key(tenant, user_id)}},
                ScanIndexForward=False,
                Limit=limit,
            )
        except ClientError as exc:
            raise unavailable(exc, "Query") from exc
        latest: dict[str, MemoryUnit] = {}
        for item in response.get("Items", []):
            if item["op"]["S"] == "upsert":
                memory = MemoryUnit.model_validate_json(item["doc"]["S"])
                latest.setdefault(memory.memory_id, memory)
        return list(latest.values())

    def memories_of(self, tenant: str, user_id: str) -> list[MemoryUnit]:
        memories: list[MemoryUnit] = []
        kwargs: dict[str, Any] = {
            "TableName": self._tables.memories,
            "KeyConditionExpression": f"{PK} = :pk",
            "ExpressionAttributeValues": {":pk": {"S": user_key(tenant, user_id)}},
            "ConsistentRead": True,
        }
        while True:
            try:
                response = self._client.query(**kwargs)
            except ClientError as exc:
                raise unavailable(exc, "Query") from exc
            memories.extend(
                MemoryUnit.model_validate_json(item["doc"]["S"]) for item in response["Items"]
            )
            if "LastEvaluatedKey" not in response:
                return memories
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def memory_by_id(self, tenant: str, memory_id: str) -> MemoryUnit | None:
        try:
            response = self._client.query(
                TableName=self._tables.memories,
                IndexName=MEMORIES_BY_ID.name,
                KeyConditionExpression=f"{MEMORIES_BY_ID.partition_key} = :id",
                ExpressionAttributeValues={":id": {"S": f"{tenant}#{memory_id}"}},
            )
        except ClientError as exc:
            raise unavailable(exc, "Query") from exc
        items = response.get("Items", [])
        if not items:
            return None
        memory = MemoryUnit.model_validate_json(items[0]["doc"]["S"])
        return self._with_access(tenant, memory.user_id, [memory])[0]

    def page_of(self, tenant: str, user_id: str, limit: int, cursor: str | None) -> MemoryPage:
        kwargs: dict[str, Any] = {
            "TableName": self._tables.memories,
            "KeyConditionExpression": f"{PK} = :pk",
            "ExpressionAttributeValues": {":pk": {"S": user_key(tenant, user_id)}},
            "Limit": limit,
        }
        if cursor is not None:
            kwargs["ExclusiveStartKey"] = {
                PK: {"S": user_key(tenant, user_id)},
                SK: {"S": decode_cursor(cursor)},
            }
        try:
            response = self._client.query(**kwargs)
        except ClientError as exc:
            raise unavailable(exc, "Query") from exc
        memories = [MemoryUnit.model_validate_json(i["doc"]["S"]) for i in response["Items"]]
        last = response.get("LastEvaluatedKey")
        next_cursor = encode_cursor(last[SK]["S"]) if last else None
        return MemoryPage(self._with_access(tenant, user_id, memories), next_cursor)

    def record_access(self, tenant: str, user_id: str, memory_ids: Sequence[str], at: str) -> None:
        # Counters live beside the memory, not in it: a memory's item is rewritten whole (and
        # versioned) by persist, and a read must never make a write of the pipeline conflict.
        for memory_id in dict.fromkeys(memory_ids):
            try:
                self._client.update_item(
                    TableName=self._tables.turns,
                    Key={PK: {"S": access_key(tenant, user_id)}, SK: {"S": memory_id}},
                    UpdateExpression="ADD access_count :one SET last_accessed = :at",
                    ExpressionAttributeValues={":one": {"N": "1"}, ":at": {"S": at}},
                )
            except ClientError as exc:
                raise unavailable(exc, "UpdateItem") from exc
        # A search racing an erasure must not leave counters behind (with the user's key and
        # memory ids): counters of memories gone by now are removed again. The erasure deletes
        # memories before counters, so every interleaving ends without them.
        gone = set(memory_ids) - set(self.get_memories(tenant, user_id, memory_ids))
        for memory_id in gone:
            try:
                self._client.delete_item(
                    TableName=self._tables.turns,
                    Key={PK: {"S": access_key(tenant, user_id)}, SK: {"S": memory_id}},
                )
            except ClientError as exc:
                raise unavailable(exc, "DeleteItem") from exc

    def _with_access(
        self, tenant: str, user_id: str, memories: list[MemoryUnit]
    ) -> list[MemoryUnit]:
        if not memories:
            return memories
        keys: list[dict[str, Any]] = [
            {PK: {"S": access_key(tenant, user_id)}, SK: {"S": m.memory_id}} for m in memories
        ]
        try:
            response = self._client.batch_get_item(
                RequestItems={self._tables.turns: {"Keys": keys}}
            )
        except ClientError as exc:
            raise unavailable(exc, "BatchGetItem") from exc
        counts = {
            item[SK]["S"]: (int(item["access_count"]["N"]), item["last_accessed"]["S"])
            for item in response.get("Responses", {}).get(self._tables.turns, [])
        }
        return [
            m.model_copy(
                update={
                    "access_count": counts[m.memory_id][0],
                    "last_accessed": datetime.fromisoformat(counts[m.memory_id][1]),
                }
            )
            if m.memory_id in counts
            else m
            for m in memories
        ]

    def commit(self, commit: Commit) -> None:
        partition = user_key(commit.tenant, commit.user_id)
        # First items (their cancellation reasons come first): the source trace must exist,
        # its user's erasure must not have started, and it must not have been rolled back.
        items: list[dict[str, Any]] = []
        refused: list[MemwriteError] = []
        if commit.from_trace:
            items += [
                source_trace_check(self._tables.turns, commit.tenant, commit.trace_id),
                rollback_absent_check(self._tables.turns, commit.tenant, commit.trace_id),
            ]
            refused += [
                SourceErased(commit.tenant, commit.trace_id),
                SourceRolledBack(commit.tenant, commit.trace_id),
            ]
        docs: dict[str, tuple[str, int]] = {}
        for memory, expected in commit.memories:
            rev = (expected or 0) + 1
            docs[memory.memory_id] = (memory.model_dump_json(), rev)
            items.append({"Put": memory_put(self._tables.memories, memory, expected)})
        if commit.fact_key is not None and commit.fact_row is not None:
            row = commit.fact_row
            facts = {mid: fact.model_dump(mode="json") for mid, fact in row.facts.items()}
            put = {
                "TableName": self._tables.entity_facts,
                "Item": {
                    PK: {"S": partition},
                    SK: {"S": commit.fact_key},
                    "version": {"N": str(row.version + 1)},
                    "facts": {"S": json.dumps(facts, sort_keys=True)},
                },
            }
            if row.version == 0:
                put["ConditionExpression"] = f"attribute_not_exists({PK})"
            else:
                put["ConditionExpression"] = "version = :version"
                put["ExpressionAttributeValues"] = {":version": {"N": str(row.version)}}
            items.append({"Put": put})
        for entry in commit.ledger:
            items.append(
                {
                    "Put": {
                        "TableName": self._tables.turns,
                        "Item": {
                            PK: {"S": trace_memories_pk(commit.tenant, entry.trace_id)},
                            # Stored and later merged by one trace: two rows, not an overwrite.
                            SK: {"S": f"{entry.memory_id}#{entry.outcome}"},
                            "memory_id": {"S": entry.memory_id},
                            "outcome": {"S": entry.outcome},
                            # The memory's traces (`traces_of_memory`) through the index.
                            LOOKUP_KEY: {"S": memory_traces_key(commit.tenant, entry.memory_id)},
                            LOOKUP_SORT: {"S": f"{entry.trace_id}#{entry.outcome}"},
                        },
                    }
                }
            )
        for row_out in commit.outbox:
            doc, rev = docs[row_out.memory_id]
            items.append({"Put": outbox_put(self._tables.outbox, partition, row_out, doc, rev)})
        transact(self._client, items, refused=refused)


class DynamoEntityStore:
    """The entities table: one item per entity of a user, versioned for conditional writes,
    each write conditional on its source traces (turns table) too."""

    def __init__(self, client: DynamoDBClient, table_name: str, turns_table: str) -> None:
        self._client = client
        self._table = table_name
        self._turns = turns_table

    def entities_of(self, tenant: str, user_id: str, limit: int) -> list[Entity]:
        entities: list[Entity] = []
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": f"{PK} = :pk",
            "ExpressionAttributeValues": {":pk": {"S": user_key(tenant, user_id)}},
        }
        while True:
            try:
                response = self._client.query(**kwargs)
            except ClientError as exc:
                raise unavailable(exc, "Query") from exc
            entities.extend(Entity.model_validate_json(i["doc"]["S"]) for i in response["Items"])
            if "LastEvaluatedKey" not in response:
                break
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        entities.sort(key=lambda entity: entity.last_seen, reverse=True)
        return entities[:limit]

    def _key(self, tenant: str, user_id: str, entity_id: str) -> dict[str, Any]:
        return {PK: {"S": user_key(tenant, user_id)}, SK: {"S": entity_id}}

    def get(self, tenant: str, user_id: str, entity_id: str) -> VersionedEntity | None:
        key = self._key(tenant, user_id, entity_id)
        try:
            item = self._client.get_item(TableName=self._table, Key=key, ConsistentRead=True)
        except ClientError as exc:
            raise unavailable(exc, "GetItem") from exc
        found = item.get("Item")
        if found is None:
            return None
        entity = Entity.model_validate_json(found["doc"]["S"])
        return VersionedEntity(entity, int(found.get("version", {}).get("N", "1")))

    def put(
        self, entity: Entity, expected_version: int | None, source_trace_ids: Sequence[str]
    ) -> None:
        key = self._key(entity.tenant, entity.user_id, entity.entity_id)
        version = (expected_version or 0) + 1
        item = {**key, "doc": {"S": entity.model_dump_json()}, "version": {"N": str(version)}}
        put: dict[str, Any] = (
            {"ConditionExpression": f"attribute_not_exists({PK})"}
            if expected_version is None
            else {
                "ConditionExpression": "version = :version",
                "ExpressionAttributeValues": {":version": {"N": str(expected_version)}},
            }
        )
        # The trace checks first: a failed one's index names the trace.
        traces = list(dict.fromkeys(source_trace_ids))
        items = [source_trace_check(self._turns, entity.tenant, trace) for trace in traces]
        items.append({"Put": {"TableName": self._table, "Item": item, **put}})
        try:
            self._client.transact_write_items(TransactItems=items)  # type: ignore[arg-type]
        except ClientError as exc:
            failed = failed_condition_at(exc)
            if failed is not None and failed < len(traces):
                raise SourceErased(entity.tenant, traces[failed]) from exc
            if failed is not None or _is_transaction_conflict(exc):
                raise WriteConflict(f"entity {entity.entity_id} changed since it was read") from exc
            raise unavailable(exc, "TransactWriteItems") from exc
