"""The webhook delivery lane's SQS standard queue: stage 7 sends each (event, webhook) delivery
to it in batches; the `webhook_delivery` function's event source receives and deletes, and the
function delays a failed delivery with `ChangeMessageVisibility` (the lane's backoff). The
queue's redrive policy moves a message received `MAX_ATTEMPTS` times to its DLQ. The twin of
`memwrite.adapters.sqlite.webhook_queue`.

A standard queue, not FIFO: deliveries have no order to keep, and one receiver's failing
messages must not hold back any other's (a FIFO group would).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from memwrite.errors import ConfigError, QueueUnavailable
from memwrite.ports import WebhookMessage
from memwrite.records.change_events import WebhookDelivery

if TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from mypy_boto3_sqs.type_defs import SendMessageBatchRequestEntryTypeDef

__all__ = ["SqsWebhookQueue"]

_MAX_BATCH_ENTRIES = 10  # one SendMessageBatch; a tenant has at most 10 webhooks


@contextmanager
def _queue_call(operation: str) -> Iterator[None]:
    try:
        yield
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "Unknown")
        raise QueueUnavailable(f"SQS {operation} failed: {code}") from exc


class SqsWebhookQueue:
    """Both ends of the `WebhookQueue`; `dead_letter_url` (the DLQ) only for reading it."""

    def __init__(
        self, client: SQSClient, queue_url: str, dead_letter_url: str | None = None
    ) -> None:
        self._client = client
        self._queue_url = queue_url
        self._dead_letter_url = dead_letter_url

    def enqueue(self, deliveries: Sequence[WebhookDelivery]) -> None:
        for start in range(0, len(deliveries), _MAX_BATCH_ENTRIES):
            batch = deliveries[start : start + _MAX_BATCH_ENTRIES]
            entries: list[SendMessageBatchRequestEntryTypeDef] = [
                {"Id": str(index), "MessageBody": delivery.model_dump_json()}
                for index, delivery in enumerate(batch)
            ]
            with _queue_call("SendMessageBatch"):
                response = self._client.send_message_batch(
                    QueueUrl=self._queue_url, Entries=entries
                )
            failed = [entry.get("Code", "Unknown") for entry in response.get("Failed", [])]
            if failed:
                # The row stays pending: its retry sends the whole batch again (same ids).
                raise QueueUnavailable(f"SQS SendMessageBatch refused {len(failed)}: {failed}")

    def receive(
        self, max_messages: int, visibility_timeout_secs: int, *, now: float
    ) -> list[WebhookMessage]:
        del now  # SQS keeps its own clock
        with _queue_call("ReceiveMessage"):
            messages = self._client.receive_message(
                QueueUrl=self._queue_url,
                MaxNumberOfMessages=max_messages,
                VisibilityTimeout=visibility_timeout_secs,
                WaitTimeSeconds=0,
                MessageSystemAttributeNames=["ApproximateReceiveCount"],
            ).get("Messages", [])
        return [
            WebhookMessage(
                delivery=WebhookDelivery.model_validate_json(message["Body"]),
                receipt=message["ReceiptHandle"],
                receive_count=int(message["Attributes"]["ApproximateReceiveCount"]),
            )
            for message in messages
        ]

    def delete(self, messages: Sequence[WebhookMessage]) -> None:
        for message in messages:
            with _queue_call("DeleteMessage"):
                self._client.delete_message(QueueUrl=self._queue_url, ReceiptHandle=message.receipt)

    def retry_later(self, message: WebhookMessage, delay_secs: int, *, now: float) -> None:
        del now  # SQS keeps its own clock: the delay runs from this call
        with _queue_call("ChangeMessageVisibility"):
            self._client.change_message_visibility(
                QueueUrl=self._queue_url,
                ReceiptHandle=message.receipt,
                VisibilityTimeout=delay_secs,
            )

    def dead_letters(self, limit: int) -> list[WebhookDelivery]:
        if self._dead_letter_url is None:
            raise ConfigError("environment variable WEBHOOK_DEAD_LETTER_URL is not set")
        # Visibility 0: a look that leaves the messages where they are.
        with _queue_call("ReceiveMessage"):
            messages = self._client.receive_message(
                QueueUrl=self._dead_letter_url,
                MaxNumberOfMessages=min(limit, _MAX_BATCH_ENTRIES),
                VisibilityTimeout=0,
            ).get("Messages", [])
        return [WebhookDelivery.model_validate_json(message["Body"]) for message in messages]
