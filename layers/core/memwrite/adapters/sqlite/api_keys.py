"""The API key table of the embedded backend: the same records as on DynamoDB."""

from __future__ import annotations

from memwrite.adapters.sqlite.database import SqliteDatabase
from memwrite.errors import ApiKeyExists
from memwrite.ports import ApiKeyRecord

__all__ = ["SqliteApiKeyStore"]

_COLUMNS = "key_id, key_hash, tenant, created_at"


class SqliteApiKeyStore:
    def __init__(self, database: SqliteDatabase) -> None:
        self._db = database

    def add(self, record: ApiKeyRecord) -> None:
        with self._db.transaction() as connection:  # the check holds: the write lock is taken
            taken = connection.execute(
                "SELECT 1 FROM api_keys WHERE key_hash = ? OR key_id = ?",
                (record.key_hash, record.key_id),
            ).fetchone()
            if taken:
                raise ApiKeyExists("a key with this hash or id is stored already")
            connection.execute(
                f"INSERT INTO api_keys ({_COLUMNS}) VALUES (?, ?, ?, ?)",
                (record.key_id, record.key_hash, record.tenant, record.created_at),
            )

    def tenant_of(self, key_hash: str) -> str | None:
        with self._db.connection() as connection:
            row = connection.execute(
                "SELECT tenant FROM api_keys WHERE key_hash = ?", (key_hash,)
            ).fetchone()
        return str(row[0]) if row else None

    def list_keys(self, tenant: str | None = None) -> list[ApiKeyRecord]:
        with self._db.connection() as connection:
            rows = connection.execute(
                f"SELECT {_COLUMNS} FROM api_keys WHERE ?1 IS NULL OR tenant = ?1 "
                "ORDER BY created_at, key_id",
                (tenant,),
            ).fetchall()
        return [ApiKeyRecord(*row) for row in rows]

    def revoke(self, key_id: str) -> ApiKeyRecord | None:
        with self._db.transaction() as connection:
            row = connection.execute(
                f"SELECT {_COLUMNS} FROM api_keys WHERE key_id = ?", (key_id,)
            ).fetchone()
            connection.execute("DELETE FROM api_keys WHERE key_id = ?", (key_id,))
        return ApiKeyRecord(*row) if row else None
