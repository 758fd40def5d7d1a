"""The change feed on the environment's EventBridge bus (`memwrite.ports.EventPublisher`).

Each event is one entry: `Source` "memwrite", `DetailType` the event's type
(`memory.created`, ...), `Detail` the event's JSON (what a webhook receives), sent with
`PutEvents` at most 10 entries a call (its limit). A call that fails, or any entry EventBridge
rejects, raises `EventsUnpublished` (transient): the outbox row stays pending and the stream's
retry publishes the row's events again under the same ids (subscribers dedupe on `event_id`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from memwrite.errors import EventsUnpublished
from memwrite.records.change_events import ChangeEvent

__all__ = ["BATCH_SIZE", "SOURCE", "EventBridgePublisher"]

SOURCE = "memwrite"
BATCH_SIZE = 10  # PutEvents takes at most 10 entries


class EventBridgePublisher:
    def __init__(self, client: Any, bus_name: str) -> None:  # boto3 "events" (no stubs)
        self._client = client
        self._bus = bus_name

    def publish(self, events: Sequence[ChangeEvent]) -> None:
        failures: list[str] = []
        for start in range(0, len(events), BATCH_SIZE):
            batch = events[start : start + BATCH_SIZE]
            entries = [
                {
                    "Source": SOURCE,
                    "DetailType": event.type.value,
                    "Detail": event.model_dump_json(),
                    "EventBusName": self._bus,
                }
                for event in batch
            ]
            try:
                response = self._client.put_events(Entries=entries)
            except (ClientError, BotoCoreError) as exc:
                failures.extend(f"{event.event_id}: {type(exc).__name__}" for event in batch)
                continue
            if not response.get("FailedEntryCount"):
                continue
            results = response.get("Entries", [])
            failed = [
                f"{event.event_id}: {result.get('ErrorCode', 'failed')}"
                for event, result in zip(batch, results, strict=False)
                if "ErrorCode" in result or "EventId" not in result
            ]
            # Counted as failed but no entry says which: the whole batch goes again.
            failures.extend(failed or [f"{event.event_id}: failed" for event in batch])
        if failures:
            raise EventsUnpublished(self._bus, failures)
