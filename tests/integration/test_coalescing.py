"""Coalescing (`pipeline.extract.coalesce_window_s`) through the real pipeline, locally (SQLite
queue and stores): one user's turns sent in separate requests within the window share one
model call, every turn's trace completes, and a turn accepted after the window goes in the
next call. Model answers come through the real `anthropic` client over a mock transport
(tests/recorded/anthropic); time is moved with time-machine, which the queue, the ingest and
the runner all read. On AWS the dispatcher holds them (SQS through moto)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

import boto3
import httpx2
import pytest
import time_machine
from moto import mock_aws

import functions.dispatch.handler as dispatch_handler
import functions.extract.handler as extract_handler
from memwrite.adapters.anthropic.extractor import AnthropicExtractorClient
from memwrite.adapters.aws.sqs import SqsTurnConsumer, SqsTurnQueue
from memwrite.config.settings import ExtractConfig, PipelineConfig
from memwrite.models import QueuedTurn
from memwrite.ports import PipelineStart
from memwrite.wiring import DispatchDeps
from memwrite_local.runtime.runner import LocalContext
from tests.integration.conftest import Local, MakeLocal
from tests.queued import queued_turn
from tests.recorded_api import recorded

WINDOW_S = 10.0
CONFIG = {"pipeline": {"extract": {"coalesce_window_s": WINDOW_S}}}
LISBON = "Since last month Lisbon has been home, and cilantro ruins every dish for me."
PORTO = "My sister is visiting from Porto next week, so we might go hiking in Sintra."
LATER = "Honestly the new job has me thinking about learning Portuguese properly."


class ModelApi:
    """Answers every extraction with the recorded one (its candidates cite T1); keeps each
    request's body."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(json.loads(request.content))
        return httpx2.Response(200, json=recorded("extract_valid"))

    def texts(self) -> list[str]:
        """Each request's user message, in order."""
        return [str(body["messages"][-1]["content"]) for body in self.requests]


def install(api: ModelApi, monkeypatch: pytest.MonkeyPatch) -> None:
    model = AnthropicExtractorClient(
        ExtractConfig(),
        api_key="test-key",
        base_url="http://testserver",
        http_client=httpx2.Client(transport=httpx2.MockTransport(api.handle)),
        max_retries=0,
    )
    _, deps = extract_handler.handler.deps()
    monkeypatch.setattr(deps, "llm", model)


def send(local: Local, text: str) -> str:
    """One request of one user turn; its trace id."""
    body = {
        "session_id": "s-1",
        "user_id": "dana",
        "turns": [{"role": "user", "content": text, "timestamp": "2025-03-14T10:00:00Z"}],
    }
    answer = local.post_turns(body)
    assert answer.status == 202
    return str(answer.body["trace_id"])


def status(local: Local, trace_id: str) -> str:
    return str(local.get_trace(trace_id).body["status"])


def test_turns_of_separate_requests_within_the_window_share_one_model_call(
    make_local: MakeLocal, monkeypatch: pytest.MonkeyPatch
) -> None:
    with time_machine.travel(time.time(), tick=False) as clock:
        # Given a deployment that coalesces a user's turns for 10 s, and a model
        local = make_local(backend="sqlite", config=CONFIG)
        api = ModelApi()
        install(api, monkeypatch)
        # When the user's first turn is accepted and the queue drained at once
        first = send(local, LISBON)
        held = local.runner.drain()
        # Then it waits in the queue for the user's next turns: no call, nothing failed
        assert (held.coalesce_waits, held.completed_batches, held.failed) == (1, 0, {})
        assert api.requests == []
        assert status(local, first) == "in_progress"
        # When a second request of the same user comes 4 s later
        clock.shift(4)
        second = send(local, PORTO)
        assert local.runner.drain().completed_batches == 0  # its group is still held
        # And the window closes (a second later: the queue's time is a float sum)
        clock.shift(WINDOW_S - 4 + 1)
        done = local.runner.drain()
        # Then one model call read both turns, and both traces completed
        assert done.completed_batches == 1 and done.failed == {}
        assert len(api.requests) == 1
        (prompt,) = api.texts()
        assert "Lisbon" in prompt and "Porto" in prompt
        assert [status(local, first), status(local, second)] == ["complete", "complete"]
        # When a turn comes after the window closed, it waits a window of its own
        clock.shift(1)
        third = send(local, LATER)
        assert local.runner.drain().coalesce_waits == 1
        clock.shift(WINDOW_S + 1)
        assert local.runner.drain().completed_batches == 1
        # Then it went in a call of its own, the earlier turns only as context
        assert len(api.requests) == 2
        assert "Portuguese" in api.texts()[1] and "Portuguese" not in api.texts()[0]
        assert status(local, third) == "complete"


def test_the_window_must_leave_the_model_budget_time() -> None:
    # A batch held past model.max_wait_s would be deferred the moment it is released.
    with pytest.raises(ValueError, match=r"extract\.coalesce_window_s \(30\) must be below"):
        PipelineConfig.model_validate(
            {"extract": {"coalesce_window_s": 30}, "model": {"max_wait_s": 30}}
        )
    assert PipelineConfig.model_validate({"model": {"max_wait_s": 0}}).model.max_wait_s == 0


def test_the_dispatcher_hides_a_users_young_turns_and_starts_the_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = time.time()
    with mock_aws():
        # Given a FIFO turn queue holding two turns dana sent just now and one erin sent 20 s
        # ago, received as the event source receives them (visible again at once unless hidden)
        sqs = boto3.client("sqs", region_name="us-east-1")
        queue_url, dead_url = (
            sqs.create_queue(QueueName=f"{name}.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
            for name in ("turns", "turns-dlq")
        )
        turns = [
            accepted(queued_turn(LISBON, "a1"), now),
            accepted(queued_turn(PORTO, "a2"), now),
            accepted(queued_turn(LATER, "b1").model_copy(update={"user_id": "erin"}), now - 20),
        ]
        SqsTurnQueue(sqs, queue_url).enqueue(turns)
        messages = sqs.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=10,
            VisibilityTimeout=0,
            MessageSystemAttributeNames=["ApproximateReceiveCount"],
        )["Messages"]
        assert len(messages) == 3
        event = {"Records": [lambda_record(message) for message in messages]}
        pipeline = StartedPipeline()
        deps = DispatchDeps(pipeline, WINDOW_S, SqsTurnConsumer(sqs, queue_url, dead_url))
        monkeypatch.setattr(dispatch_handler, "deps", lambda: deps)
        # When the dispatcher handles the batch with a 10 s window
        answer = dispatch_handler.lambda_handler(event, LocalContext())
        # Then dana's turns go back to the queue (failures SQS keeps), and only erin's start
        by_turn = {QueuedTurn.model_validate_json(m["Body"]).turn_id: m for m in messages}
        failed = {item["itemIdentifier"] for item in answer["batchItemFailures"]}
        assert failed == {by_turn["a1"]["MessageId"], by_turn["a2"]["MessageId"]}
        assert pipeline.started == [["b1"]]
        # And they are hidden for the rest of the window, while erin's is not
        again = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10)["Messages"]
        assert [QueuedTurn.model_validate_json(m["Body"]).user_id for m in again] == ["erin"]


def accepted(turn: QueuedTurn, at: float) -> QueuedTurn:
    return turn.model_copy(update={"accepted_at": datetime.fromtimestamp(at, UTC)})


def lambda_record(message: dict[str, Any]) -> dict[str, Any]:
    """An SQS message as Lambda's event source hands it to the function."""
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": {"ApproximateReceiveCount": message["Attributes"]["ApproximateReceiveCount"]},
        "eventSource": "aws:sqs",
    }


class StartedPipeline:
    """The state machine: records the turns of each execution started."""

    def __init__(self) -> None:
        self.started: list[list[str]] = []

    def start(self, name: str, payload: str) -> PipelineStart:
        batches = json.loads(payload)["batches"]
        self.started.append([t["turn_id"] for b in batches for t in b["turns"]])
        return PipelineStart(started=True)
