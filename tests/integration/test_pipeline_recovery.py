"""Crash between any two stages, then the queue redelivers: no duplicate, no loss.

The real handlers run in the local runner, on moto (DynamoDB + SQS) and on SQLite; one stage is
made to fail once, either before it does anything or after it has done all its writes (a crash
before the queue message is deleted). Redelivery must give exactly the store a clean run gives.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memwrite.stages import STAGES, StagePlacement
from memwrite.wiring import build_queue_consumer
from tests.integration.conftest import Local, MakeLocal

CONVERSATION = json.loads(
    (Path(__file__).resolve().parents[2] / "events/conversations/moving.json").read_text()
)
PIPELINE = [s.function_dir for s in STAGES if s.placement is StagePlacement.PIPELINE]
Stored = list[tuple[str, str | None, str | None, str, bool, int]]


def stored_memories(local: Local) -> Stored:
    return sorted(
        (
            m.memory_id,
            m.attribute,
            m.value,
            m.tier.value,
            m.superseded_by is None,
            m.corroboration,
        )
        for m in local.memories(CONVERSATION["user_id"])
    )


def crash_once(module: Any, monkeypatch: pytest.MonkeyPatch, *, after: bool) -> list[int]:
    real: Callable[..., dict[str, Any]] = module.lambda_handler
    calls: list[int] = []

    def flaky(event: dict[str, Any], context: Any) -> dict[str, Any]:
        calls.append(1)
        if len(calls) == 1 and not after:
            raise RuntimeError("crash before the stage ran")
        result = real(event, context)
        if len(calls) == 1:
            raise RuntimeError("crash after the stage wrote, before the message was deleted")
        return result

    monkeypatch.setattr(module, "lambda_handler", flaky)
    return calls


@pytest.fixture(scope="module")
def clean_run() -> Stored:
    from memwrite_local.aws import LocalAws
    from memwrite_local.runner import LocalRunner

    with LocalAws() as aws:
        runner = LocalRunner()
        assert runner.call("POST", "/v1/turns", CONVERSATION).status == 202
        assert runner.drain().failed == {}
        return stored_memories(Local(backend=aws, runner=runner))


@pytest.fixture(params=["moto", "sqlite"])
def local(make_local: MakeLocal, request: pytest.FixtureRequest) -> Local:
    return make_local(backend=request.param)


@pytest.mark.parametrize("after", [False, True], ids=["before", "after"])
@pytest.mark.parametrize("stage", PIPELINE)
def test_a_crash_then_redelivery_equals_a_clean_run(
    stage: str,
    after: bool,
    local: Local,
    monkeypatch: pytest.MonkeyPatch,
    clean_run: Stored,
) -> None:
    # Given one stage that fails once, before or after doing its work, on either backend
    module = importlib.import_module(f"functions.{stage}.handler")
    calls = crash_once(module, monkeypatch, after=after)
    # When the conversation is ingested and the queue drained (SQS redelivers the failure)
    assert local.post_turns(CONVERSATION).status == 202
    report = local.runner.drain()
    # Then the stage did fail once, nothing is reported lost, and the store is a clean run's
    assert len(calls) >= 2
    assert report.failed == {}
    assert stored_memories(local) == clean_run


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
