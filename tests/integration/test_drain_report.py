"""A drain's report stays the same size however many batches the drain runs: `memwrite serve`'s
worker stays in one drain while a steady load keeps refilling the queue, so anything kept per
batch grows the server's memory with every request."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from memwrite_local.runtime.runner import RECEIVE_BATCH
from tests.integration.conftest import Local, MakeLocal

# Kept by the pre-filter, no memory in it: each request is a batch with nothing to index
# (episodes off: with them on, each filler would be indexed as an episode).
NO_EPISODES = {"pipeline": {"episodes": {"keep": "off"}}}
TURN = "We spent the whole afternoon at the lake with the kids and it was lovely."


def _post_fillers(local: Local, users: range) -> None:
    for user in users:
        body = {
            "user_id": f"user-{user}",
            "session_id": f"session-{user}",
            "turns": [{"role": "user", "content": TURN}],
        }
        assert local.post_turns(body).status == 202


def _drained_report_size(local: Local, users: range) -> tuple[int, int]:
    _post_fillers(local, users)
    report = local.runner.drain()
    assert report.failed == {}
    assert report.indexed == []
    return report.completed_batches, len(pickle.dumps(report))


def test_a_drain_counts_its_batches_and_keeps_no_output_of_them(make_local: MakeLocal) -> None:
    # Given one request queued, drained, then 25 requests of other users queued
    local = make_local(backend="sqlite", config=NO_EPISODES)
    one_batch, one_batch_size = _drained_report_size(local, range(1))
    # When those are drained
    many_batches, many_batches_size = _drained_report_size(local, range(1, 26))
    # Then every batch went through the stages, and the report did not grow with them
    assert (one_batch, many_batches) == (1, 25)
    assert many_batches_size == one_batch_size


def test_what_a_receive_stored_is_searchable_before_the_next_receive(
    make_local: MakeLocal, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a fact, then more requests of other users than one receive takes
    local = make_local(backend="sqlite")
    fact = {
        "user_id": "ana",
        "session_id": "s",
        "turns": [{"role": "user", "content": "I live in Berlin."}],
    }
    assert local.post_turns(fact).status == 202
    _post_fillers(local, range(RECEIVE_BATCH))
    # When the queue is drained, noting at each receive whether the fact can be found
    found_at_receive: list[int] = []
    consumer = local.runner._consumer
    receive = consumer.receive

    def searching_receive(*args: Any, **kwargs: Any) -> Any:
        query = {"user_id": "ana", "query": "where does ana live Berlin", "k": 5}
        results = local.runner.call("POST", "/v1/search", query).body["results"]
        found_at_receive.append(len(results))
        return receive(*args, **kwargs)

    monkeypatch.setattr(consumer, "receive", searching_receive)
    local.runner.drain()

    # Then the fact is searchable while the queue still holds the later requests (as the
    # stream feeds stage 7 on AWS), not only once the queue is empty
    assert found_at_receive[0] == 0
    assert found_at_receive[1] >= 1
    assert len(found_at_receive) >= 3  # the fillers took a second receive


def test_a_stopped_drain_finishes_its_batch_and_leaves_the_rest_queued(
    make_local: MakeLocal,
) -> None:
    # Given more sessions queued than one receive takes (one batch per session)
    local = make_local(backend="sqlite")
    _post_fillers(local, range(RECEIVE_BATCH + 5))
    # When a drain is asked to stop once its first batch went through (it asks before the
    # receive, before each batch, and before each outbox batch)
    answers = iter([False, False])

    def stop() -> bool:
        return next(answers, True)

    stopped = local.runner.drain(stop=stop)
    # Then it ran that batch only, and put the rest of its receive back: the next drain takes
    # every remaining batch at once (nothing waits for a visibility timeout)
    assert stopped.completed_batches == 1
    assert local.runner.drain().completed_batches == RECEIVE_BATCH + 4
