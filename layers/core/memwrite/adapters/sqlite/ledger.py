"""SQLite adapters of the turns table's ports and the spans: the ledger, traces, sessions' last
questions, rate-gate claims and the session log, with the semantics of their DynamoDB twins in
`memwrite.adapters.aws.dynamodb_ledger`."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from memwrite.adapters.page_cursor import (
    decode_trace_cursor,
    encode_trace_cursor,
    time_bounds,
    trace_sort_key,
)
from memwrite.adapters.sqlite.database import SqliteDatabase, require_source_trace
from memwrite.adapters.sqlite.episodes import expire_episodes, write_episode
from memwrite.errors import SourceErased
from memwrite.models import LlmUsageSummary, QueuedTurn, StageSpan, TraceInput, session_sort_key
from memwrite.ports import TracePage, TraceRecord
from memwrite.records.episode import Episode

__all__ = [
    "SqliteRateStore",
    "SqliteSessionLog",
    "SqliteSpanStore",
    "SqliteTurnLedger",
    "insert_spans",
]


def _placeholders(count: int) -> str:
    return ",".join("?" * count)


def _delete_expired(connection: sqlite3.Connection, table: str, now: float) -> None:
    # SQLite has no TTL sweeper: each write removes what has expired (through the table's
    # `expires_at` index, so usually nothing is scanned).
    connection.execute(f"DELETE FROM {table} WHERE expires_at <= ?", (now,))


# The expressions of the `traces_by_user` index, spelled as it is so queries use it.
_TRACE_USER = "json_extract(doc, '$.user_id')"
_TRACE_SORT = "json_extract(doc, '$.created_at') || '#' || trace_id"


def _trace_of(tenant: str, trace_id: str, doc: dict[str, Any]) -> TraceRecord:
    return TraceRecord(
        trace_id=trace_id,
        tenant=tenant,
        user_id=doc["user_id"],
        session_id=doc["session_id"],
        agent_id=doc["agent_id"],
        source=doc["source"],
        created_at=doc["created_at"],
        turn_ids=tuple(doc["turn_ids"]),
    )


class SqliteTurnLedger:
    """Which turns were enqueued (INSERT-if-absent), which trace each request opened, and the
    question each session's latest request ended with."""

    def __init__(self, database: SqliteDatabase) -> None:
        self._db = database

    def already_enqueued(self, tenant: str, turn_ids: Sequence[str]) -> set[str]:
        unique = sorted(set(turn_ids))
        if not unique:
            return set()
        with self._db.connection() as connection:
            rows = connection.execute(
                f"SELECT turn_id FROM ledger WHERE tenant = ? AND turn_id IN "
                f"({_placeholders(len(unique))})",
                [tenant, *unique],
            ).fetchall()
        return {turn_id for (turn_id,) in rows}

    def record_enqueued(self, tenant: str, trace_id: str, turn_ids: Sequence[str]) -> set[str]:
        taken: set[str] = set()
        with self._db.transaction() as connection:
            for turn_id in turn_ids:
                inserted = connection.execute(
                    "INSERT OR IGNORE INTO ledger (tenant, turn_id, trace_id) VALUES (?, ?, ?)",
                    (tenant, turn_id, trace_id),
                ).rowcount
                if not inserted:
                    taken.add(turn_id)
        return taken

    def put_trace(self, trace: TraceRecord, inputs: Sequence[TraceInput] = ()) -> None:
        doc = {
            "user_id": trace.user_id,
            "session_id": trace.session_id,
            "agent_id": trace.agent_id,
            "source": trace.source,
            "created_at": trace.created_at,
            "turn_ids": list(trace.turn_ids),
            "inputs": [turn.model_dump(mode="json") for turn in inputs],
        }
        with self._db.connection() as connection:
            connection.execute(
                "INSERT OR REPLACE INTO traces (tenant, trace_id, doc) VALUES (?, ?, ?)",
                (trace.tenant, trace.trace_id, json.dumps(doc)),
            )

    def _trace_doc(self, tenant: str, trace_id: str) -> dict[str, Any] | None:
        with self._db.connection() as connection:
            row = connection.execute(
                "SELECT doc FROM traces WHERE tenant = ? AND trace_id = ?", (tenant, trace_id)
            ).fetchone()
        return None if row is None else dict(json.loads(row[0]))

    def get_trace(self, tenant: str, trace_id: str) -> TraceRecord | None:
        doc = self._trace_doc(tenant, trace_id)
        return None if doc is None else _trace_of(tenant, trace_id, doc)

    def trace_inputs(self, tenant: str, trace_id: str) -> list[TraceInput]:
        doc = self._trace_doc(tenant, trace_id) or {}
        return [TraceInput.model_validate(turn) for turn in doc.get("inputs", [])]

    def replace_inputs(self, tenant: str, trace_id: str, inputs: Sequence[TraceInput]) -> None:
        with self._db.connection() as connection:
            connection.execute(
                "UPDATE traces SET doc = json_set(doc, '$.inputs', json(?))"
                " WHERE tenant = ? AND trace_id = ?",
                (json.dumps([turn.model_dump(mode="json") for turn in inputs]), tenant, trace_id),
            )

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
        with self._db.connection() as connection:
            rows = connection.execute(
                f"SELECT trace_id, doc FROM traces WHERE tenant = ? AND {_TRACE_USER} = ? "
                f"AND {_TRACE_SORT} >= ? AND {_TRACE_SORT} < ? ORDER BY {_TRACE_SORT} DESC "
                "LIMIT ?",
                (tenant, user_id, low, high, limit + 1),
            ).fetchall()
        traces = [_trace_of(tenant, trace_id, json.loads(doc)) for trace_id, doc in rows]
        page = traces[:limit]
        last = page[-1] if len(traces) > limit and page else None
        next_cursor = (
            encode_trace_cursor(trace_sort_key(last.created_at, last.trace_id)) if last else None
        )
        return TracePage(traces=page, next_cursor=next_cursor)

    def memories_of_trace(self, tenant: str, trace_id: str) -> list[tuple[str, str]]:
        with self._db.connection() as connection:
            rows = connection.execute(
                "SELECT memory_id, outcome FROM trace_memories WHERE tenant = ? AND trace_id = ? "
                "ORDER BY memory_id, outcome",
                (tenant, trace_id),
            ).fetchall()
        return [(memory_id, outcome) for memory_id, outcome in rows]

    def traces_of_memory(self, tenant: str, memory_id: str) -> list[tuple[str, str]]:
        with self._db.connection() as connection:
            rows = connection.execute(
                "SELECT trace_id, outcome FROM trace_memories WHERE tenant = ? AND memory_id = ? "
                "ORDER BY trace_id, outcome",
                (tenant, memory_id),
            ).fetchall()
        return [(trace_id, outcome) for trace_id, outcome in rows]

    def last_question(self, tenant: str, user_id: str, session_id: str, now: float) -> str | None:
        with self._db.connection() as connection:
            row = connection.execute(
                "SELECT question FROM last_questions "
                "WHERE tenant = ? AND user_id = ? AND session_id = ? AND expires_at > ?",
                (tenant, user_id, session_id, now),
            ).fetchone()
        return None if row is None else row[0]

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
        with self._db.transaction() as connection:
            _delete_expired(connection, "last_questions", now)
            connection.execute(
                "INSERT OR REPLACE INTO last_questions "
                "(tenant, user_id, session_id, question, expires_at) VALUES (?, ?, ?, ?, ?)",
                (tenant, user_id, session_id, question, int(now) + retention_secs),
            )


class SqliteRateStore:
    """Rate-gate claims; an expired claim counts as absent, as with DynamoDB's lazy TTL."""

    def __init__(self, database: SqliteDatabase) -> None:
        self._db = database

    def claim_all(self, claims: Sequence[tuple[str, str, float]], window_secs: int) -> list[bool]:
        # One statement a claim, in order, all in one commit (a request's turns); the upsert's
        # WHERE is the DynamoDB put's condition expression.
        with self._db.transaction() as connection:
            return [
                connection.execute(
                    "INSERT INTO rate_claims (key, claimant, expires_at) VALUES (?, ?, ?) "
                    "ON CONFLICT (key) DO UPDATE SET claimant = excluded.claimant, "
                    "expires_at = excluded.expires_at "
                    "WHERE rate_claims.expires_at <= ? OR rate_claims.claimant = excluded.claimant",
                    (key, claimant, int(now) + window_secs, int(now)),
                ).rowcount
                == 1
                for key, claimant, now in claims
            ]


class SqliteSessionLog:
    """A session's turns as they reach extraction, in observation order."""

    def __init__(self, database: SqliteDatabase) -> None:
        self._db = database

    def recent(
        self, tenant: str, user_id: str, session_id: str, before: str, limit: int, *, now: float
    ) -> list[QueuedTurn]:
        if limit <= 0:
            return []
        with self._db.connection() as connection:
            rows = connection.execute(
                "SELECT doc FROM session_turns WHERE tenant = ? AND user_id = ? "
                "AND session_id = ? AND sort_key < ? AND expires_at > ? "
                "ORDER BY sort_key DESC LIMIT ?",
                (tenant, user_id, session_id, before, now, limit),
            ).fetchall()
        return [QueuedTurn.model_validate_json(doc) for (doc,) in reversed(rows)]

    def append_batch(
        self,
        turns: Sequence[QueuedTurn],
        now: float,
        retention_secs: int,
        episodes: Mapping[str, Episode] | None = None,
    ) -> frozenset[str]:
        kept = episodes or {}
        expires_at = int(now) + retention_secs
        # One transaction: an erasure (one transaction too) lands wholly before it (and removes
        # what it wrote) or after it; each trace is checked once under the write lock.
        with self._db.transaction() as connection:
            erased: set[str] = set()
            for tenant, trace_id in {(turn.tenant, turn.trace_id) for turn in turns}:
                try:
                    require_source_trace(connection, tenant, trace_id)
                except SourceErased:
                    erased.add(trace_id)
            logged = [turn for turn in turns if turn.trace_id not in erased]
            if not logged:
                return frozenset(erased)
            expire_episodes(connection, now)
            for turn in logged:
                if (episode := kept.get(turn.turn_id)) is not None:
                    write_episode(connection, episode)
            _delete_expired(connection, "session_turns", now)
            connection.executemany(
                "INSERT OR REPLACE INTO session_turns "
                "(tenant, user_id, session_id, sort_key, doc, expires_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (
                        turn.tenant,
                        turn.user_id,
                        turn.session_id,
                        session_sort_key(turn),
                        turn.model_dump_json(),
                        expires_at,
                    )
                    for turn in logged
                ],
            )
        return frozenset(erased)


def insert_spans(connection: sqlite3.Connection, spans: Sequence[StageSpan]) -> None:
    """Write spans inside the caller's transaction, one row per (stage, item)."""
    connection.executemany(
        "INSERT OR REPLACE INTO spans "
        "(tenant, trace_id, stage, item_id, user_id, at, doc) VALUES (?, ?, ?, ?, ?, ?, ?)",
        [
            (
                span.tenant,
                span.trace_id,
                span.stage,
                span.item_id,
                span.user_id,
                span.at.isoformat(),
                span.model_dump_json(),
            )
            for span in spans
        ],
    )


class SqliteSpanStore:
    """Spans by trace, one row per (stage, item): a retried stage overwrites its span."""

    def __init__(self, database: SqliteDatabase) -> None:
        self._db = database

    def put_spans(self, spans: Sequence[StageSpan]) -> None:
        with self._db.transaction() as connection:
            insert_spans(connection, spans)

    def spans_of(self, tenant: str, trace_id: str) -> list[StageSpan]:
        with self._db.connection() as connection:
            rows = connection.execute(
                "SELECT doc FROM spans WHERE tenant = ? AND trace_id = ? ORDER BY stage, item_id",
                (tenant, trace_id),
            ).fetchall()
        spans = [StageSpan.model_validate_json(doc) for (doc,) in rows]
        return sorted(spans, key=lambda span: span.at)

    def llm_usage_of(
        self, tenant: str, trace_id: str, keys: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], LlmUsageSummary]:
        # A seek of the primary key per stage asked, so the trace's other stages are not read:
        # one stage (a stage's own spans, the usual case) as is, more as one JSON array (a list
        # of them would make a statement per length, crowding the connection's cache of
        # prepared ones); only the usage is parsed.
        wanted = set(keys)
        stages = sorted({stage for stage, _ in wanted})
        if not stages:
            return {}
        one = len(stages) == 1
        with self._db.connection() as connection:
            rows = connection.execute(
                "SELECT stage, item_id, json_extract(doc, '$.llm') FROM spans "
                "WHERE tenant = ? AND trace_id = ? AND "
                + ("stage = ? " if one else "stage IN (SELECT value FROM json_each(?)) ")
                + "AND json_extract(doc, '$.llm') IS NOT NULL",
                (tenant, trace_id, stages[0] if one else json.dumps(stages)),
            ).fetchall()
        return {
            (stage, item_id): LlmUsageSummary.model_validate_json(usage)
            for stage, item_id, usage in rows
            if (stage, item_id) in wanted
        }
