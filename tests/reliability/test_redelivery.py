"""At-least-once delivery, three times over: every queue message and every outbox stream
record arrives three times, each time processed in full. The final state is a clean run's.

Re-sending the same request is covered at the API (`tests/integration/test_duplicate_ingest.py`);
here the duplicates come from the queue and the stream themselves.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import pytest

import functions.hype.handler as hype_handler
from memwrite.ports import Delivery
from memwrite.wiring import build_queue_consumer
from tests.integration.conftest import Local
from tests.reliability.final_state import FinalState, assert_same_state
from tests.reliability.runs import ingest

DELIVERIES = 3


def lose_the_first_deletes(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Each message's first two deletes are lost (the consumer died before deleting, or the
    visibility timeout ran out): the message comes back after being processed in full."""
    consumer = type(build_queue_consumer())
    real_delete, release = consumer.delete, consumer.release
    deleted: Counter[str] = Counter()

    def delete(self: Any, deliveries: Sequence[Delivery]) -> None:
        deleted.update(delivery.turn.turn_id for delivery in deliveries)
        again = [d for d in deliveries if deleted[d.turn.turn_id] < DELIVERIES]
        release(self, again)
        real_delete(self, [d for d in deliveries if d not in again])

    monkeypatch.setattr(consumer, "delete", delete)
    return deleted


def deliver_every_record_thrice(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every stream batch is delivered again twice after it succeeded."""
    real: Callable[..., hype_handler.BatchResult] = hype_handler.index_batch
    records: list[int] = []

    def thrice(event: dict[str, Any], context: Any = None) -> hype_handler.BatchResult:
        records.append(len(event["Records"]))
        for _ in range(DELIVERIES - 1):
            assert real(event, context).errors == {}
        return real(event, context)

    monkeypatch.setattr(hype_handler, "index_batch", thrice)
    return records


def test_every_message_and_stream_record_three_times_equals_a_clean_run(
    local: Local, monkeypatch: pytest.MonkeyPatch, expected: FinalState
) -> None:
    # Given a queue that delivers every message three times, and a stream that delivers every
    # record three times
    deleted = lose_the_first_deletes(monkeypatch)
    records = deliver_every_record_thrice(monkeypatch)
    # When the conversation is ingested and drained
    state = ingest(local)
    # Then every survivor really went through the pipeline three times, every record was
    # indexed three times
    assert deleted and set(deleted.values()) == {DELIVERIES}
    assert sum(records) > 0
    # And nothing is stored, indexed, linked or recorded twice: the state is a clean run's
    assert_same_state(state, expected)
