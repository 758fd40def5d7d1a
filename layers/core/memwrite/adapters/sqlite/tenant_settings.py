"""Tenants' stored settings in the embedded backend: the same JSON documents as on DynamoDB."""

from __future__ import annotations

from memwrite.adapters.sqlite.database import SqliteDatabase
from memwrite.config.tenant_overrides import TenantOverrides

__all__ = ["SqliteTenantSettingsStore"]


class SqliteTenantSettingsStore:
    def __init__(self, database: SqliteDatabase) -> None:
        self._db = database

    def get(self, tenant: str) -> TenantOverrides | None:
        with self._db.connection() as connection:
            row = connection.execute(
                "SELECT settings FROM tenant_settings WHERE tenant = ?", (tenant,)
            ).fetchone()
        return TenantOverrides.model_validate_json(row[0]) if row else None

    def put(self, tenant: str, settings: TenantOverrides, updated_at: str) -> None:
        with self._db.transaction() as connection:
            connection.execute(
                "INSERT INTO tenant_settings (tenant, settings, updated_at) VALUES (?, ?, ?) "
                "ON CONFLICT (tenant) DO UPDATE SET settings = excluded.settings, "
                "updated_at = excluded.updated_at",
                (tenant, settings.model_dump_json(exclude_none=True), updated_at),
            )
