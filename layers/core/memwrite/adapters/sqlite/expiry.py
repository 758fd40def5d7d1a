"""The memories whose user expiry is due, from the partial index `memories_expiry_due` (it holds
only the memories with an expiry still to announce; `database.EXPIRY_DUE_WHERE`)."""

from __future__ import annotations

from datetime import datetime

from memwrite.adapters.sqlite.database import EXPIRY_DUE_AT, EXPIRY_DUE_WHERE, SqliteDatabase
from memwrite.ports import DueExpiry

__all__ = ["DUE_QUERY", "SqliteExpiryFinder"]

# The index's own expressions, as is: SQLite uses a partial index only for a query that states
# its condition.
DUE_QUERY = (
    f"SELECT tenant, user_id, memory_id, json_extract(doc, '$.expires_on') FROM memories "
    f"WHERE {EXPIRY_DUE_WHERE} AND {EXPIRY_DUE_AT} <= julianday(?) "
    f"ORDER BY {EXPIRY_DUE_AT} LIMIT ?"
)


class SqliteExpiryFinder:
    def __init__(self, database: SqliteDatabase) -> None:
        self._db = database

    def due(self, now: datetime, limit: int) -> list[DueExpiry]:
        with self._db.connection() as connection:
            rows = connection.execute(DUE_QUERY, (now.isoformat(), limit)).fetchall()
        return [
            DueExpiry(tenant, user_id, memory_id, datetime.fromisoformat(due))
            for tenant, user_id, memory_id, due in rows
        ]
