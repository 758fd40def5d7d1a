"""SQS adapter: pre-filter survivors into the FIFO work queue, in batches.

FIFO group per tenant and user keeps one user's turns in order; the deduplication id is the
content-addressed turn id, so two concurrent requests carrying the same turn enqueue it once.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from memwrite.ids import content_hash
from memwrite.models import QueuedTurn
from memwrite.ports import EnqueueResult

if TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from mypy_boto3_sqs.type_defs import SendMessageBatchRequestEntryTypeDef

__all__ = ["SqsTurnQueue", "message_group_id"]

_MAX_BATCH_ENTRIES = 10
_MAX_BATCH_BYTES = 240_000  # SQS caps a batch at 256 KiB; keep headroom for attributes


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
