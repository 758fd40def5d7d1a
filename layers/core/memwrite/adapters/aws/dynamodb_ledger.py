"""DynamoDB adapters of the turns and spans tables: the turns ledger, traces, sessions' last
questions, rate-gate claims, the session log (with the episode items it writes) and the spans;
the twin of `memwrite.adapters.sqlite.ledger`.

Low-level client calls with explicit attribute types: the items are small and flat, and the
client is cheaper to create at cold start than the resource layer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from memwrite.adapters.aws.dynamodb_calls import (
    batch_get,
    batch_write,
    failed_conditions_at,
    unavailable,
)
from memwrite.adapters.page_cursor import (
    decode_trace_cursor,
    encode_trace_cursor,
    time_bounds,
    trace_sort_key,
)
from memwrite.errors import ConfigError
from memwrite.models import LlmUsageSummary, QueuedTurn, StageSpan, TraceInput, session_sort_key
from memwrite.ports import TracePage, TraceRecord
from memwrite.records.episode import Episode, EpisodeStatus, episode_doc_id
from memwrite.schema import (
    LOOKUP_KEY,
    LOOKUP_SORT,
    OUTBOX_PENDING,
    PARTITION_KEY,
    PENDING_SHARD,
    PENDING_USER,
    SORT_KEY,
    SPAN_AT,
    SPAN_USER_KEY,
    TTL_ATTRIBUTE,
    TURNS_LOOKUP,
    outbox_sort_key,
    pending_shard_of,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

__all__ = [
    "EPISODE_OUTBOX_OP",
    "LEDGER_SK",
    "QUESTION_SK",
    "ROLLBACK_SK",
    "TRACE_ERASED",
    "TRACE_SK",
    "DynamoRateStore",
    "DynamoSessionLog",
    "DynamoSpanStore",
    "DynamoTurnLedger",
    "episode_item",
    "episode_lookup_key",
    "episode_pk",
    "episode_puts",
    "last_question_pk",
    "ledger_pk",
    "memory_traces_key",
    "rollback_absent_check",
    "rollback_pk",
    "session_pk",
    "source_trace_check",
    "span_item",
    "trace_memories_pk",
    "trace_pk",
]

PK, SK = PARTITION_KEY, SORT_KEY

LEDGER_SK = "TURN"
TRACE_SK = "TRACE"
# Set on a trace row when its user's erasure starts (the row itself goes last, as the erasure
# still needs its turn ids and session): from then on no commit of that trace is accepted.
TRACE_ERASED = "erased_at"
ROLLBACK_SK = "ROLLBACK"  # the item of a trace's rollback record


def ledger_pk(tenant: str, turn_id: str) -> str:
    return f"TURN#{tenant}#{turn_id}"


def trace_pk(tenant: str, trace_id: str) -> str:
    return f"TRACE#{tenant}#{trace_id}"


def rollback_pk(tenant: str, trace_id: str) -> str:
    return f"ROLLBACK#{tenant}#{trace_id}"


def trace_memories_pk(tenant: str, trace_id: str) -> str:
    return f"TRACEMEM#{tenant}#{trace_id}"


def memory_traces_key(tenant: str, memory_id: str) -> str:
    """The `lookup` index partition of a memory's trace outcomes (TRACEMEM rows)."""
    return f"MEMTRACES#{tenant}#{memory_id}"


def _user_traces_key(tenant: str, user_id: str) -> str:
    return f"USERTRACES#{tenant}#{user_id}"


# A trace's inputs share its partition, one item per turn (a turn may be 16,000 characters:
# a hundred of them would not fit one 400 KB item), sorted in request order.
_INPUT_SK_PREFIX = "INPUT#"


def session_pk(tenant: str, user_id: str, session_id: str) -> str:
    return f"SESSION#{tenant}#{user_id}#{session_id}"


def last_question_pk(tenant: str, user_id: str, session_id: str) -> str:
    # Ids cannot contain "#", so the key is unambiguous; one item per session, overwritten.
    return f"LASTQ#{tenant}#{user_id}#{session_id}"


_RATE_SK = "RATE"
QUESTION_SK = "LASTQ"


def _is_condition_failure(exc: ClientError) -> bool:
    return exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"


def _unexpired(item: dict[str, Any], now: float) -> bool:
    """TTL deletion is lazy (it can lag by hours): an item past `expires_at` counts as absent,
    and so does one written before it had an expiry (TTL never removes that one)."""
    expires_at = item.get(TTL_ATTRIBUTE)
    return expires_at is not None and int(expires_at["N"]) > now


def source_trace_check(table: str, tenant: str, trace_id: str) -> dict[str, Any]:
    """A transaction item that holds while the trace exists and its user's erasure has not
    started (`TRACE_ERASED`): a write of the trace's turn lands before the erasure's mark, and
    is deleted by it, or not at all."""
    return {
        "ConditionCheck": {
            "TableName": table,
            "Key": {PK: {"S": trace_pk(tenant, trace_id)}, SK: {"S": TRACE_SK}},
            "ConditionExpression": (
                f"attribute_exists({PK}) AND attribute_not_exists({TRACE_ERASED})"
            ),
        }
    }


def rollback_absent_check(table: str, tenant: str, trace_id: str) -> dict[str, Any]:
    """A transaction item that holds while the trace has no rollback record: a memory commit
    of the trace lands wholly before its rollback (which then removes it) or not at all (the
    rollback's transaction writes the record, so DynamoDB orders the two)."""
    return {
        "ConditionCheck": {
            "TableName": table,
            "Key": {PK: {"S": rollback_pk(tenant, trace_id)}, SK: {"S": ROLLBACK_SK}},
            "ConditionExpression": f"attribute_not_exists({PK})",
        }
    }


class DynamoTurnLedger:
    """Which turns were enqueued (INSERT-if-absent), which trace each request opened, and the
    question each session's latest request ended with."""

    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def already_enqueued(self, tenant: str, turn_ids: Sequence[str]) -> set[str]:
        keys = [
            {PK: {"S": ledger_pk(tenant, tid)}, SK: {"S": LEDGER_SK}}
            for tid in sorted(set(turn_ids))
        ]
        return {
            item[PK]["S"].rsplit("#", 1)[1]
            for item in batch_get(self._client, self._table, keys, PK)
        }

    def record_enqueued(self, tenant: str, trace_id: str, turn_ids: Sequence[str]) -> set[str]:
        taken: set[str] = set()
        for tid in turn_ids:
            try:
                self._client.put_item(
                    TableName=self._table,
                    Item={
                        PK: {"S": ledger_pk(tenant, tid)},
                        SK: {"S": LEDGER_SK},
                        "trace_id": {"S": trace_id},
                    },
                    ConditionExpression=f"attribute_not_exists({PK})",
                )
            except ClientError as exc:
                if not _is_condition_failure(exc):
                    raise unavailable(exc, "PutItem") from exc
                taken.add(tid)
        return taken

    def _put_inputs(self, pk: str, inputs: Sequence[TraceInput]) -> None:
        batch_write(
            self._client,
            self._table,
            [
                {
                    "PutRequest": {
                        "Item": {
                            PK: {"S": pk},
                            SK: {"S": f"{_INPUT_SK_PREFIX}{position:05d}"},
                            "input": {"S": turn.model_dump_json()},
                        }
                    }
                }
                for position, turn in enumerate(inputs)
            ],
        )

    def replace_inputs(self, tenant: str, trace_id: str, inputs: Sequence[TraceInput]) -> None:
        self._put_inputs(trace_pk(tenant, trace_id), inputs)

    def put_trace(self, trace: TraceRecord, inputs: Sequence[TraceInput] = ()) -> None:
        pk = trace_pk(trace.tenant, trace.trace_id)
        self._put_inputs(pk, inputs)
        item: dict[str, Any] = {
            PK: {"S": pk},
            SK: {"S": TRACE_SK},
            "user_id": {"S": trace.user_id},
            "session_id": {"S": trace.session_id},
            "source": {"S": trace.source},
            "created_at": {"S": trace.created_at},
            "turn_ids": {"L": [{"S": tid} for tid in trace.turn_ids]},
            LOOKUP_KEY: {"S": _user_traces_key(trace.tenant, trace.user_id)},
            LOOKUP_SORT: {"S": trace_sort_key(trace.created_at, trace.trace_id)},
        }
        if trace.agent_id is not None:
            item["agent_id"] = {"S": trace.agent_id}
        try:
            self._client.put_item(TableName=self._table, Item=item)
        except ClientError as exc:
            raise unavailable(exc, "PutItem") from exc

    def get_trace(self, tenant: str, trace_id: str) -> TraceRecord | None:
        try:
            response = self._client.get_item(
                TableName=self._table,
                Key={PK: {"S": trace_pk(tenant, trace_id)}, SK: {"S": TRACE_SK}},
                ConsistentRead=True,
            )
        except ClientError as exc:
            raise unavailable(exc, "GetItem") from exc
        item = response.get("Item")
        return None if item is None else _trace_of(tenant, trace_id, item)

    def trace_inputs(self, tenant: str, trace_id: str) -> list[TraceInput]:
        items = self._query_all(
            {
                "KeyConditionExpression": f"{PK} = :pk AND begins_with({SK}, :prefix)",
                "ExpressionAttributeValues": {
                    ":pk": {"S": trace_pk(tenant, trace_id)},
                    ":prefix": {"S": _INPUT_SK_PREFIX},
                },
                "ConsistentRead": True,
            }
        )
        return [TraceInput.model_validate_json(item["input"]["S"]) for item in items]

    def traces_of_user(
        self,
        tenant: str,
        user_id: str,
        *,
        since: datetime | None,
        until: datetime | None,
        limit: int,
        cursor: str | None,
    ) -> TracePage:
        low, high = time_bounds(since, until)
        if cursor is not None:
            high = min(high, decode_trace_cursor(cursor))
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": TURNS_LOOKUP.name,
            # `high` is exclusive: a cursor names the last trace already returned.
            "KeyConditionExpression": (
                f"{LOOKUP_KEY} = :user AND {LOOKUP_SORT} BETWEEN :low AND :high"
            ),
            "ExpressionAttributeValues": {
                ":user": {"S": _user_traces_key(tenant, user_id)},
                ":low": {"S": low},
                ":high": {"S": high},
            },
            "ScanIndexForward": False,
        }
        traces: list[TraceRecord] = []
        while len(traces) <= limit:
            try:
                response = self._client.query(**kwargs, Limit=limit + 1 - len(traces))
            except ClientError as exc:
                raise unavailable(exc, "Query") from exc
            for item in response.get("Items", []):
                if item[LOOKUP_SORT]["S"] == high:
                    continue
                trace_id = item[PK]["S"].rsplit("#", 1)[1]
                traces.append(_trace_of(tenant, trace_id, item))
            if "LastEvaluatedKey" not in response:
                break
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        page = traces[:limit]
        more = len(traces) > limit
        last = page[-1] if more and page else None
        next_cursor = (
            encode_trace_cursor(trace_sort_key(last.created_at, last.trace_id)) if last else None
        )
        return TracePage(traces=page, next_cursor=next_cursor)

    def memories_of_trace(self, tenant: str, trace_id: str) -> list[tuple[str, str]]:
        items = self._query_all(
            {
                "KeyConditionExpression": f"{PK} = :pk",
                "ExpressionAttributeValues": {":pk": {"S": trace_memories_pk(tenant, trace_id)}},
            }
        )
        return [(item["memory_id"]["S"], item["outcome"]["S"]) for item in items]

    def traces_of_memory(self, tenant: str, memory_id: str) -> list[tuple[str, str]]:
        items = self._query_all(
            {
                "IndexName": TURNS_LOOKUP.name,
                "KeyConditionExpression": f"{LOOKUP_KEY} = :memory",
                "ExpressionAttributeValues": {
                    ":memory": {"S": memory_traces_key(tenant, memory_id)}
                },
            }
        )
        return [(item[PK]["S"].rsplit("#", 1)[1], item["outcome"]["S"]) for item in items]

    def _query_all(self, query: dict[str, Any]) -> list[dict[str, Any]]:
        kwargs: dict[str, Any] = {"TableName": self._table, **query}
        items: list[dict[str, Any]] = []
        while True:
            try:
                response = self._client.query(**kwargs)
            except ClientError as exc:
                raise unavailable(exc, "Query") from exc
            items.extend(response.get("Items", []))
            if "LastEvaluatedKey" not in response:
                return items
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    @staticmethod
    def _question_key(tenant: str, user_id: str, session_id: str) -> dict[str, Any]:
        pk = last_question_pk(tenant, user_id, session_id)
        return {PK: {"S": pk}, SK: {"S": QUESTION_SK}}

    def last_question(self, tenant: str, user_id: str, session_id: str, now: float) -> str | None:
        try:
            response = self._client.get_item(
                TableName=self._table,
                Key=self._question_key(tenant, user_id, session_id),
                ConsistentRead=True,
            )
        except ClientError as exc:
            raise unavailable(exc, "GetItem") from exc
        item = response.get("Item", {})
        question = item.get("question")
        if question is None or not _unexpired(item, now):
            return None
        return str(question["S"])

    def set_last_question(
        self,
        tenant: str,
        user_id: str,
        session_id: str,
        question: str | None,
        *,
        now: float,
        retention_secs: int,
    ) -> None:
        item = self._question_key(tenant, user_id, session_id)
        item[TTL_ATTRIBUTE] = {"N": str(int(now) + retention_secs)}
        if question is not None:
            item["question"] = {"S": question}
        try:
            self._client.put_item(TableName=self._table, Item=item)
        except ClientError as exc:
            raise unavailable(exc, "PutItem") from exc


def _trace_of(tenant: str, trace_id: str, item: dict[str, Any]) -> TraceRecord:
    return TraceRecord(
        trace_id=trace_id,
        tenant=tenant,
        user_id=item["user_id"]["S"],
        session_id=item["session_id"]["S"],
        agent_id=item["agent_id"]["S"] if "agent_id" in item else None,
        source=item["source"]["S"],
        created_at=item["created_at"]["S"],
        turn_ids=tuple(value["S"] for value in item["turn_ids"]["L"]),
    )


class DynamoRateStore:
    """Rate-gate claims that hold across Lambda instances; DynamoDB TTL removes old ones.

    TTL deletion is lazy (it can lag by hours), so the condition also treats an item whose
    `expires_at` has passed as absent.
    """

    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def claim_all(self, claims: Sequence[tuple[str, str, float]], window_secs: int) -> list[bool]:
        # One conditional PutItem each: a transaction would refuse them all for one repeat.
        return [self._claim(*claim, window_secs) for claim in claims]

    def _claim(self, key: str, claimant: str, now: float, window_secs: int) -> bool:
        try:
            self._client.put_item(
                TableName=self._table,
                Item={
                    PK: {"S": f"RATE#{key}"},
                    SK: {"S": _RATE_SK},
                    "claimant": {"S": claimant},
                    TTL_ATTRIBUTE: {"N": str(int(now) + window_secs)},
                },
                ConditionExpression=(
                    f"attribute_not_exists({PK}) OR {TTL_ATTRIBUTE} <= :now OR claimant = :claimant"
                ),
                ExpressionAttributeValues={
                    ":now": {"N": str(int(now))},
                    ":claimant": {"S": claimant},
                },
            )
        except ClientError as exc:
            if _is_condition_failure(exc):
                return False
            raise unavailable(exc, "PutItem") from exc
        return True


class DynamoSessionLog:
    """A session's turns as they reach extraction, in observation order (turns table); with
    the outbox table, also the episodes kept with them (`dynamodb_episodes.py`)."""

    def __init__(
        self, client: DynamoDBClient, table_name: str, outbox_table: str | None = None
    ) -> None:
        self._client = client
        self._table = table_name
        self._outbox_table = outbox_table

    def recent(
        self, tenant: str, user_id: str, session_id: str, before: str, limit: int, *, now: float
    ) -> list[QueuedTurn]:
        if limit <= 0:
            return []
        try:
            response = self._client.query(
                TableName=self._table,
                KeyConditionExpression=f"{PK} = :pk AND {SK} < :before",
                ExpressionAttributeValues={
                    ":pk": {"S": session_pk(tenant, user_id, session_id)},
                    ":before": {"S": before},
                },
                ScanIndexForward=False,  # newest first, so `Limit` keeps the latest turns
                Limit=limit,
            )
        except ClientError as exc:
            raise unavailable(exc, "Query") from exc
        # Filtered here, after `Limit`: expired turns are the session's oldest, so the context
        # only gets shorter, never older.
        turns = [
            QueuedTurn.model_validate_json(i["turn"]["S"])
            for i in response["Items"]
            if _unexpired(i, now)
        ]
        return list(reversed(turns))

    def append_batch(
        self,
        turns: Sequence[QueuedTurn],
        now: float,
        retention_secs: int,
        episodes: Mapping[str, Episode] | None = None,
    ) -> frozenset[str]:
        kept = episodes or {}
        expires_at = {"N": str(int(now) + retention_secs)}
        writes: list[_TurnWrite] = []
        for turn in turns:
            items: list[dict[str, Any]] = [
                {
                    "Put": {
                        "TableName": self._table,
                        "Item": {
                            PK: {"S": session_pk(turn.tenant, turn.user_id, turn.session_id)},
                            SK: {"S": session_sort_key(turn)},
                            "turn": {"S": turn.model_dump_json()},
                            TTL_ATTRIBUTE: expires_at,
                        },
                    }
                }
            ]
            if (episode := kept.get(turn.turn_id)) is not None:
                if self._outbox_table is None:
                    raise ConfigError("the session log needs the outbox table to keep episodes")
                items.extend(episode_puts(self._table, self._outbox_table, episode))
            writes.append(_TurnWrite(turn.tenant, turn.trace_id, items, len(json.dumps(items))))
        erased: set[str] = set()
        for transaction in _transactions(writes):
            live = [write for write in transaction if write.trace_id not in erased]
            erased |= self._write_unless_erased(live)
        return frozenset(erased)

    def _write_unless_erased(self, writes: list[_TurnWrite]) -> set[str]:
        """The turns' items in one transaction behind one check per trace (a PutItem's condition
        sees only its own item); a trace whose check fails is left out and the transaction sent
        again. Returns those traces' ids."""
        erased: set[str] = set()
        while writes:
            traces = list(dict.fromkeys((write.tenant, write.trace_id) for write in writes))
            checks = [source_trace_check(self._table, *trace) for trace in traces]
            try:
                self._client.transact_write_items(
                    TransactItems=[*checks, *(item for write in writes for item in write.items)]  # type: ignore[list-item]
                )
            except ClientError as exc:
                refused = {traces[i][1] for i in failed_conditions_at(exc) if i < len(traces)}
                if not refused:
                    raise unavailable(exc, "TransactWriteItems") from exc
            else:
                return erased
            erased |= refused
            writes = [write for write in writes if write.trace_id not in refused]
        return erased


@dataclass(frozen=True, slots=True)
class _TurnWrite:
    """One turn's items (its log entry, its episode and the episode's outbox row), written in
    one transaction with its trace's check; `size` bounds their bytes (JSON, ASCII-escaped)."""

    tenant: str
    trace_id: str
    items: list[dict[str, Any]]
    size: int


# DynamoDB's limits on one TransactWriteItems call: 100 items, 4 MB of them (the sizes counted
# are larger than the items', the checks' few bytes fit in the difference).
_TRANSACTION_ITEMS = 100
_TRANSACTION_BYTES = 4_000_000


def _transactions(writes: Sequence[_TurnWrite]) -> Iterator[list[_TurnWrite]]:
    """The turns' writes in order, in as few transactions as DynamoDB's limits allow, each turn
    counted with its trace's check."""
    run: list[_TurnWrite] = []
    traces: set[str] = set()
    items = size = 0
    for write in writes:
        if run and (
            items + len(write.items) + (write.trace_id not in traces) > _TRANSACTION_ITEMS
            or size + write.size > _TRANSACTION_BYTES
        ):
            yield run
            run, traces, items, size = [], set(), 0, 0
        items += len(write.items) + (write.trace_id not in traces)
        size += write.size
        run.append(write)
        traces.add(write.trace_id)
    if run:
        yield run


EPISODE_OUTBOX_OP = "episode"  # an outbox row never read as a memory by `pending_memories`


def episode_pk(tenant: str, user_id: str) -> str:
    return f"EPISODE#{tenant}#{user_id}"


def episode_lookup_key(tenant: str, user_id: str) -> str:
    return f"USEREPISODES#{tenant}#{user_id}"


def episode_item(episode: Episode) -> dict[str, Any]:
    item = {
        PK: {"S": episode_pk(episode.tenant, episode.user_id)},
        SK: {"S": episode.turn_id},
        LOOKUP_KEY: {"S": episode_lookup_key(episode.tenant, episode.user_id)},
        LOOKUP_SORT: {"S": episode.sort_key},
        "status": {"S": episode.status.value},
        "doc": {"S": episode.model_dump_json()},
        TTL_ATTRIBUTE: {"N": str(episode.expires_at)},
    }
    if episode.status is EpisodeStatus.PENDING:
        # Listed in the sparse `pending_episodes` index until it is extracted (a put without
        # them, `update_episodes`, takes it out).
        item[PENDING_SHARD] = {"S": pending_shard_of(episode.tenant, episode.user_id)}
        item[PENDING_USER] = {"S": f"{episode.tenant}#{episode.user_id}"}
    return item


def episode_puts(turns_table: str, outbox_table: str, episode: Episode) -> list[dict[str, Any]]:
    """The episode item and its outbox row (`episode:<turn id>`, rev 1: stage 7 indexes it)."""
    partition = f"{episode.tenant}#{episode.user_id}"
    doc_id = episode_doc_id(episode.turn_id)
    outbox = {
        PK: {"S": partition},
        SK: {"S": outbox_sort_key(doc_id, 1)},
        "memory_id": {"S": doc_id},
        "op": {"S": EPISODE_OUTBOX_OP},
        "trace_id": {"S": episode.turn.trace_id},
        "doc": {"S": "{}"},
        OUTBOX_PENDING.partition_key: {"S": partition},
    }
    return [
        {"Put": {"TableName": turns_table, "Item": episode_item(episode)}},
        {"Put": {"TableName": outbox_table, "Item": outbox}},
    ]


def span_item(span: StageSpan) -> dict[str, Any]:
    """The spans table's item of one span. One item per (stage, item): a retried stage
    overwrites its span instead of adding one."""
    return {
        PK: {"S": f"{span.tenant}#{span.trace_id}"},
        SK: {"S": f"{span.stage}#{span.item_id}"},
        SPAN_USER_KEY: {"S": f"{span.tenant}#{span.user_id}"},
        SPAN_AT: {"S": span.at.isoformat()},
        "span": {"S": span.model_dump_json()},
    }


class DynamoSpanStore:
    """Spans by trace (table key) and by user and time (the `by_user` index)."""

    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def put_spans(self, spans: Sequence[StageSpan]) -> None:
        # DynamoDB refuses a batch that names one key twice (a turn repeated in one request has
        # one span key): the last span of a key is the one that would have stayed anyway.
        by_key = {(span.tenant, span.trace_id, span.stage, span.item_id): span for span in spans}
        requests = [{"PutRequest": {"Item": span_item(span)}} for span in by_key.values()]
        batch_write(self._client, self._table, requests)

    def spans_of(self, tenant: str, trace_id: str) -> list[StageSpan]:
        spans: list[StageSpan] = []
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": f"{PK} = :pk",
            "ExpressionAttributeValues": {":pk": {"S": f"{tenant}#{trace_id}"}},
        }
        while True:
            try:
                response = self._client.query(**kwargs)
            except ClientError as exc:
                raise unavailable(exc, "Query") from exc
            spans.extend(
                StageSpan.model_validate(json.loads(item["span"]["S"]))
                for item in response.get("Items", [])
            )
            if "LastEvaluatedKey" not in response:
                return sorted(spans, key=lambda span: span.at)
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def llm_usage_of(
        self, tenant: str, trace_id: str, keys: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], LlmUsageSummary]:
        pk = {"S": f"{tenant}#{trace_id}"}
        wanted = [{PK: pk, SK: {"S": f"{stage}#{item}"}} for stage, item in sorted(set(keys))]
        found: dict[tuple[str, str], LlmUsageSummary] = {}
        for item in batch_get(self._client, self._table, wanted, "span"):
            span = json.loads(item["span"]["S"])
            if span.get("llm") is not None:
                found[(span["stage"], span["item_id"])] = LlmUsageSummary.model_validate(
                    span["llm"]
                )
        return found
