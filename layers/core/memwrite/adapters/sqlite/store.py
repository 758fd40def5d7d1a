"""SQLite memory store: memories, entity_facts, the trace ledger and the outbox committed in one
`BEGIN IMMEDIATE` transaction per candidate, every condition checked inside it (a refused one
is a `WriteConflict` and nothing is applied; a source trace erased meanwhile, `SourceErased`:
the erasure is one transaction too, so a commit lands wholly before it or is refused); the
read API's view of the memories (by id, page by page, retrieval counters); the entities table.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from datetime import datetime

from memwrite.adapters.page_cursor import decode_cursor, encode_cursor
from memwrite.adapters.sqlite.database import (
    SqliteDatabase,
    require_not_rolled_back,
    require_source_trace,
)
from memwrite.claims.entities import Entity, VersionedEntity
from memwrite.errors import WriteConflict
from memwrite.ports import MemoryPage
from memwrite.records.entity_facts import FactObservation
from memwrite.records.memory import MemoryUnit
from memwrite.records.store import Commit, FactRow, OutboxOp, OutboxRow, VersionedMemory

__all__ = ["SqliteEntityStore", "SqliteMemoryStore"]

# A memory with its retrieval counters (kept beside it, as the DynamoDB store keeps them in
# the turns table: persist rewrites a memory whole, and a read must never conflict with it).
_WITH_ACCESS = (
    "SELECT m.doc, a.access_count, a.last_accessed FROM memories AS m "
    "LEFT JOIN memory_access AS a "
    "ON a.tenant = m.tenant AND a.user_id = m.user_id AND a.memory_id = m.memory_id "
)


def _with_access(doc: str, count: int | None, last_accessed: str | None) -> MemoryUnit:
    memory = MemoryUnit.model_validate_json(doc)
    if count is None:
        return memory
    return memory.model_copy(
        update={"access_count": count, "last_accessed": datetime.fromisoformat(str(last_accessed))}
    )


def insert_outbox_rows(
    connection: sqlite3.Connection,
    user: tuple[str, str],
    rows: Sequence[OutboxRow],
    docs: Mapping[str, tuple[str, int]],
) -> None:
    """The outbox rows of a transaction, each with its memory's written doc and rev."""
    connection.executemany(
        "INSERT OR REPLACE INTO outbox (tenant, user_id, memory_id, rev, op, trace_id, doc) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        [
            (
                *user,
                row.memory_id,
                docs[row.memory_id][1],
                row.op.value,
                row.trace_id,
                docs[row.memory_id][0],
            )
            for row in rows
        ],
    )


class SqliteMemoryStore:
    def __init__(self, database: SqliteDatabase) -> None:
        self._db = database

    def get_memories(
        self, tenant: str, user_id: str, ids: Sequence[str]
    ) -> dict[str, VersionedMemory]:
        unique = sorted(set(ids))
        if not unique:
            return {}
        with self._db.connection() as connection:
            rows = connection.execute(
                "SELECT doc, rev FROM memories WHERE tenant = ? AND user_id = ? "
                f"AND memory_id IN ({','.join('?' * len(unique))})",
                [tenant, user_id, *unique],
            ).fetchall()
        found = [VersionedMemory(MemoryUnit.model_validate_json(doc), rev) for doc, rev in rows]
        return {versioned.memory.memory_id: versioned for versioned in found}

    def get_fact_row(self, tenant: str, user_id: str, key: str) -> FactRow:
        with self._db.connection() as connection:
            row = connection.execute(
                "SELECT facts, version FROM entity_facts "
                "WHERE tenant = ? AND user_id = ? AND fact_key = ?",
                (tenant, user_id, key),
            ).fetchone()
        if row is None:
            return FactRow()
        facts = {
            memory_id: FactObservation.model_validate(fact)
            for memory_id, fact in json.loads(row[0]).items()
        }
        return FactRow(facts=facts, version=row[1])

    def pending_memories(self, tenant: str, user_id: str, limit: int) -> list[MemoryUnit]:
        # The DynamoDB adapter's order: the pending index by sort key (memory id#rev), descending.
        with self._db.connection() as connection:
            rows = connection.execute(
                "SELECT op, doc FROM outbox WHERE tenant = ? AND user_id = ? AND done = 0 "
                "ORDER BY memory_id DESC, rev DESC LIMIT ?",
                (tenant, user_id, limit),
            ).fetchall()
        latest: dict[str, MemoryUnit] = {}
        for op, doc in rows:
            if op == OutboxOp.UPSERT:
                memory = MemoryUnit.model_validate_json(doc)
                latest.setdefault(memory.memory_id, memory)
        return list(latest.values())

    def memories_of(self, tenant: str, user_id: str) -> list[MemoryUnit]:
        with self._db.connection() as connection:
            rows = connection.execute(
                "SELECT doc FROM memories WHERE tenant = ? AND user_id = ? ORDER BY memory_id",
                (tenant, user_id),
            ).fetchall()
        return [MemoryUnit.model_validate_json(doc) for (doc,) in rows]

    def memory_by_id(self, tenant: str, memory_id: str) -> MemoryUnit | None:
        with self._db.connection() as connection:
            row = connection.execute(
                _WITH_ACCESS + "WHERE m.tenant = ? AND m.memory_id = ?", (tenant, memory_id)
            ).fetchone()
        return None if row is None else _with_access(*row)

    def page_of(self, tenant: str, user_id: str, limit: int, cursor: str | None) -> MemoryPage:
        after = "" if cursor is None else decode_cursor(cursor)
        with self._db.connection() as connection:
            rows = connection.execute(
                _WITH_ACCESS + "WHERE m.tenant = ? AND m.user_id = ? AND m.memory_id > ? "
                "ORDER BY m.memory_id LIMIT ?",
                (tenant, user_id, after, limit + 1),
            ).fetchall()
        memories = [_with_access(*row) for row in rows[:limit]]
        more = len(rows) > limit
        return MemoryPage(memories, encode_cursor(memories[-1].memory_id) if more else None)

    def record_access(self, tenant: str, user_id: str, memory_ids: Sequence[str], at: str) -> None:
        # Only memories that exist (a search racing an erasure leaves no counters behind).
        with self._db.transaction() as connection:
            connection.executemany(
                "INSERT INTO memory_access "
                "(tenant, user_id, memory_id, access_count, last_accessed) "
                "SELECT tenant, user_id, memory_id, 1, ? FROM memories "
                "WHERE tenant = ? AND user_id = ? AND memory_id = ? "
                "ON CONFLICT (tenant, user_id, memory_id) DO UPDATE SET "
                "access_count = access_count + 1, last_accessed = excluded.last_accessed",
                [(at, tenant, user_id, memory_id) for memory_id in dict.fromkeys(memory_ids)],
            )

    def commit(self, commit: Commit) -> None:
        with self._db.transaction() as connection:
            self._apply(connection, commit)

    @staticmethod
    def _apply(connection: sqlite3.Connection, commit: Commit) -> None:
        user = (commit.tenant, commit.user_id)
        if commit.from_trace:
            require_source_trace(connection, commit.tenant, commit.trace_id)
            require_not_rolled_back(connection, commit.tenant, commit.trace_id)
        docs: dict[str, tuple[str, int]] = {}
        for memory, expected in commit.memories:
            row = connection.execute(
                "SELECT rev FROM memories WHERE tenant = ? AND user_id = ? AND memory_id = ?",
                (*user, memory.memory_id),
            ).fetchone()
            if (row[0] if row else None) != expected:
                raise WriteConflict(f"memory {memory.memory_id} changed since it was read")
            rev = (expected or 0) + 1
            docs[memory.memory_id] = (memory.model_dump_json(), rev)
            connection.execute(
                "INSERT OR REPLACE INTO memories (tenant, user_id, memory_id, rev, doc) "
                "VALUES (?, ?, ?, ?, ?)",
                (*user, memory.memory_id, rev, docs[memory.memory_id][0]),
            )
        if commit.fact_key is not None and commit.fact_row is not None:
            fact_row = commit.fact_row
            row = connection.execute(
                "SELECT version FROM entity_facts "
                "WHERE tenant = ? AND user_id = ? AND fact_key = ?",
                (*user, commit.fact_key),
            ).fetchone()
            if (row[0] if row else 0) != fact_row.version:
                raise WriteConflict(f"entity_facts row {commit.fact_key} changed since it was read")
            facts = {mid: fact.model_dump(mode="json") for mid, fact in fact_row.facts.items()}
            connection.execute(
                "INSERT OR REPLACE INTO entity_facts (tenant, user_id, fact_key, version, facts) "
                "VALUES (?, ?, ?, ?, ?)",
                (*user, commit.fact_key, fact_row.version + 1, json.dumps(facts, sort_keys=True)),
            )
        connection.executemany(
            "INSERT OR REPLACE INTO trace_memories (tenant, trace_id, memory_id, outcome) "
            "VALUES (?, ?, ?, ?)",
            [(commit.tenant, e.trace_id, e.memory_id, e.outcome) for e in commit.ledger],
        )
        insert_outbox_rows(connection, user, commit.outbox, docs)


class SqliteEntityStore:
    """The entities table: one row per entity of a user, versioned for conditional writes."""

    def __init__(self, database: SqliteDatabase) -> None:
        self._db = database

    def entities_of(self, tenant: str, user_id: str, limit: int) -> list[Entity]:
        with self._db.connection() as connection:
            rows = connection.execute(
                "SELECT doc FROM entities WHERE tenant = ? AND user_id = ? ORDER BY entity_id",
                (tenant, user_id),
            ).fetchall()
        # The DynamoDB adapter's order: by last_seen, newest first, ties in key order.
        entities = [Entity.model_validate_json(doc) for (doc,) in rows]
        entities.sort(key=lambda entity: entity.last_seen, reverse=True)
        return entities[:limit]

    def get(self, tenant: str, user_id: str, entity_id: str) -> VersionedEntity | None:
        with self._db.connection() as connection:
            row = connection.execute(
                "SELECT doc, version FROM entities WHERE tenant = ? AND user_id = ? "
                "AND entity_id = ?",
                (tenant, user_id, entity_id),
            ).fetchone()
        return None if row is None else VersionedEntity(Entity.model_validate_json(row[0]), row[1])

    def put(
        self, entity: Entity, expected_version: int | None, source_trace_ids: Sequence[str]
    ) -> None:
        key = (entity.tenant, entity.user_id, entity.entity_id)
        with self._db.transaction() as connection:
            for trace_id in source_trace_ids:
                require_source_trace(connection, entity.tenant, trace_id)
            row = connection.execute(
                "SELECT version FROM entities WHERE tenant = ? AND user_id = ? AND entity_id = ?",
                key,
            ).fetchone()
            if (row[0] if row else None) != expected_version:
                raise WriteConflict(f"entity {entity.entity_id} changed since it was read")
            connection.execute(
                "INSERT OR REPLACE INTO entities (tenant, user_id, entity_id, version, doc) "
                "VALUES (?, ?, ?, ?, ?)",
                (*key, (expected_version or 0) + 1, entity.model_dump_json()),
            )
