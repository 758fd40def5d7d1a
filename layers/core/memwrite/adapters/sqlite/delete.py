"""One memory's deletion in the SQLite file, one `BEGIN IMMEDIATE` transaction; the twin of
`dynamodb_delete.py`. Every condition (memory revs, row version) is checked inside it; a refused
one is a `WriteConflict` and nothing is applied."""

from __future__ import annotations

import json
import sqlite3

from memwrite.adapters.sqlite.database import SqliteDatabase
from memwrite.adapters.sqlite.ledger import insert_spans
from memwrite.adapters.sqlite.store import insert_outbox_rows
from memwrite.errors import WriteConflict
from memwrite.records.store import DeletionCommit

__all__ = ["SqliteMemoryDeletion"]

_USER_MEMORY = "tenant = ? AND user_id = ? AND memory_id = ?"
_USER_ROW = "tenant = ? AND user_id = ? AND fact_key = ?"


class SqliteMemoryDeletion:
    def __init__(self, database: SqliteDatabase) -> None:
        self._db = database

    def apply_deletion(self, deletion: DeletionCommit) -> None:
        with self._db.transaction() as connection:
            _apply(connection, deletion)


def _check_rev(connection: sqlite3.Connection, user: tuple[str, str], mid: str, rev: int) -> None:
    found = connection.execute(f"SELECT rev FROM memories WHERE {_USER_MEMORY}", (*user, mid))
    row = found.fetchone()
    if row is None or row[0] != rev:
        raise WriteConflict(f"memory {mid} changed since it was read")


def _apply(connection: sqlite3.Connection, deletion: DeletionCommit) -> None:
    user = (deletion.tenant, deletion.user_id)
    removed = deletion.removed.memory.memory_id
    _check_rev(connection, user, removed, deletion.removed.rev)
    for table in ("memories", "memory_access", "outbox"):
        connection.execute(f"DELETE FROM {table} WHERE {_USER_MEMORY}", (*user, removed))
    docs: dict[str, tuple[str, int]] = {}
    for memory, rev in deletion.changed:
        _check_rev(connection, user, memory.memory_id, rev)
        docs[memory.memory_id] = (memory.model_dump_json(), rev + 1)
        connection.execute(
            f"UPDATE memories SET rev = ?, doc = ? WHERE {_USER_MEMORY}",
            (rev + 1, docs[memory.memory_id][0], *user, memory.memory_id),
        )
    if deletion.fact_key is not None and deletion.fact_row is not None:
        key, row = deletion.fact_key, deletion.fact_row
        found = connection.execute(
            f"SELECT version FROM entity_facts WHERE {_USER_ROW}", (*user, key)
        ).fetchone()
        if (found[0] if found else 0) != row.version:
            raise WriteConflict(f"entity_facts row {key} changed since it was read")
        if row.facts:
            facts = {mid: fact.model_dump(mode="json") for mid, fact in row.facts.items()}
            connection.execute(
                f"UPDATE entity_facts SET version = ?, facts = ? WHERE {_USER_ROW}",
                (row.version + 1, json.dumps(facts, sort_keys=True), *user, key),
            )
        else:
            connection.execute(f"DELETE FROM entity_facts WHERE {_USER_ROW}", (*user, key))
    insert_outbox_rows(connection, user, deletion.outbox, docs)
    announcement = deletion.announcement
    connection.execute(
        "INSERT INTO outbox (tenant, user_id, memory_id, rev, op, trace_id, doc) "
        "VALUES (?, ?, ?, 1, ?, ?, '{}')",
        (*user, announcement.memory_id, announcement.op.value, announcement.trace_id),
    )
    insert_spans(connection, [deletion.span])
