"""SQS adapters: pre-filter survivors into the FIFO work queue, in batches; and the consuming
side the local runner drains (on AWS the Lambda event source mapping consumes it).

FIFO group per tenant and user keeps one user's turns in order; the deduplication id is the
content-addressed turn id, so two concurrent requests carrying the same turn enqueue it once.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from memwrite.errors import QueueUnavailable
from memwrite.ids import content_hash
from memwrite.models import QueuedTurn
from memwrite.ports import DeadLetter, Delivery, EnqueueResult

if TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from mypy_boto3_sqs.type_defs import SendMessageBatchRequestEntryTypeDef

__all__ = ["SqsTurnConsumer", "SqsTurnQueue", "message_group_id"]

_MAX_BATCH_ENTRIES = 10
_MAX_BATCH_BYTES = 240_000  # SQS caps a batch at 256 KiB; keep headroom for attributes
_ERROR_ATTRIBUTE = "error"  # a dead letter's cause, as a message attribute


def message_group_id(tenant: str, user_id: str) -> str:
    """FIFO group of one tenant's user, hashed to fit SQS's 128-character limit."""
    return content_hash("group", tenant, user_id)


class SqsTurnQueue:
    def __init__(self, client: SQSClient, queue_url: str) -> None:
        self._client = client
        self._queue_url = queue_url

    def enqueue(self, turns: Sequence[QueuedTurn]) -> EnqueueResult:
        sent: set[str] = set()
        failed: dict[str, str] = {}
        for batch in self._batches(turns):
            entries: list[SendMessageBatchRequestEntryTypeDef] = [
                {
                    "Id": str(index),
                    "MessageBody": body,
                    "MessageGroupId": message_group_id(turn.tenant, turn.user_id),
                    "MessageDeduplicationId": turn.turn_id,
                }
                for index, (turn, body) in enumerate(batch)
            ]
            by_entry = {str(index): turn.turn_id for index, (turn, _) in enumerate(batch)}
            try:
                response = self._client.send_message_batch(
                    QueueUrl=self._queue_url, Entries=entries
                )
            except ClientError as exc:
                code = exc.response.get("Error", {}).get("Code", "Unknown")
                failed.update(dict.fromkeys(by_entry.values(), code))
                continue
            sent.update(by_entry[entry["Id"]] for entry in response.get("Successful", []))
            failed.update(
                {
                    by_entry[entry["Id"]]: entry.get("Code", "Unknown")
                    for entry in response.get("Failed", [])
                }
            )
        return EnqueueResult(sent=frozenset(sent), failed=failed)

    @staticmethod
    def _batches(turns: Sequence[QueuedTurn]) -> Iterator[list[tuple[QueuedTurn, str]]]:
        batch: list[tuple[QueuedTurn, str]] = []
        size = 0
        for turn in turns:
            body = turn.model_dump_json()
            body_size = len(body.encode("utf-8"))
            if batch and (len(batch) == _MAX_BATCH_ENTRIES or size + body_size > _MAX_BATCH_BYTES):
                yield batch
                batch, size = [], 0
            batch.append((turn, body))
            size += body_size
        if batch:
            yield batch


@contextmanager
def _queue_call(operation: str) -> Iterator[None]:
    try:
        yield
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "Unknown")
        raise QueueUnavailable(f"SQS {operation} failed: {code}") from exc


class SqsTurnConsumer:
    """Receives from the work queue; dead letters go to a second FIFO queue with their error."""

    def __init__(self, client: SQSClient, queue_url: str, dead_letter_url: str) -> None:
        self._client = client
        self._queue_url = queue_url
        self._dead_letter_url = dead_letter_url

    def receive(self, max_messages: int, visibility_timeout_secs: int) -> list[Delivery]:
        with _queue_call("ReceiveMessage"):
            messages = self._client.receive_message(
                QueueUrl=self._queue_url,
                MaxNumberOfMessages=max_messages,
                VisibilityTimeout=visibility_timeout_secs,
                WaitTimeSeconds=0,
                MessageSystemAttributeNames=["ApproximateReceiveCount"],
            ).get("Messages", [])
        return [
            Delivery(
                turn=QueuedTurn.model_validate_json(message["Body"]),
                receipt=message["ReceiptHandle"],
                receive_count=int(message["Attributes"]["ApproximateReceiveCount"]),
            )
            for message in messages
        ]

    def delete(self, deliveries: Sequence[Delivery]) -> None:
        for delivery in deliveries:
            with _queue_call("DeleteMessage"):
                self._client.delete_message(
                    QueueUrl=self._queue_url, ReceiptHandle=delivery.receipt
                )

    def release(self, deliveries: Sequence[Delivery], delay_secs: float = 0.0) -> None:
        # SQS counts visibility in whole seconds, at most 12 hours.
        timeout = min(43_200, math.ceil(delay_secs))
        for delivery in deliveries:
            with _queue_call("ChangeMessageVisibility"):
                self._client.change_message_visibility(
                    QueueUrl=self._queue_url,
                    ReceiptHandle=delivery.receipt,
                    VisibilityTimeout=timeout,
                )

    def dead_letter(self, deliveries: Sequence[Delivery], error: str) -> None:
        for delivery in deliveries:
            turn = delivery.turn
            with _queue_call("SendMessage"):
                self._client.send_message(
                    QueueUrl=self._dead_letter_url,
                    MessageBody=turn.model_dump_json(),
                    MessageGroupId=message_group_id(turn.tenant, turn.user_id),
                    MessageDeduplicationId=turn.turn_id,
                    MessageAttributes={
                        _ERROR_ATTRIBUTE: {"DataType": "String", "StringValue": error}
                    },
                )
        self.delete(deliveries)

    def dead_letters(self, limit: int) -> list[DeadLetter]:
        # Visibility 0: a look that leaves the messages where they are.
        with _queue_call("ReceiveMessage"):
            messages = self._client.receive_message(
                QueueUrl=self._dead_letter_url,
                MaxNumberOfMessages=min(limit, _MAX_BATCH_ENTRIES),
                VisibilityTimeout=0,
                MessageAttributeNames=[_ERROR_ATTRIBUTE],
            ).get("Messages", [])
        return [
            DeadLetter(
                turn=QueuedTurn.model_validate_json(message["Body"]),
                error=message["MessageAttributes"][_ERROR_ATTRIBUTE]["StringValue"],
            )
            for message in messages
        ]
