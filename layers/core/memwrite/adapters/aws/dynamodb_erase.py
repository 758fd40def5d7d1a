"""Erasing a user from every DynamoDB table (`DELETE /v1/users/{user_id}/memories`).

The turns table is keyed by turn and trace, not by user, so the user's traces are found through
their spans (the spans table's `by_user` index: every request leaves a span per turn). Their
trace rows are marked erased first: persist's commit, extract's session-log append and
resolve's entity writes are conditional on their source trace existing unmarked, so a turn
still in the queue or in the state machine writes nothing from here on, and whatever it wrote
before is in the partitions deleted next. Per-user partitions (`tenant#user_id`) then go whole:
outbox, memories, entity_facts, entities and the retrieval counters (read consistently: a
commit just before the mark is seen). Then each trace's rows: its ledger rows (`TURN#`), the
trace and its inputs (`TRACE#`), its memory outcomes (`TRACEMEM#`), its rollback record
(`ROLLBACK#`), its session's redacted turns (`SESSION#`) and the session's last question
(`LASTQ#`). Spans go last: they are how a retried erasure finds what an interrupted one left
(the marked trace rows still name their turns and session until then).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from memwrite.adapters.aws.dynamodb_calls import batch_write, unavailable
from memwrite.adapters.aws.dynamodb_ledger import (
    LEDGER_SK,
    QUESTION_SK,
    TRACE_ERASED,
    TRACE_SK,
    episode_pk,
    last_question_pk,
    ledger_pk,
    session_pk,
    trace_memories_pk,
    trace_pk,
)
from memwrite.adapters.aws.dynamodb_rollback import rollback_pk
from memwrite.adapters.aws.dynamodb_store import access_key
from memwrite.payloads import OutboxChange
from memwrite.ports import UserErasure
from memwrite.records.change_events import ERASURE_ROW_PREFIX, erasure_row_id
from memwrite.schema import (
    OUTBOX_PENDING,
    PARTITION_KEY,
    SORT_KEY,
    SPANS_BY_USER,
    outbox_sort_key,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

__all__ = ["DynamoUserEraser", "EraseTables"]

PK, SK = PARTITION_KEY, SORT_KEY
ERASURE_OUTBOX_OP = "erasure"  # never read as a memory by `pending_memories`


class EraseTables:
    def __init__(
        self,
        *,
        memories: str,
        entity_facts: str,
        entities: str,
        outbox: str,
        turns: str,
        spans: str,
    ) -> None:
        self.memories = memories
        self.entity_facts = entity_facts
        self.entities = entities
        self.outbox = outbox
        self.turns = turns
        self.spans = spans


class DynamoUserEraser:
    def __init__(self, client: DynamoDBClient, tables: EraseTables) -> None:
        self._client = client
        self._tables = tables

    def erase_user(self, tenant: str, user_id: str) -> UserErasure:
        t = self._tables
        user_key = f"{tenant}#{user_id}"
        spans = list(
            self._query(
                t.spans,
                f"{SPANS_BY_USER.partition_key} = :user",
                {":user": {"S": user_key}},
                index=SPANS_BY_USER.name,
            )
        )
        trace_ids = sorted({span[PK]["S"].removeprefix(f"{tenant}#") for span in spans})
        # Before anything is deleted: no turn of these traces is committed after this point.
        for trace_id in trace_ids:
            self._mark_erased(tenant, trace_id)
        removed = {
            # The outbox next: nothing of the user is indexed again after this point.
            "outbox": self._delete_keys(
                t.outbox,
                [
                    key
                    for key in self._partition_keys(t.outbox, user_key)
                    if not key[SK]["S"].startswith(ERASURE_ROW_PREFIX)
                ],
            ),
            "memories": self._delete_partition(t.memories, user_key),
            "entity_facts": self._delete_partition(t.entity_facts, user_key),
            "entities": self._delete_partition(t.entities, user_key),
            "access_counters": self._delete_partition(t.turns, access_key(tenant, user_id)),
            "episodes": self._delete_partition(t.turns, episode_pk(tenant, user_id)),
        }
        turns_rows = 0
        for trace_id in trace_ids:
            turns_rows += self._erase_trace(tenant, user_id, trace_id)
        removed["turns_ledger_and_traces"] = turns_rows
        removed["spans"] = self._delete_keys(t.spans, [self._key(span) for span in spans])
        return UserErasure(removed)

    def announce(self, tenant: str, user_id: str, at: datetime) -> OutboxChange:
        change = OutboxChange(
            tenant=tenant, user_id=user_id, memory_id=erasure_row_id(at), rev=1, trace_id=None
        )
        partition = f"{tenant}#{user_id}"
        item = {
            PK: {"S": partition},
            SK: {"S": outbox_sort_key(change.memory_id, change.rev)},
            "memory_id": {"S": change.memory_id},
            "op": {"S": ERASURE_OUTBOX_OP},
            "doc": {"S": "{}"},
            OUTBOX_PENDING.partition_key: {"S": partition},
        }
        try:
            self._client.put_item(TableName=self._tables.outbox, Item=item)
        except ClientError as exc:
            raise unavailable(exc, "PutItem") from exc
        return change

    def _mark_erased(self, tenant: str, trace_id: str) -> None:
        try:
            self._client.update_item(
                TableName=self._tables.turns,
                Key={PK: {"S": trace_pk(tenant, trace_id)}, SK: {"S": TRACE_SK}},
                UpdateExpression=f"SET {TRACE_ERASED} = :at",
                # A trace already gone (a retried erasure) stays gone, not a bare marked key.
                ConditionExpression=f"attribute_exists({PK})",
                ExpressionAttributeValues={":at": {"S": datetime.now(UTC).isoformat()}},
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise unavailable(exc, "UpdateItem") from exc

    def _erase_trace(self, tenant: str, user_id: str, trace_id: str) -> int:
        t = self._tables
        trace_key = {PK: {"S": trace_pk(tenant, trace_id)}, SK: {"S": TRACE_SK}}
        try:
            trace = self._client.get_item(TableName=t.turns, Key=trace_key).get("Item")
        except ClientError as exc:
            raise unavailable(exc, "GetItem") from exc
        keys: list[dict[str, Any]] = []
        if trace is not None:
            keys.extend(
                {PK: {"S": ledger_pk(tenant, turn["S"])}, SK: {"S": LEDGER_SK}}
                for turn in trace.get("turn_ids", {}).get("L", [])
            )
            session_id = trace["session_id"]["S"]
            keys.extend(self._partition_keys(t.turns, session_pk(tenant, user_id, session_id)))
            question = last_question_pk(tenant, user_id, session_id)
            keys.append({PK: {"S": question}, SK: {"S": QUESTION_SK}})
        # The trace and its inputs (`INPUT#` items of its partition).
        keys.extend(self._partition_keys(t.turns, trace_pk(tenant, trace_id)))
        keys.extend(self._partition_keys(t.turns, trace_memories_pk(tenant, trace_id)))
        keys.extend(self._partition_keys(t.turns, rollback_pk(tenant, trace_id)))
        return self._delete_keys(t.turns, keys)

    @staticmethod
    def _key(item: dict[str, Any]) -> dict[str, Any]:
        return {PK: item[PK], SK: item[SK]}

    def _partition_keys(self, table: str, partition: str) -> list[dict[str, Any]]:
        items = self._query(table, f"{PK} = :pk", {":pk": {"S": partition}})
        return [self._key(item) for item in items]

    def _delete_partition(self, table: str, partition: str) -> int:
        return self._delete_keys(table, self._partition_keys(table, partition))

    def _query(
        self,
        table: str,
        condition: str,
        values: dict[str, Any],
        index: str | None = None,
    ) -> Iterator[dict[str, Any]]:
        kwargs: dict[str, Any] = {
            "TableName": table,
            "KeyConditionExpression": condition,
            "ExpressionAttributeValues": values,
        }
        if index is None:
            kwargs["ConsistentRead"] = True  # an item written a moment ago goes too
        else:
            kwargs["IndexName"] = index
        while True:
            try:
                response = self._client.query(**kwargs)
            except ClientError as exc:
                raise unavailable(exc, "Query") from exc
            yield from response.get("Items", [])
            if "LastEvaluatedKey" not in response:
                return
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def _delete_keys(self, table: str, keys: list[dict[str, Any]]) -> int:
        unique = list({(k[PK]["S"], k[SK]["S"]): k for k in keys}.values())
        batch_write(self._client, table, [{"DeleteRequest": {"Key": k}} for k in unique])
        return len(unique)
