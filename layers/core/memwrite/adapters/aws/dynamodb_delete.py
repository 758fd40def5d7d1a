"""One memory's deletion on DynamoDB: one `TransactWriteItems` (all or nothing), every item
conditioned on what was read; the twin of `adapters/sqlite/delete.py`.

The memory's outbox rows (one per rev) go with it, so a memory id stored again later finds
their keys free (new rows: stream INSERTs, which are stage 7's work). One transaction holds at
most 100 items: the rows of the oldest revs that do not fit are deleted just before it (stage
7 has long handled them; a deletion then refused leaves only those done rows gone).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from memwrite.adapters.aws.dynamodb_calls import batch_write
from memwrite.adapters.aws.dynamodb_ledger import span_item
from memwrite.adapters.aws.dynamodb_store import (
    StoreTables,
    access_key,
    memory_put,
    outbox_put,
    transact,
    user_key,
)
from memwrite.records.store import DeletionCommit
from memwrite.schema import PARTITION_KEY, SORT_KEY, outbox_sort_key

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

__all__ = ["DynamoMemoryDeletion"]

PK, SK = PARTITION_KEY, SORT_KEY
MAX_TRANSACTION_ITEMS = 100


class DynamoMemoryDeletion:
    def __init__(self, client: DynamoDBClient, tables: StoreTables, spans_table: str) -> None:
        self._client = client
        self._tables = tables
        self._spans_table = spans_table

    def apply_deletion(self, deletion: DeletionCommit) -> None:
        t = self._tables
        partition = user_key(deletion.tenant, deletion.user_id)
        removed = deletion.removed
        mid = removed.memory.memory_id
        counter = {PK: {"S": access_key(deletion.tenant, deletion.user_id)}, SK: {"S": mid}}
        items: list[dict[str, Any]] = [
            {
                "Delete": {
                    "TableName": t.memories,
                    "Key": {PK: {"S": partition}, SK: {"S": mid}},
                    "ConditionExpression": "rev = :rev",
                    "ExpressionAttributeValues": {":rev": {"N": str(removed.rev)}},
                }
            },
            {"Delete": {"TableName": t.turns, "Key": counter}},
        ]
        docs: dict[str, tuple[str, int]] = {}
        for memory, rev in deletion.changed:
            docs[memory.memory_id] = (memory.model_dump_json(), rev + 1)
            items.append({"Put": memory_put(t.memories, memory, rev)})
        if deletion.fact_key is not None and deletion.fact_row is not None:
            row = deletion.fact_row
            condition = {
                "ConditionExpression": "version = :version",
                "ExpressionAttributeValues": {":version": {"N": str(row.version)}},
            }
            row_key = {PK: {"S": partition}, SK: {"S": deletion.fact_key}}
            if row.facts:
                facts = {m: fact.model_dump(mode="json") for m, fact in row.facts.items()}
                item = {
                    **row_key,
                    "version": {"N": str(row.version + 1)},
                    "facts": {"S": json.dumps(facts, sort_keys=True)},
                }
                items.append({"Put": {"TableName": t.entity_facts, "Item": item, **condition}})
            else:
                items.append({"Delete": {"TableName": t.entity_facts, "Key": row_key, **condition}})
        for row_out in deletion.outbox:
            doc, rev = docs[row_out.memory_id]
            items.append({"Put": outbox_put(t.outbox, partition, row_out, doc, rev)})
        items.append({"Put": outbox_put(t.outbox, partition, deletion.announcement, "{}", rev=1)})
        items.append({"Put": {"TableName": self._spans_table, "Item": span_item(deletion.span)}})
        outbox_keys = [
            {PK: {"S": partition}, SK: {"S": outbox_sort_key(mid, rev)}}
            for rev in range(1, removed.rev + 1)
        ]
        room = max(0, MAX_TRANSACTION_ITEMS - len(items))
        split = max(0, len(outbox_keys) - room)
        older, kept = outbox_keys[:split], outbox_keys[split:]
        if older:
            batch_write(self._client, t.outbox, [{"DeleteRequest": {"Key": k}} for k in older])
        items.extend({"Delete": {"TableName": t.outbox, "Key": key}} for key in kept)
        transact(self._client, items)
