"""The model budget's buckets in the embedded backend: one row per shard in the database file
every handler and worker of `memwrite serve` shares (`memwrite.budget.ports.BudgetStore`)."""

from __future__ import annotations

from collections.abc import Sequence

from memwrite.adapters.sqlite.database import SqliteDatabase
from memwrite.budget.ports import BucketRecord

__all__ = ["SqliteBudgetStore"]

_COLUMNS = (
    "key, version, requests, input_tokens, output_tokens, updated_at, factor, blocked_until, "
    "decreased_at, line_at"
)


def _row(record: BucketRecord) -> tuple[object, ...]:
    return (
        record.key,
        record.version + 1,
        *record.levels,
        record.updated_at,
        record.factor,
        record.blocked_until,
        record.decreased_at,
        record.line_at,
    )


class SqliteBudgetStore:
    def __init__(self, database: SqliteDatabase) -> None:
        self._db = database

    def load(self, keys: Sequence[str]) -> list[BucketRecord | None]:
        with self._db.connection() as connection:
            rows = connection.execute(
                f"SELECT {_COLUMNS} FROM budget_buckets WHERE key IN "
                f"({', '.join('?' for _ in keys)})",
                list(keys),
            ).fetchall()
        found = {
            row[0]: BucketRecord(
                row[0], (row[2], row[3], row[4]), row[5], row[1], row[6], row[7], row[8], row[9]
            )
            for row in rows
        }
        return [found.get(key) for key in keys]

    def save(self, records: Sequence[BucketRecord]) -> bool:
        keys = [record.key for record in records]
        with self._db.transaction() as connection:
            # BEGIN IMMEDIATE holds the write lock: the versions read here hold at commit.
            stored = dict(
                connection.execute(
                    f"SELECT key, version FROM budget_buckets WHERE key IN "
                    f"({', '.join('?' for _ in keys)})",
                    keys,
                ).fetchall()
            )
            if any(stored.get(record.key, 0) != record.version for record in records):
                return False
            connection.executemany(
                f"INSERT INTO budget_buckets ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (key) DO UPDATE SET version = excluded.version, "
                "requests = excluded.requests, input_tokens = excluded.input_tokens, "
                "output_tokens = excluded.output_tokens, updated_at = excluded.updated_at, "
                "factor = excluded.factor, blocked_until = excluded.blocked_until, "
                "decreased_at = excluded.decreased_at, line_at = excluded.line_at",
                [_row(record) for record in records],
            )
        return True
