"""One user's store as export reads it and import writes it back (`UserPortability`), in the
SQLite file (episodes included); the twin of `dynamodb_portability.py`. A snapshot is one read
transaction, a restore one write transaction (`BEGIN IMMEDIATE`) whose existence checks hold
until it commits.
"""

from __future__ import annotations

import json
from datetime import datetime

from memwrite.adapters.sqlite.database import SqliteDatabase
from memwrite.adapters.sqlite.episodes import write_episode
from memwrite.adapters.sqlite.store import insert_outbox_rows
from memwrite.claims.entities import Entity, VersionedEntity
from memwrite.errors import WriteConflict
from memwrite.records.entity_facts import FactObservation
from memwrite.records.episode import Episode
from memwrite.records.memory import MemoryUnit
from memwrite.records.store import OutboxOp, OutboxRow
from memwrite.records.user_snapshot import RestoreUnit, StoredFactRow, StoredMemory, UserSnapshot

__all__ = ["SqlitePortability"]

_BY_USER = "WHERE tenant = ? AND user_id = ?"


class SqlitePortability:
    def __init__(self, database: SqliteDatabase) -> None:
        self._db = database

    def snapshot(self, tenant: str, user_id: str) -> UserSnapshot:
        user = (tenant, user_id)
        with self._db.connection() as connection:
            connection.execute("BEGIN")  # one consistent read of the five tables
            try:
                memories = connection.execute(
                    "SELECT m.doc, m.rev, a.access_count, a.last_accessed FROM memories AS m "
                    "LEFT JOIN memory_access AS a ON a.tenant = m.tenant "
                    "AND a.user_id = m.user_id AND a.memory_id = m.memory_id "
                    "WHERE m.tenant = ? AND m.user_id = ?",
                    user,
                ).fetchall()
                rows = connection.execute(
                    f"SELECT fact_key, facts, version FROM entity_facts {_BY_USER}", user
                ).fetchall()
                entities = connection.execute(
                    f"SELECT doc, version FROM entities {_BY_USER}", user
                ).fetchall()
                episodes = connection.execute(
                    f"SELECT doc FROM episodes {_BY_USER}", user
                ).fetchall()
            finally:
                connection.execute("COMMIT")
        return UserSnapshot(
            entities=[VersionedEntity(Entity.model_validate_json(d), v) for d, v in entities],
            fact_rows=[
                StoredFactRow(
                    key,
                    {
                        mid: FactObservation.model_validate(f)
                        for mid, f in json.loads(facts).items()
                    },
                    version,
                )
                for key, facts, version in rows
            ],
            memories=[
                StoredMemory(
                    MemoryUnit.model_validate_json(doc),
                    rev,
                    count or 0,
                    datetime.fromisoformat(last) if last else None,
                )
                for doc, rev, count, last in memories
            ],
            episodes=[Episode.model_validate_json(doc) for (doc,) in episodes],
        )

    def restore(self, unit: RestoreUnit) -> None:
        user = (unit.tenant, unit.user_id)
        with self._db.transaction() as connection:

            def absent(table: str, column: str, item_id: str) -> None:
                found = connection.execute(
                    f"SELECT 1 FROM {table} {_BY_USER} AND {column} = ?", (*user, item_id)
                ).fetchone()
                if found is not None:
                    raise WriteConflict(f"{table} {item_id} exists already")

            for versioned in unit.entities:
                entity = versioned.entity
                absent("entities", "entity_id", entity.entity_id)
                connection.execute(
                    "INSERT INTO entities (tenant, user_id, entity_id, version, doc) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (*user, entity.entity_id, versioned.version, entity.model_dump_json()),
                )
            docs: dict[str, tuple[str, int]] = {}
            for stored in unit.memories:
                memory = stored.memory
                absent("memories", "memory_id", memory.memory_id)
                docs[memory.memory_id] = (memory.model_dump_json(), stored.rev)
                connection.execute(
                    "INSERT INTO memories (tenant, user_id, memory_id, rev, doc) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (*user, memory.memory_id, stored.rev, docs[memory.memory_id][0]),
                )
                if stored.access_count:
                    connection.execute(
                        "INSERT OR REPLACE INTO memory_access "
                        "(tenant, user_id, memory_id, access_count, last_accessed) "
                        "VALUES (?, ?, ?, ?, ?)",
                        (
                            *user,
                            memory.memory_id,
                            stored.access_count,
                            stored.last_accessed.isoformat() if stored.last_accessed else "",
                        ),
                    )
            for row in unit.fact_rows:
                absent("entity_facts", "fact_key", row.key)
                facts = {mid: fact.model_dump(mode="json") for mid, fact in row.facts.items()}
                connection.execute(
                    "INSERT INTO entity_facts (tenant, user_id, fact_key, version, facts) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (*user, row.key, row.version, json.dumps(facts, sort_keys=True)),
                )
            outbox = [
                OutboxRow(
                    stored.memory.memory_id,
                    OutboxOp.UPSERT if stored.memory.active else OutboxOp.DELETE,
                    stored.memory.trace_id,
                )
                for stored in unit.memories
            ]
            insert_outbox_rows(connection, user, outbox, docs)
            for episode in unit.episodes:
                absent("episodes", "turn_id", episode.turn_id)
                write_episode(connection, episode)  # with its outbox row: stage 7 indexes it
