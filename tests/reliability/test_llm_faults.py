"""The model API misbehaving under the whole pipeline: 429, 500, a timeout, malformed output.

The real `anthropic` client runs over a mock HTTP transport (recorded replies, see
`tests/recorded_api.py`), installed as the extract stage's model. A fault that passes is
retried (by the SDK, or by the extractor for malformed output) to exactly a clean run's state;
a fault that lasts fails the turn visibly (error span, dead letter) and writes nothing. How
the client maps each fault to an error is unit-tested in `tests/unit/test_llm_extractor.py`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx2
import pytest

import functions.extract.handler as extract_handler
from memwrite.adapters.anthropic.extractor import AnthropicExtractorClient
from memwrite.config.settings import ExtractConfig
from memwrite.wiring import build_queue_consumer
from memwrite_local.runtime.runner import MAX_RECEIVES
from tests.integration.conftest import Local, MakeLocal
from tests.recorded_api import haiku_cost, recorded
from tests.reliability.final_state import FinalState, assert_same_state, final_state
from tests.reliability.runs import IDEMPOTENCY, drain, ingest, post_conversation

SDK_RETRIES = 1
# Beyond the rule fast-path: extracting it takes the model (recorded: Lisbon, cilantro).
TURN = "Since last month Lisbon has been home, and cilantro ruins every dish for me."
BODY = {
    "session_id": "s-llm",
    "user_id": "dana",
    "turns": [
        {
            "role": "user",
            "content": TURN,
            "timestamp": "2025-03-14T10:00:00Z",
        }
    ],
}


@dataclass(frozen=True)
class Fault:
    recorded: str | None  # the reply's body; None: no reply at all (a read timeout)
    status: int = 200
    error: str = "LlmUnavailable"  # what the extract stage reports once retries are spent

    @property
    def billed(self) -> bool:
        """An answer, even a malformed one, is paid for (a refusal or a timeout is not)."""
        return self.status == 200 and self.recorded is not None


FAULTS = {
    "429": Fault("error_rate_limited", 429),
    "500": Fault("error_api", 500),
    "timeout": Fault(None),
    # A candidate naming no turn of the batch (retried once by the extractor, then permanent).
    "malformed": Fault("extract_unknown_ref", error="ExtractionFailed"),
}


class FlakyMessagesApi:
    """Answers the first `failures` requests with `fault`, the others with a valid extraction."""

    def __init__(self, fault: Fault | None = None, failures: int = 0) -> None:
        self._fault = fault
        self._failures = failures
        self.requests = 0

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        self.requests += 1
        fault = self._fault
        if fault is None or self.requests > self._failures:
            return httpx2.Response(200, json=recorded("extract_valid"))
        if fault.recorded is None:
            raise httpx2.ReadTimeout("no answer within the timeout", request=request)
        # The API's own hint, honoured by the SDK: retry after 1 ms (keeps the suite fast).
        return httpx2.Response(
            fault.status, headers={"retry-after-ms": "1"}, json=recorded(fault.recorded)
        )


def install(api: FlakyMessagesApi, monkeypatch: pytest.MonkeyPatch) -> None:
    """`api` as the extract stage's model, through the real client with its own retries."""
    client = AnthropicExtractorClient(
        ExtractConfig(),
        api_key="test-key",
        base_url="http://testserver",
        http_client=httpx2.Client(transport=httpx2.MockTransport(api.handle)),
        max_retries=SDK_RETRIES,
    )
    _, deps = extract_handler.handler.deps()
    monkeypatch.setattr(deps, "llm", client)


def answered_at_once(local: Local, monkeypatch: pytest.MonkeyPatch) -> FinalState:
    install(FlakyMessagesApi(), monkeypatch)
    return ingest(local, BODY)


@pytest.fixture
def expected(clean_state: Callable[..., FinalState]) -> FinalState:
    return clean_state("sqlite", answered_at_once)


@pytest.mark.parametrize("fault", FAULTS.values(), ids=FAULTS.keys())
def test_a_passing_fault_is_retried_to_a_clean_runs_state(
    fault: Fault, local: Local, monkeypatch: pytest.MonkeyPatch, expected: FinalState
) -> None:
    # Given a model API that fails once, then answers
    api = FlakyMessagesApi(fault, failures=1)
    install(api, monkeypatch)
    # When the turn is ingested and drained
    state = ingest(local, BODY)
    # Then the failed call was retried within the delivery, and the state is a clean run's
    assert api.requests == 2
    assert_same_state(without_usage(state), without_usage(expected))
    assert {m.value for m in local.memories("dana")} == {"Lisbon", "cilantro"}
    # But for the trace's cost, which counts a paid failure too
    assert model_calls(state) == [1 + fault.billed]


def spans_of(state: FinalState) -> list[dict[str, Any]]:
    return [json.loads(row) for row in state["spans"]]


def model_calls(state: FinalState) -> list[int]:
    return [span["doc"]["llm"]["calls"] for span in spans_of(state) if span["doc"]["llm"]]


def without_usage(state: FinalState) -> FinalState:
    """`state` with no span's model usage (calls, tokens, cost)."""
    spans = [{**span, "doc": {**span["doc"], "llm": None}} for span in spans_of(state)]
    return {**state, "spans": sorted(json.dumps(span, sort_keys=True) for span in spans)}


def trace_of(local: Local) -> dict[str, Any]:
    response = local.post_turns(BODY, headers=IDEMPOTENCY)  # the retry names the same trace
    trace = local.get_trace(response.body["trace_id"])
    assert trace.status == 200
    body: dict[str, Any] = trace.body
    return body


@pytest.mark.parametrize("fault", FAULTS.values(), ids=FAULTS.keys())
def test_a_lasting_fault_keeps_the_turn_as_a_pending_episode_visibly(
    fault: Fault, local: Local, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a model API that never answers well
    api = FlakyMessagesApi(fault, failures=10_000)
    install(api, monkeypatch)
    # When the turn is ingested and drained
    post_conversation(local, BODY)
    report = drain(local)
    # Then one delivery spent the SDK's (or the extractor's) retries, and the turn is not
    # failed but kept: nothing in the dead letters, nothing left in the queue
    calls_per_delivery = 2 if fault.error == "ExtractionFailed" else 1 + SDK_RETRIES
    assert api.requests == calls_per_delivery
    assert report.failed == {}
    consumer = build_queue_consumer()
    assert consumer.dead_letters(10) == []
    assert consumer.receive(10, 0) == []
    # And its trace says so: an error span at extract with a typed reason, and the episode
    trace = trace_of(local)
    errors = [span for span in trace["spans"] if span["result"] == "error"]
    (turn_id,) = trace["turn_ids"]
    assert [(s["stage"], s["item_id"], s["reason"]) for s in errors] == [
        ("extract", turn_id, {"type": "DeferredModelFailed", "error": fault.error})
    ]
    assert [(e["turn_id"], e["status"]) for e in trace["episodes"]] == [(turn_id, "pending")]
    # And its cost is every answer paid for, each once (a refusal and a timeout are not billed)
    billed = api.requests if fault.billed else 0
    assert (trace["llm_calls"], trace["cost_usd"]) == (
        billed,
        pytest.approx(billed * haiku_cost("extract_unknown_ref")),
    )
    # And no memory was half-written: the only document indexed is the episode's
    state = final_state(local)
    for table in ("memories", "entity_facts", "trace_memories"):
        assert state[table] == [], table
    assert [json.loads(doc)["memory_id"] for doc in state["index.docs"]] == [f"episode:{turn_id}"]


@pytest.mark.parametrize("fault", FAULTS.values(), ids=FAULTS.keys())
def test_with_episodes_off_a_lasting_fault_dead_letters_the_turn_and_writes_nothing(
    fault: Fault, make_local: MakeLocal, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a model API that never answers well, and episodes switched off
    local = make_local(backend="sqlite", config={"pipeline": {"episodes": {"keep": "off"}}})
    api = FlakyMessagesApi(fault, failures=10_000)
    install(api, monkeypatch)
    # When the turn is ingested and drained
    post_conversation(local, BODY)
    report = drain(local)
    # Then every delivery retried the call, and after the last one the turn is reported failed
    calls_per_delivery = 2 if fault.error == "ExtractionFailed" else 1 + SDK_RETRIES
    assert api.requests == MAX_RECEIVES * calls_per_delivery
    (turn_id,) = report.failed
    assert report.failed[turn_id].startswith(fault.error)
    # And it waits in the dead letters with that error, out of the queue
    consumer = build_queue_consumer()
    assert [(d.turn.turn_id, d.error[: len(fault.error)]) for d in consumer.dead_letters(10)] == [
        (turn_id, fault.error)
    ]
    assert consumer.receive(10, 0) == []
    # And its trace says so: an error span at extract, with the error's name
    trace = trace_of(local)
    errors = [span for span in trace["spans"] if span["result"] == "error"]
    assert [(s["stage"], s["item_id"], s["reason"]) for s in errors] == [
        ("extract", turn_id, {"type": "ExtractionError", "error": fault.error})
    ]
    # And nothing was half-written: no memory, fact, outbox row or index document
    state = final_state(local)
    for table in ("memories", "entity_facts", "outbox", "index.docs", "trace_memories"):
        assert state[table] == [], table
