"""DynamoDB throttling, as moto answers when patched to: the first call of a read, a write and
a commit is refused with `ProvisionedThroughputExceededException` (botocore's standard retry
mode retries it), and the first transaction that gets through is cancelled with a
`ThrottlingError` reason (not retried by botocore: persist fails the batch as
`StoreUnavailable`, the queue redelivers). The final state is a clean run's. (SQS refusing
messages is `tests/integration/test_enqueue_failure.py`.)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from moto.dynamodb.exceptions import (
    ERROR_TYPE_PREFIX,
    DynamodbException,
    TransactionCanceledException,
)
from moto.dynamodb.responses import DynamoHandler

from tests.integration.conftest import MakeLocal
from tests.reliability.final_state import FinalState, assert_same_state
from tests.reliability.runs import ingest

# Reads (query), writes (batch_write_item: spans, the ledger) and the commit (transaction).
OPERATIONS = ("query", "batch_write_item", "transact_write_items")
THROTTLED = "The level of configured provisioned throughput for the table was exceeded."


def throttle(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Refuse each operation's first call; cancel the first transaction let through."""
    refused: Counter[str] = Counter()
    for operation in OPERATIONS:
        real: Callable[[DynamoHandler], Any] = getattr(DynamoHandler, operation)

        def throttled(
            self: DynamoHandler, operation: str = operation, real: Callable[..., Any] = real
        ) -> Any:
            refused[operation] += 1
            if refused[operation] == 1:
                raise DynamodbException(
                    ERROR_TYPE_PREFIX + "ProvisionedThroughputExceededException", THROTTLED
                )
            if operation == "transact_write_items" and refused[operation] == 2:
                others = [(None, None, None)] * (len(self.body["TransactItems"]) - 1)
                raise TransactionCanceledException([("ThrottlingError", THROTTLED, None), *others])
            return real(self)

        monkeypatch.setattr(DynamoHandler, operation, throttled)
    return refused


def test_throttled_calls_and_transactions_are_retried_to_a_clean_runs_state(
    make_local: MakeLocal,
    monkeypatch: pytest.MonkeyPatch,
    clean_state: Callable[..., FinalState],
) -> None:
    expected = clean_state("moto")  # moto is one per process: the clean run goes first
    # Given DynamoDB throttling a read, a write and a commit once, and cancelling a transaction
    local = make_local(backend="moto")
    refused = throttle(monkeypatch)
    # When the conversation is ingested and drained
    state = ingest(local)
    # Then the throttled calls were retried, the cancelled transaction too, and the state is a
    # clean run's
    assert all(refused[operation] > 1 for operation in OPERATIONS)
    assert refused["transact_write_items"] > 2
    assert_same_state(state, expected)
