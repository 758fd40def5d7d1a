"""The usage meter in the embedded backend: one row per tenant and UTC hour in the database
file every handler and worker of `memwrite serve` shares (`memwrite.metering.ports.
UsageMeter`). An add is one upsert, so concurrent adds all count."""

from __future__ import annotations

from datetime import datetime

from memwrite.adapters.sqlite.database import SqliteDatabase
from memwrite.metering.counts import COUNTERS, UsageCounts, hour_key

__all__ = ["SqliteUsageMeter"]

_COLUMNS = ", ".join(COUNTERS)
_ADD = (
    f"INSERT INTO usage_hours (tenant, hour, {_COLUMNS}) "
    f"VALUES (?, ?, {', '.join('?' for _ in COUNTERS)}) "
    "ON CONFLICT (tenant, hour) DO UPDATE SET "
    + ", ".join(f"{name} = {name} + excluded.{name}" for name in COUNTERS)
)
_SUM = (
    f"SELECT {', '.join(f'TOTAL({name})' for name in COUNTERS)} FROM usage_hours "
    "WHERE tenant = ? AND hour >= ? AND hour < ?"
)


class SqliteUsageMeter:
    def __init__(self, database: SqliteDatabase) -> None:
        self._db = database

    def add(self, tenant: str, hour: datetime, counts: UsageCounts) -> None:
        with self._db.connection() as connection:
            connection.execute(_ADD, (tenant, hour_key(hour), *counts.values()))

    def read(self, tenant: str, start: datetime, end: datetime) -> UsageCounts:
        with self._db.connection() as connection:
            row = connection.execute(_SUM, (tenant, hour_key(start), hour_key(end))).fetchone()
        summed = dict(zip(COUNTERS, row, strict=True))
        return UsageCounts(
            **{name: int(value) for name, value in summed.items() if name != "cost_usd"},
            cost_usd=round(summed["cost_usd"], 8),
        )
