"""A trace's rollback on DynamoDB: one `TransactWriteItems` (all or nothing), every item
conditioned on what was read; the twin of `adapters/sqlite/rollback.py`.

The audit record lives in the turns table beside the trace (`ROLLBACK#tenant#trace_id`),
inserted only if absent: of two concurrent rollbacks of a trace exactly one applies, and the
user's erasure takes it with the trace's other rows. The first item checks that the trace row
exists unmarked (as persist's commit does): once the user's erasure has started, nothing of
the rollback is written (`UnknownTrace`), its span included. One transaction holds at most 100
items; `memwrite.edit.rollback` refuses a larger rollback before it gets here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from memwrite.adapters.aws.dynamodb_calls import unavailable
from memwrite.adapters.aws.dynamodb_ledger import (
    LEDGER_SK,
    ROLLBACK_SK,
    ledger_pk,
    rollback_pk,
    source_trace_check,
    span_item,
)
from memwrite.adapters.aws.dynamodb_store import (
    StoreTables,
    access_key,
    memory_put,
    outbox_put,
    transact,
    user_key,
)
from memwrite.errors import UnknownTrace
from memwrite.records.store import RollbackCommit, RollbackRecord
from memwrite.schema import PARTITION_KEY, SORT_KEY, outbox_sort_key

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

__all__ = ["ROLLBACK_SK", "DynamoTraceRollback", "rollback_pk"]

PK, SK = PARTITION_KEY, SORT_KEY
_BATCH_GET_LIMIT = 100


class DynamoTraceRollback:
    def __init__(self, client: DynamoDBClient, tables: StoreTables, spans_table: str) -> None:
        self._client = client
        self._tables = tables
        self._spans_table = spans_table

    def rollback_of(self, tenant: str, trace_id: str) -> RollbackRecord | None:
        try:
            response = self._client.get_item(
                TableName=self._tables.turns,
                Key={PK: {"S": rollback_pk(tenant, trace_id)}, SK: {"S": ROLLBACK_SK}},
                ConsistentRead=True,
            )
        except ClientError as exc:
            raise unavailable(exc, "GetItem") from exc
        item = response.get("Item")
        return None if item is None else RollbackRecord.model_validate_json(item["doc"]["S"])

    def traces_of_turns(self, tenant: str, turn_ids: Sequence[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        unique = sorted(set(turn_ids))
        for start in range(0, len(unique), _BATCH_GET_LIMIT):
            keys: list[dict[str, Any]] = [
                {PK: {"S": ledger_pk(tenant, turn_id)}, SK: {"S": LEDGER_SK}}
                for turn_id in unique[start : start + _BATCH_GET_LIMIT]
            ]
            request: dict[str, Any] = {self._tables.turns: {"Keys": keys, "ConsistentRead": True}}
            while request:
                try:
                    response = self._client.batch_get_item(RequestItems=request)
                except ClientError as exc:
                    raise unavailable(exc, "BatchGetItem") from exc
                for item in response.get("Responses", {}).get(self._tables.turns, []):
                    found[item[PK]["S"].rsplit("#", 1)[1]] = item["trace_id"]["S"]
                request = dict(response.get("UnprocessedKeys") or {})
        return found

    def apply_rollback(self, rollback: RollbackCommit) -> None:
        t = self._tables
        partition = user_key(rollback.tenant, rollback.user_id)
        record = rollback.record
        items: list[dict[str, Any]] = [source_trace_check(t.turns, record.tenant, record.trace_id)]
        for versioned in rollback.removed:
            mid = versioned.memory.memory_id
            items.append(
                {
                    "Delete": {
                        "TableName": t.memories,
                        "Key": {PK: {"S": partition}, SK: {"S": mid}},
                        "ConditionExpression": "rev = :rev",
                        "ExpressionAttributeValues": {":rev": {"N": str(versioned.rev)}},
                    }
                }
            )
            counter = {PK: {"S": access_key(rollback.tenant, rollback.user_id)}, SK: {"S": mid}}
            items.append({"Delete": {"TableName": t.turns, "Key": counter}})
            # Every row the memory's writes left (one per rev): a memory stored again later
            # starts at rev 1 and must find its outbox keys free (a new row, a stream INSERT).
            items.extend(
                {
                    "Delete": {
                        "TableName": t.outbox,
                        "Key": {PK: {"S": partition}, SK: {"S": outbox_sort_key(mid, rev)}},
                    }
                }
                for rev in range(1, versioned.rev + 1)
            )
        docs: dict[str, tuple[str, int]] = {}
        for memory, rev in rollback.changed:
            docs[memory.memory_id] = (memory.model_dump_json(), rev + 1)
            items.append({"Put": memory_put(t.memories, memory, rev)})
        for key, row in rollback.fact_rows.items():
            condition = {
                "ConditionExpression": "version = :version",
                "ExpressionAttributeValues": {":version": {"N": str(row.version)}},
            }
            row_key = {PK: {"S": partition}, SK: {"S": key}}
            if not row.facts:
                items.append({"Delete": {"TableName": t.entity_facts, "Key": row_key, **condition}})
                continue
            facts = {mid: fact.model_dump(mode="json") for mid, fact in row.facts.items()}
            item = {
                **row_key,
                "version": {"N": str(row.version + 1)},
                "facts": {"S": json.dumps(facts, sort_keys=True)},
            }
            items.append({"Put": {"TableName": t.entity_facts, "Item": item, **condition}})
        for row_out in rollback.outbox:
            doc, rev = docs[row_out.memory_id]
            items.append({"Put": outbox_put(t.outbox, partition, row_out, doc, rev)})
        items.append(
            {
                "Put": {
                    "TableName": t.turns,
                    "Item": {
                        PK: {"S": rollback_pk(record.tenant, record.trace_id)},
                        SK: {"S": ROLLBACK_SK},
                        "doc": {"S": record.model_dump_json()},
                    },
                    "ConditionExpression": f"attribute_not_exists({PK})",
                }
            }
        )
        items.append({"Put": {"TableName": self._spans_table, "Item": span_item(rollback.span)}})
        transact(self._client, items, refused=[UnknownTrace(record.trace_id)])
