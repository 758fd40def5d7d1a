"""The search index goes down while HyPE indexes, then comes back: every memory is indexed in
the end, once, and the outbox is drained; meanwhile nothing is lost and the trace says what is
missing. (A crash between indexing and marking the row done is in
`tests/integration/test_hype_stream.py`.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

import functions.hype.handler as hype_handler
from memwrite.errors import IndexUnavailable
from memwrite.index import IndexWrite, MemoryDoc
from memwrite_local.runtime.runner import MAX_RECEIVES
from tests.integration.conftest import Local
from tests.reliability.final_state import FinalState, assert_same_state, final_state
from tests.reliability.runs import CONVERSATION, IDEMPOTENCY, drain, post_conversation


class Outage:
    """The hype stage's index, failing as OpenSearch down does once `writes_left` documents
    were written (-1: never)."""

    def __init__(self, index: Any, writes_left: int) -> None:
        self._index = index
        self.writes_left = writes_left
        self.refused = 0

    def _write(self) -> None:
        if self.writes_left == 0:
            self.refused += 1
            raise IndexUnavailable("OpenSearch bulk failed: ConnectionError")
        self.writes_left -= 1

    def upsert(self, doc: MemoryDoc) -> None:
        self._write()
        self._index.upsert(doc)

    def delete(self, tenant: str, user_id: str, memory_id: str) -> None:
        self._write()
        self._index.delete(tenant, user_id, memory_id)

    def write(self, writes: Sequence[IndexWrite]) -> dict[int, str]:
        """Down: the request fails. Going down within it: the documents past the last one it
        took are refused one by one, as a `_bulk` reply reports them."""
        if self.writes_left < 0:
            return self._index.write(writes)
        if self.writes_left == 0:
            self._write()  # down: raises
        taken = min(self.writes_left, len(writes))
        self.writes_left -= taken
        refused = self._index.write(writes[:taken])
        rest = range(taken, len(writes))
        self.refused += len(rest)
        return refused | dict.fromkeys(rest, "es_rejected_execution_exception (status 429)")

    def __getattr__(self, name: str) -> Any:  # reads pass through
        return getattr(self._index, name)


# Down from the start; after one document (within a batch); later on.
@pytest.mark.parametrize("writes_before_the_outage", [0, 1, 5])
def test_an_index_outage_during_hype_converges_once_the_index_is_back(
    writes_before_the_outage: int,
    local: Local,
    monkeypatch: pytest.MonkeyPatch,
    expected: FinalState,
) -> None:
    # Given an index that goes down after some writes
    _, deps = hype_handler.deps()
    outage = Outage(deps.index, writes_before_the_outage)
    monkeypatch.setattr(deps, "index", outage)
    # When the conversation is ingested and drained during the outage
    post_conversation(local)
    during = drain(local)
    # Then the pipeline stored everything, and every row it could not index is reported
    # (the stream's on-failure destination) after its retries, and stays pending
    assert during.failed == {}
    assert during.index_failed
    assert outage.refused >= MAX_RECEIVES * len(during.index_failed)
    state = final_state(local)
    assert state["memories"] == expected["memories"]
    assert len(state["outbox"]) == len(expected["outbox"])
    pending = [row for row in state["outbox"] if '"done": 0' in row]
    assert len(pending) == len(during.index_failed)
    # And the trace shows which memories are not searchable yet, and why
    trace = local.get_trace(local.post_turns(CONVERSATION, headers=IDEMPOTENCY).body["trace_id"])
    assert trace.body["status"] == "failed"
    hype_errors = {
        (row_of(span["item_id"]), span["reason"]["error"])
        for span in trace.body["spans"]
        if span["stage"] == "hype" and span["reason"] and span["reason"]["type"] == "IndexingError"
    }
    assert hype_errors == {(row_of(key), "IndexUnavailable") for key in during.index_failed}

    # When the index is back and the outbox is drained again
    outage.writes_left = -1
    after = drain(local)
    # Then every memory is indexed exactly once, the trace's error spans are replaced: the
    # state is a clean run's
    assert after.index_failed == {}
    assert_same_state(final_state(local), expected)


def row_of(key: str) -> tuple[str, int]:
    """(memory id, rev) of an outbox row key or a hype span's item id (`memory_id#rev`)."""
    memory_id, rev = key.split("#")
    return memory_id, int(rev)
