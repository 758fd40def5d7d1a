"""Erasing a user from the SQLite file (`DELETE /v1/users/{user_id}/memories`); the twin of
`dynamodb_erase.py`, with the same counts by kind.

Every table keyed by user loses the user's rows; the user's traces (those their spans name,
and those whose record names them) take their ledger rows, memory outcomes and the trace
records along. Turns of the user still waiting in the work queue, or dead-lettered, go too:
nothing of the user is processed again after this returns. A batch already taken off the queue
(`memwrite serve`'s worker) writes nothing either: persist's commit, extract's session-log
append and resolve's entity writes check their source trace inside their own transaction, so
each lands wholly before this one (and is removed here) or finds the trace gone. One
transaction: a crash leaves everything or nothing, and a repeat removes nothing more. An
earlier erasure's row still waiting for stage 7 (`announce`) stays: its `user.erased` goes out.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime

from memwrite.adapters.sqlite.database import SqliteDatabase
from memwrite.payloads import OutboxChange
from memwrite.ports import UserErasure
from memwrite.records.change_events import ERASURE_ROW_PREFIX, erasure_row_id

__all__ = ["SqliteUserEraser"]

_BY_USER = "tenant = ? AND user_id = ?"
_OUTBOX_OF_USER = f"{_BY_USER} AND memory_id NOT LIKE '{ERASURE_ROW_PREFIX}%'"
ERASURE_OUTBOX_OP = "erasure"  # never read as a memory by `pending_memories`
_QUEUED_BY_USER = "json_extract(body, '$.tenant') = ? AND json_extract(body, '$.user_id') = ?"
_TRACES_OF_USER = (
    "SELECT trace_id FROM spans WHERE tenant = ?1 AND user_id = ?2 "
    "UNION SELECT trace_id FROM traces WHERE tenant = ?1 AND json_extract(doc, '$.user_id') = ?2"
)


class SqliteUserEraser:
    def __init__(self, database: SqliteDatabase) -> None:
        self._db = database

    def erase_user(self, tenant: str, user_id: str) -> UserErasure:
        user = (tenant, user_id)
        with self._db.transaction() as connection:

            def delete(table: str, where: str) -> int:
                return connection.execute(f"DELETE FROM {table} WHERE {where}", user).rowcount

            traces = _user_traces(connection, tenant, user_id)
            removed = {
                # The outbox first, as on DynamoDB (here it is all one transaction anyway).
                "outbox": delete("outbox", _OUTBOX_OF_USER),
                "memories": delete("memories", _BY_USER),
                "entity_facts": delete("entity_facts", _BY_USER),
                "entities": delete("entities", _BY_USER),
                "episodes": delete("episodes", _BY_USER),
                "access_counters": delete("memory_access", _BY_USER),
                "turns_ledger_and_traces": delete("session_turns", _BY_USER)
                + delete("last_questions", _BY_USER)
                + delete("rollbacks", _BY_USER)
                + _delete_traces(connection, tenant, traces),
                "spans": delete("spans", _BY_USER),
                "queued_turns": delete("queue", _QUEUED_BY_USER)
                + delete("dead_letters", _QUEUED_BY_USER),
            }
        return UserErasure(removed)

    def announce(self, tenant: str, user_id: str, at: datetime) -> OutboxChange:
        change = OutboxChange(
            tenant=tenant, user_id=user_id, memory_id=erasure_row_id(at), rev=1, trace_id=None
        )
        with self._db.transaction() as connection:
            connection.execute(
                "INSERT OR IGNORE INTO outbox (tenant, user_id, memory_id, rev, op, doc) "
                "VALUES (?, ?, ?, 1, ?, '{}')",
                (tenant, user_id, change.memory_id, ERASURE_OUTBOX_OP),
            )
        return change


def _user_traces(connection: sqlite3.Connection, tenant: str, user_id: str) -> list[str]:
    rows = connection.execute(_TRACES_OF_USER, (tenant, user_id)).fetchall()
    return [trace_id for (trace_id,) in rows]


def _delete_traces(connection: sqlite3.Connection, tenant: str, trace_ids: list[str]) -> int:
    rows = [(tenant, trace_id) for trace_id in trace_ids]
    removed = 0
    for table in ("ledger", "trace_memories", "traces"):
        for row in rows:
            removed += connection.execute(
                f"DELETE FROM {table} WHERE tenant = ? AND trace_id = ?", row
            ).rowcount
    return removed
