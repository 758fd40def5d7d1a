"""SQLite webhook queue: the webhook delivery lane's SQS standard queue in a table, for the
embedded mode; the twin of `memwrite.adapters.aws.sqs_webhooks`.

A message is visible once `visible_at` has passed (by the caller's clock, `now`, so tests move
time instead of sleeping); receiving hides it for the visibility timeout and counts the
receive; `retry_later` hides it for a backoff; a receipt deletes only the receive it came with.
A message already received `max_receives` times (the lane's attempts: wiring passes them, as
the deployment sets SQS's maxReceiveCount) is moved to the dead letters by the next receive
instead of being delivered, as SQS's redrive policy does. A delivery already waiting is not
queued twice (its delivery id is unique), one delivered and deleted may be queued again.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from memwrite.adapters.sqlite.database import SqliteDatabase
from memwrite.ports import WebhookMessage
from memwrite.records.change_events import WebhookDelivery

__all__ = ["SqliteWebhookQueue"]

_MAX_DEAD_LETTERS_READ = 10  # as one SQS receive of the dead-letter queue


class SqliteWebhookQueue:
    """Both ends of the `WebhookQueue`: stage 7's and the delivery worker's."""

    def __init__(self, database: SqliteDatabase, *, max_receives: int) -> None:
        self._db = database
        self._max_receives = max_receives

    def enqueue(self, deliveries: Sequence[WebhookDelivery]) -> None:
        # A StoreUnavailable (transient) propagates: the outbox row stays pending.
        with self._db.transaction() as connection:
            connection.executemany(
                "INSERT OR IGNORE INTO webhook_queue (delivery_id, body) VALUES (?, ?)",
                [(d.delivery_id, d.model_dump_json()) for d in deliveries],
            )

    def receive(
        self, max_messages: int, visibility_timeout_secs: int, *, now: float
    ) -> list[WebhookMessage]:
        with self._db.transaction() as connection:
            # The redrive: received as often as allowed and visible again -> dead letters.
            exhausted = "visible_at <= ? AND receive_count >= ?"
            connection.execute(
                "INSERT INTO webhook_dead_letters (delivery_id, body, receive_count) "
                f"SELECT delivery_id, body, receive_count FROM webhook_queue WHERE {exhausted} "
                "ORDER BY seq",
                (now, self._max_receives),
            )
            connection.execute(
                f"DELETE FROM webhook_queue WHERE {exhausted}", (now, self._max_receives)
            )
            rows = connection.execute(
                "SELECT seq, body, receive_count FROM webhook_queue WHERE visible_at <= ? "
                "ORDER BY seq LIMIT ?",
                (now, max_messages),
            ).fetchall()
            messages = []
            for seq, body, receive_count in rows:
                receipt = f"{seq}:{uuid.uuid4().hex}"
                connection.execute(
                    "UPDATE webhook_queue SET visible_at = ?, "
                    "receive_count = receive_count + 1, receipt = ? WHERE seq = ?",
                    (now + visibility_timeout_secs, receipt, seq),
                )
                delivery = WebhookDelivery.model_validate_json(body)
                messages.append(WebhookMessage(delivery, receipt, receive_count + 1))
        return messages

    def delete(self, messages: Sequence[WebhookMessage]) -> None:
        with self._db.transaction() as connection:
            connection.executemany(
                "DELETE FROM webhook_queue WHERE receipt = ?", [(m.receipt,) for m in messages]
            )

    def retry_later(self, message: WebhookMessage, delay_secs: int, *, now: float) -> None:
        with self._db.transaction() as connection:
            connection.execute(
                "UPDATE webhook_queue SET visible_at = ? WHERE receipt = ?",
                (now + delay_secs, message.receipt),
            )

    def dead_letters(self, limit: int) -> list[WebhookDelivery]:
        with self._db.connection() as connection:
            rows = connection.execute(
                "SELECT body FROM webhook_dead_letters ORDER BY seq LIMIT ?",
                (min(limit, _MAX_DEAD_LETTERS_READ),),
            ).fetchall()
        return [WebhookDelivery.model_validate_json(body) for (body,) in rows]
