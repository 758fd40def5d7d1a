"""The dispatcher's planning: an SQS batch -> executions of per-session extract inputs."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from memwrite.execution.dispatch import coalesce_delay, dispatch, plan_executions
from memwrite.models import QueuedTurn
from memwrite.ports import PipelineStart
from tests.queued import queued_turn


def queued(session: str, turn_id: str, text: str = "I live in Berlin.") -> QueuedTurn:
    return queued_turn(text, turn_id, session)


class RecordingPipeline:
    def __init__(self, failing: set[str]) -> None:
        self.failing = failing
        self.payloads: list[dict[str, object]] = []

    def start(self, name: str, payload: str) -> PipelineStart:
        self.payloads.append(json.loads(payload))
        return PipelineStart(started=name not in self.failing)


def test_one_execution_holds_one_extract_input_per_session() -> None:
    # Given an SQS batch with turns of two sessions, interleaved
    messages = [("m1", queued("s1", "a")), ("m2", queued("s2", "b")), ("m3", queued("s1", "c"))]
    # When it is planned
    (execution,) = plan_executions(messages)
    # Then one execution carries one batch per session, turns in arrival order
    assert [[t.turn_id for t in b.turns] for b in execution.batches] == [["a", "c"], ["b"]]
    assert set(execution.message_ids) == {"m1", "m2", "m3"}


def test_batches_over_the_size_budget_are_split_across_executions() -> None:
    # Given turns whose session batch exceeds the budget
    messages = [(f"m{i}", queued("s1", f"t{i}", "x" * 400)) for i in range(6)]
    # When planned with a budget of about two turns
    executions = plan_executions(messages, max_bytes=1_200)
    # Then every turn is in exactly one execution, in order, each under the budget
    assert len(executions) > 1
    assert [m for e in executions for m in e.message_ids] == [f"m{i}" for i in range(6)]
    assert all(len(e.payload().encode()) <= 1_200 + 32 for e in executions)


def test_messages_of_an_execution_that_did_not_start_are_handed_back() -> None:
    # Given a batch of two sessions (one execution)
    messages = [("m1", queued("s1", "a")), ("m2", queued("s2", "b"))]
    (execution,) = plan_executions(messages)
    # When the execution starts, nothing is handed back
    assert dispatch(messages, RecordingPipeline(failing=set())) == []
    # When it cannot start, every message of it goes back to the queue for a redelivery
    pipeline = RecordingPipeline(failing={execution.name})
    assert dispatch(messages, pipeline) == ["m1", "m2"]
    assert pipeline.payloads == [json.loads(execution.payload())]


T0 = 1_800_000_000.0


def accepted(turn_id: str, at: float) -> QueuedTurn:
    turn = queued("s1", turn_id)
    return turn.model_copy(update={"accepted_at": datetime.fromtimestamp(at, UTC)})


@pytest.mark.parametrize(
    ("turns", "now", "delay"),
    [
        # Held until the window closes after its earliest turn, whatever came since
        ([accepted("a", T0), accepted("b", T0 + 4)], T0 + 5, 5.0),
        # Once the window has passed it goes now
        ([accepted("a", T0)], T0 + 10, 0.0),
        # A batch that fills a receive cannot gather more: it goes now
        ([accepted(f"t{i}", T0) for i in range(10)], T0, 0.0),
        # Without an acceptance time (a redelivery from before coalescing) it goes now
        ([queued("s1", "a")], T0, 0.0),
    ],
)
def test_a_batch_waits_for_its_users_next_turns_until_the_window_closes(
    turns: list[QueuedTurn], now: float, delay: float
) -> None:
    assert coalesce_delay(turns, 10.0, now, room=10) == delay


def test_no_window_holds_nothing() -> None:
    assert coalesce_delay([accepted("a", T0)], 0.0, T0, room=10) == 0.0
