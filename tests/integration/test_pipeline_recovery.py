"""A batch whose stage keeps failing: redelivered, then dead-lettered with its error, never
dropped. (A stage that fails once, then recovers on redelivery, is in
`tests/reliability/test_crash_recovery.py`, for every stage.)
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import pytest

from memwrite.wiring import build_queue_consumer
from tests.integration.conftest import Local, MakeLocal

CONVERSATION = json.loads(
    (Path(__file__).resolve().parents[2] / "events/conversations/moving.json").read_text()
)


@pytest.fixture(params=["moto", "sqlite"])
def local(make_local: MakeLocal, request: pytest.FixtureRequest) -> Local:
    return make_local(backend=request.param)


def test_a_batch_that_keeps_failing_is_dead_lettered_not_dropped(
    local: Local, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a persist stage that always fails
    module = importlib.import_module("functions.persist.handler")

    def broken(event: dict[str, Any], context: Any) -> dict[str, Any]:
        raise RuntimeError("index down")

    monkeypatch.setattr(module, "lambda_handler", broken)
    # When drained / Then every turn of the batch is reported failed after the redeliveries
    response = local.post_turns(CONVERSATION)
    report = local.runner.drain()
    surviving = {
        s["item_id"]
        for s in local.get_trace(response.body["trace_id"]).body["spans"]
        if s["stage"] == "extract" and s["kind"] == "turn"
    }
    assert set(report.failed) == surviving
    assert all("index down" in error for error in report.failed.values())
    # And they wait in the dead letters with their error, out of the queue
    consumer = build_queue_consumer()
    dead = consumer.dead_letters(10)
    assert {letter.turn.turn_id for letter in dead} == surviving
    assert all("index down" in letter.error for letter in dead)
    assert consumer.receive(10, 0) == []
