"""SQLite work queue: the SQS FIFO queue's semantics in a table, for the embedded mode.

A message is visible when `visible_at` has passed; receiving hides it for the visibility
timeout and counts the receive; a receipt deletes only the delivery it came with. Messages of
one tenant, user and session are one group: delivered in enqueue order, and none of the group
while one of it is in flight. A turn already waiting is not enqueued twice (SQS's
deduplication id is the turn id too). Dead letters keep the turn and the error.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence

from memwrite.adapters.sqlite.database import SqliteDatabase
from memwrite.errors import StoreUnavailable
from memwrite.ids import content_hash
from memwrite.models import QueuedTurn
from memwrite.ports import DeadLetter, Delivery, EnqueueResult

__all__ = ["SqliteTurnQueue"]

_MAX_DEAD_LETTERS_READ = 10  # as one SQS receive of the dead-letter queue


def _group_of(turn: QueuedTurn) -> str:
    return content_hash("group", turn.tenant, turn.user_id, turn.session_id)


class SqliteTurnQueue:
    """Both ends of the queue: `TurnQueue` for the ingest API, `TurnConsumer` for the runner."""

    def __init__(self, database: SqliteDatabase) -> None:
        self._db = database

    def enqueue(self, turns: Sequence[QueuedTurn]) -> EnqueueResult:
        rows = [(turn.turn_id, _group_of(turn), turn.model_dump_json()) for turn in turns]
        try:
            with self._db.transaction() as connection:
                connection.executemany(
                    "INSERT OR IGNORE INTO queue (turn_id, message_group, body) VALUES (?, ?, ?)",
                    rows,
                )
        except StoreUnavailable:
            return EnqueueResult(
                sent=frozenset(), failed=dict.fromkeys((t.turn_id for t in turns), "SqliteError")
            )
        return EnqueueResult(sent=frozenset(turn.turn_id for turn in turns), failed={})

    def receive(self, max_messages: int, visibility_timeout_secs: int) -> list[Delivery]:
        now = time.time()
        with self._db.transaction() as connection:
            rows = connection.execute(
                "SELECT seq, body, receive_count FROM queue AS q WHERE visible_at <= ?1 "
                "AND NOT EXISTS (SELECT 1 FROM queue AS p "
                "WHERE p.message_group = q.message_group AND p.visible_at > ?1) "
                "ORDER BY seq LIMIT ?2",
                (now, max_messages),
            ).fetchall()
            receipts = [f"{seq}:{uuid.uuid4().hex}" for seq, _, _ in rows]
            connection.executemany(
                "UPDATE queue SET visible_at = ?, receive_count = receive_count + 1, "
                "receipt = ? WHERE seq = ?",
                [
                    (now + visibility_timeout_secs, receipt, seq)
                    for receipt, (seq, _, _) in zip(receipts, rows, strict=True)
                ],
            )
        return [
            Delivery(QueuedTurn.model_validate_json(body), receipt, receive_count + 1)
            for receipt, (_, body, receive_count) in zip(receipts, rows, strict=True)
        ]

    def delete(self, deliveries: Sequence[Delivery]) -> None:
        with self._db.transaction() as connection:
            connection.executemany(
                "DELETE FROM queue WHERE receipt = ?", [(d.receipt,) for d in deliveries]
            )

    def release(self, deliveries: Sequence[Delivery], delay_secs: float = 0.0) -> None:
        visible_at = time.time() + delay_secs if delay_secs > 0 else 0
        with self._db.transaction() as connection:
            connection.executemany(
                "UPDATE queue SET visible_at = ? WHERE receipt = ?",
                [(visible_at, d.receipt) for d in deliveries],
            )

    def dead_letter(self, deliveries: Sequence[Delivery], error: str) -> None:
        with self._db.transaction() as connection:
            for delivery in deliveries:
                moved = connection.execute(
                    "DELETE FROM queue WHERE receipt = ?", (delivery.receipt,)
                ).rowcount
                if moved:
                    connection.execute(
                        "INSERT INTO dead_letters (turn_id, body, error, receive_count) "
                        "VALUES (?, ?, ?, ?)",
                        (
                            delivery.turn.turn_id,
                            delivery.turn.model_dump_json(),
                            error,
                            delivery.receive_count,
                        ),
                    )

    def dead_letters(self, limit: int) -> list[DeadLetter]:
        with self._db.connection() as connection:
            rows = connection.execute(
                "SELECT body, error FROM dead_letters ORDER BY seq LIMIT ?",
                (min(limit, _MAX_DEAD_LETTERS_READ),),
            ).fetchall()
        return [DeadLetter(QueuedTurn.model_validate_json(body), error) for body, error in rows]
