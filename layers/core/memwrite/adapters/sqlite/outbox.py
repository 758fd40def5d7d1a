"""The SQLite outbox table as the indexer's change feed: pending rows in commit order, and
marking rows done; the twin of `dynamodb_outbox.py`. No stream here: the local runner reads
`pending` and delivers the rows to stage 7 itself."""

from __future__ import annotations

from collections.abc import Sequence

from memwrite.adapters.sqlite.database import SqliteDatabase
from memwrite.payloads import OutboxChange
from memwrite.records.change_events import is_erasure_row

__all__ = ["SqliteOutbox"]


class SqliteOutbox:
    def __init__(self, database: SqliteDatabase) -> None:
        self._db = database

    def pending(self, limit: int) -> list[OutboxChange]:
        """In the table's sequence (commit order), so one memory's rows come rev by rev."""
        with self._db.connection() as connection:
            rows = connection.execute(
                "SELECT tenant, user_id, memory_id, rev, trace_id FROM outbox WHERE done = 0 "
                "ORDER BY seq LIMIT ?",
                (limit,),
            ).fetchall()
        return [
            OutboxChange(
                tenant=tenant, user_id=user_id, memory_id=memory_id, rev=rev, trace_id=trace
            )
            for tenant, user_id, memory_id, rev, trace in rows
        ]

    def mark_done(self, changes: Sequence[OutboxChange]) -> None:
        # An erased user's row is gone: the update then changes nothing and brings nothing back.
        # An erasure's own row goes: it names the user it announced. One transaction for all,
        # a statement for each kind of row.
        where = "WHERE tenant = ? AND user_id = ? AND memory_id = ? AND rev = ?"
        keys = [(c.tenant, c.user_id, c.memory_id, c.rev) for c in changes]
        erasures = [key for key in keys if is_erasure_row(key[2])]
        with self._db.transaction() as connection:
            if erasures:
                connection.executemany(f"DELETE FROM outbox {where}", erasures)
            connection.executemany(
                f"UPDATE outbox SET done = 1 {where}",
                [key for key in keys if not is_erasure_row(key[2])],
            )
