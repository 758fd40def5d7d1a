"""Crash between any two stages, then SQS redelivers: no duplicate, no loss.

The real handlers run in the local runner; one stage is made to fail once, either before it
does anything or after it has done all its writes (a crash before the queue message is
deleted). Redelivery must give exactly the store a clean run gives.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import pytest

from memwrite.stages import STAGES, StagePlacement
from tests.integration.conftest import Local

CONVERSATION = json.loads(
    (Path(__file__).resolve().parents[2] / "events/conversations/moving.json").read_text()
)
PIPELINE = [s.function_dir for s in STAGES if s.placement is StagePlacement.PIPELINE]


def stored_memories(local: Local) -> list[tuple[str, str, str, str, bool, int]]:
    env = local.aws.handler_env()
    items = boto3.client("dynamodb").scan(TableName=env["MEMORIES_TABLE"])["Items"]
    docs = [json.loads(item["doc"]["S"]) for item in items]
    return sorted(
        (
            d["memory_id"],
            d["attribute"],
            d["value"],
            d["tier"],
            d["superseded_by"] is None,
            d["corroboration"],
        )
        for d in docs
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
def clean_run() -> list[tuple[str, str, str, str, bool, int]]:
    from memwrite_local.aws import LocalAws
    from memwrite_local.runner import LocalRunner

    with LocalAws() as aws:
        runner = LocalRunner(aws)
        assert runner.call("POST", "/v1/turns", CONVERSATION).status == 202
        assert runner.drain().failed == {}
        return stored_memories(Local(aws=aws, runner=runner))


@pytest.mark.parametrize("after", [False, True], ids=["before", "after"])
@pytest.mark.parametrize("stage", PIPELINE)
def test_a_crash_then_redelivery_equals_a_clean_run(
    stage: str,
    after: bool,
    local: Local,
    monkeypatch: pytest.MonkeyPatch,
    clean_run: list[tuple[str, str, str, str, bool, int]],
) -> None:
    # Given one stage that fails once, before or after doing its work
    module = importlib.import_module(f"functions.{stage}.handler")
    calls = crash_once(module, monkeypatch, after=after)
    # When the conversation is ingested and the queue drained (SQS redelivers the failure)
    assert local.post_turns(CONVERSATION).status == 202
    report = local.runner.drain()
    # Then the stage did fail once, nothing is reported lost, and the store is a clean run's
    assert len(calls) >= 2
    assert report.failed == {}
    assert stored_memories(local) == clean_run


def test_a_batch_that_keeps_failing_is_reported_not_dropped(
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
