"""A drain's report stays the same size however many batches the drain runs: `memwrite serve`'s
worker stays in one drain while a steady load keeps refilling the queue, so anything kept per
batch grows the server's memory with every request."""

from __future__ import annotations

import pickle

from tests.integration.conftest import Local, MakeLocal

# Kept by the pre-filter, no memory in it: each request is a batch with nothing to index.
TURN = "We spent the whole afternoon at the lake with the kids and it was lovely."


def _drained_report_size(local: Local, users: range) -> tuple[int, int]:
    for user in users:
        body = {
            "user_id": f"user-{user}",
            "session_id": f"session-{user}",
            "turns": [{"role": "user", "content": TURN}],
        }
        assert local.post_turns(body).status == 202
    report = local.runner.drain()
    assert report.failed == {}
    assert report.indexed == []
    return report.completed_batches, len(pickle.dumps(report))


def test_a_drain_counts_its_batches_and_keeps_no_output_of_them(make_local: MakeLocal) -> None:
    # Given one request queued, drained, then 25 requests of other users queued
    local = make_local(backend="sqlite")
    one_batch, one_batch_size = _drained_report_size(local, range(1))
    # When those are drained
    many_batches, many_batches_size = _drained_report_size(local, range(1, 26))
    # Then every batch went through the stages, and the report did not grow with them
    assert (one_batch, many_batches) == (1, 25)
    assert many_batches_size == one_batch_size
