"""A crash at every stage boundary, then the retry the platform makes: the final state is a
clean run's, on SQLite, and on DynamoDB (moto) for the transactional commit.

Every stage of `memwrite.stages.STAGES` is covered, a new one automatically: its entry point
(the one API Gateway, the state machine or the stream calls) fails once, either before it does
anything or after it has done all its writes. The retry is the platform's: the client re-sends
its request (same Idempotency-Key), SQS redelivers the batch, the stream delivers the records
again. A batch that keeps failing is covered in `tests/integration/test_pipeline_recovery.py`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import pytest

from memwrite.stages import STAGES, StageDef, StagePlacement, stage_named
from tests.integration.conftest import Local, MakeLocal
from tests.reliability.final_state import FinalState, assert_same_state
from tests.reliability.runs import InjectedCrash, ingest

# What the platform calls for each placement: API Gateway and Step Functions the Lambda
# handler, the stream the hype function's batch (the runner's event source).
ENTRY_POINT = {
    StagePlacement.INGEST: "lambda_handler",
    StagePlacement.PIPELINE: "lambda_handler",
    StagePlacement.STREAM: "index_batch",
}


def crash_once(stage: StageDef, monkeypatch: pytest.MonkeyPatch, *, after: bool) -> list[int]:
    module = importlib.import_module(f"functions.{stage.function_dir}.handler")
    name = ENTRY_POINT[stage.placement]
    real: Callable[..., Any] = getattr(module, name)
    calls: list[int] = []

    def flaky(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1 and not after:
            raise InjectedCrash(f"{stage.name} crashed before it ran")
        result = real(*args, **kwargs)
        if len(calls) == 1:
            raise InjectedCrash(f"{stage.name} crashed after its writes, before it answered")
        return result

    monkeypatch.setattr(module, name, flaky)
    return calls


# SQLite for every stage; DynamoDB too for persist, whose commit is one TransactWriteItems
# there (a crash after it is the redelivery that finds every item already applied).
CASES = [
    *[pytest.param(stage, "sqlite", id=f"sqlite-{stage.name}") for stage in STAGES],
    pytest.param(stage_named("persist"), "moto", id="moto-persist"),
]


@pytest.mark.parametrize("after", [False, True], ids=["before", "after"])
@pytest.mark.parametrize(("stage", "backend"), CASES)
def test_a_crash_then_the_retry_equals_a_clean_run(
    stage: StageDef,
    after: bool,
    backend: str,
    *,
    make_local: MakeLocal,
    monkeypatch: pytest.MonkeyPatch,
    clean_state: Callable[..., FinalState],
) -> None:
    # Given one stage that fails once, before or after doing its work
    expected = clean_state(backend)  # (moto is one per process: the clean run goes first)
    local: Local = make_local(backend=backend)
    calls = crash_once(stage, monkeypatch, after=after)
    # When the conversation is ingested and drained, the platform retrying the failure
    state = ingest(local)
    # Then the stage did crash (a crash before its work is repaired only by the retry), and
    # the state is a clean run's
    assert len(calls) >= 1 + (not after)
    assert_same_state(state, expected)
