"""A trace's rollback in the SQLite file, one `BEGIN IMMEDIATE` transaction; the twin of
`dynamodb_rollback.py`. Every condition (memory rev, row version, no record yet) is checked
inside it; a refused one is a `WriteConflict` and nothing is applied. A trace no longer there
(its user erased: one transaction too) is an `UnknownTrace`."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from memwrite.adapters.sqlite.database import SqliteDatabase
from memwrite.adapters.sqlite.ledger import insert_spans
from memwrite.adapters.sqlite.store import insert_outbox_rows
from memwrite.errors import UnknownTrace, WriteConflict
from memwrite.records.store import RollbackCommit, RollbackRecord

__all__ = ["SqliteTraceRollback"]

_USER_MEMORY = "tenant = ? AND user_id = ? AND memory_id = ?"


class SqliteTraceRollback:
    def __init__(self, database: SqliteDatabase) -> None:
        self._db = database

    def rollback_of(self, tenant: str, trace_id: str) -> RollbackRecord | None:
        with self._db.connection() as connection:
            row = connection.execute(
                "SELECT doc FROM rollbacks WHERE tenant = ? AND trace_id = ?", (tenant, trace_id)
            ).fetchone()
        return None if row is None else RollbackRecord.model_validate_json(row[0])

    def traces_of_turns(self, tenant: str, turn_ids: Sequence[str]) -> dict[str, str]:
        unique = sorted(set(turn_ids))
        if not unique:
            return {}
        with self._db.connection() as connection:
            rows = connection.execute(
                "SELECT turn_id, trace_id FROM ledger WHERE tenant = ? "
                f"AND turn_id IN ({','.join('?' * len(unique))})",
                [tenant, *unique],
            ).fetchall()
        return dict(rows)

    def apply_rollback(self, rollback: RollbackCommit) -> None:
        with self._db.transaction() as connection:
            _apply(connection, rollback)


def _check_rev(connection: sqlite3.Connection, user: tuple[str, str], mid: str, rev: int) -> None:
    row = connection.execute(f"SELECT rev FROM memories WHERE {_USER_MEMORY}", (*user, mid))
    found = row.fetchone()
    if found is None or found[0] != rev:
        raise WriteConflict(f"memory {mid} changed since it was read")


def _apply(connection: sqlite3.Connection, rollback: RollbackCommit) -> None:
    user = (rollback.tenant, rollback.user_id)
    record = rollback.record
    source = connection.execute(
        "SELECT 1 FROM traces WHERE tenant = ? AND trace_id = ?", (record.tenant, record.trace_id)
    ).fetchone()
    if source is None:
        raise UnknownTrace(record.trace_id)
    taken = connection.execute(
        "SELECT 1 FROM rollbacks WHERE tenant = ? AND trace_id = ?",
        (record.tenant, record.trace_id),
    ).fetchone()
    if taken is not None:
        raise WriteConflict(f"trace {record.trace_id} was rolled back already")
    for versioned in rollback.removed:
        mid = versioned.memory.memory_id
        _check_rev(connection, user, mid, versioned.rev)
        for table in ("memories", "memory_access", "outbox"):
            connection.execute(f"DELETE FROM {table} WHERE {_USER_MEMORY}", (*user, mid))
    docs: dict[str, tuple[str, int]] = {}
    for memory, rev in rollback.changed:
        _check_rev(connection, user, memory.memory_id, rev)
        docs[memory.memory_id] = (memory.model_dump_json(), rev + 1)
        connection.execute(
            f"UPDATE memories SET rev = ?, doc = ? WHERE {_USER_MEMORY}",
            (rev + 1, docs[memory.memory_id][0], *user, memory.memory_id),
        )
    for key, fact_row in rollback.fact_rows.items():
        found = connection.execute(
            "SELECT version FROM entity_facts WHERE tenant = ? AND user_id = ? AND fact_key = ?",
            (*user, key),
        ).fetchone()
        if (found[0] if found else 0) != fact_row.version:
            raise WriteConflict(f"entity_facts row {key} changed since it was read")
        if not fact_row.facts:
            connection.execute(
                "DELETE FROM entity_facts WHERE tenant = ? AND user_id = ? AND fact_key = ?",
                (*user, key),
            )
            continue
        facts = {mid: fact.model_dump(mode="json") for mid, fact in fact_row.facts.items()}
        connection.execute(
            "UPDATE entity_facts SET version = ?, facts = ? "
            "WHERE tenant = ? AND user_id = ? AND fact_key = ?",
            (fact_row.version + 1, json.dumps(facts, sort_keys=True), *user, key),
        )
    insert_outbox_rows(connection, user, rollback.outbox, docs)
    connection.execute(
        "INSERT INTO rollbacks (tenant, trace_id, user_id, doc) VALUES (?, ?, ?, ?)",
        (record.tenant, record.trace_id, record.user_id, record.model_dump_json()),
    )
    insert_spans(connection, [rollback.span])
