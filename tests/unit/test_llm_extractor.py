"""LLM extraction end to end through the real anthropic client, over recorded HTTP responses.

`FakeMessagesApi` is an httpx2 mock transport (the SDK's own HTTP stack): it serves the JSON
bodies in tests/recorded/anthropic and keeps every request body the client sent.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest
from pydantic import ValidationError

from memwrite.adapters.anthropic.extractor import AnthropicExtractorClient
from memwrite.adapters.in_memory import InMemoryBudgetStore
from memwrite.budget import ModelBudget
from memwrite.claims.candidate import Candidate, MemoryType, Quality, memory_key
from memwrite.config.model_limits import ModelConfig
from memwrite.config.settings import ExtractConfig
from memwrite.costs.pricing import cost_usd, price_per_mtok
from memwrite.errors import (
    ConfigError,
    ExtractionFailed,
    LlmRequestRejected,
    LlmUnavailable,
    MalformedLlmOutput,
    PermanentError,
    TransientError,
    TruncatedLlmOutput,
)
from memwrite.extract.llm import (
    cap_by_wording,
    cap_hypotheticals,
    count_llm_calls,
    detail_windows,
    extract_with_llm,
    merge_candidates,
)
from memwrite.models import Role
from memwrite.prompts.extract import BatchTurn, ExtractPromptInput, SessionTurn
from tests.recorded_api import system_text

RECORDED = Path(__file__).parents[1] / "recorded" / "anthropic"
CONFIG = ExtractConfig()
HAIKU_IN, HAIKU_OUT = 1.00, 5.00  # USD per million tokens


def recorded(name: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads((RECORDED / f"{name}.json").read_text(encoding="utf-8"))
    return body


def usage_of(name: str) -> tuple[int, int]:
    usage = recorded(name)["usage"]
    return usage["input_tokens"], usage["output_tokens"]


def haiku_cost(*names: str) -> float:
    return sum(i * HAIKU_IN / 1e6 + o * HAIKU_OUT / 1e6 for i, o in map(usage_of, names))


@dataclass(frozen=True)
class Reply:
    name: str
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


class FakeMessagesApi:
    """Recorded replies in order for the full pass; one reply for every detail-pass request."""

    def __init__(self, *full: Reply, detail: Reply | None = None) -> None:
        self._full = deque(full)
        self._detail = detail
        self._lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []
        self.headers: list[httpx2.Headers] = []

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        body: dict[str, Any] = json.loads(request.content)
        with self._lock:
            self.requests.append(body)
            self.headers.append(request.headers)
            if "<detail_focus>" in system_text(body):
                assert self._detail is not None, "unexpected detail-pass request"
                reply = self._detail
            else:
                reply = self._full.popleft()
        return httpx2.Response(reply.status, headers=reply.headers, json=recorded(reply.name))

    @property
    def full_requests(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if "<detail_focus>" not in system_text(r)]

    @property
    def detail_requests(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if "<detail_focus>" in system_text(r)]


class JsonFailCounter:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> None:
        self.count += 1


def client_for(
    api: FakeMessagesApi, config: ExtractConfig = CONFIG, max_retries: int = 2
) -> AnthropicExtractorClient:
    return AnthropicExtractorClient(
        config,
        api_key="test-key",
        base_url="http://testserver",
        http_client=httpx2.Client(transport=httpx2.MockTransport(api.handle)),
        max_retries=max_retries,
    )


AT = datetime(2025, 3, 14, 10, 0, tzinfo=UTC)  # a Friday


def batch(*texts: str, session: tuple[SessionTurn, ...] = ()) -> ExtractPromptInput:
    """A batch of user turns "turn-1", "turn-2", ..., one minute apart from `AT`."""
    return ExtractPromptInput(
        turns=tuple(
            BatchTurn(
                turn_id=f"turn-{i}", role=Role.USER, text=text, timestamp=AT + timedelta(minutes=i)
            )
            for i, text in enumerate(texts, start=1)
        ),
        session_turns=session,
    )


def conversation(messages: int) -> tuple[SessionTurn, ...]:
    """`messages` earlier turns about picking a plan, 120 characters each."""
    lines = [
        "We need a project tool for Northwind; we have 8 engineers and a tight budget this year.",
        "Here are the options: Starter at $9/month with 3 seats, Team at $29/month with 10 seats.",
    ]
    return tuple(
        SessionTurn(
            role=Role.USER if i % 2 == 0 else Role.ASSISTANT,
            text=f"{lines[i % 2]} (message {i})".ljust(120, "."),
        )
        for i in range(messages)
    )


def section_lines(request: dict[str, Any], tag: str) -> list[str]:
    """The lines of one tagged section of a request's user message."""
    content: str = request["messages"][0]["content"]
    return content.split(f"<{tag}>\n", 1)[1].split(f"\n</{tag}>", 1)[0].splitlines()


def candidate(value: str, confidence: float, **changes: Any) -> Candidate:
    fields: dict[str, Any] = {
        "text": f"The user likes {value}.",
        "type": MemoryType.PREFERENCE,
        "topic": "food",
        "entity": "user",
        "attribute": "likes",
        "value": value,
        "predicate_is_stateful": False,
        "importance": 0.5,
        "confidence": confidence,
        "grounded": True,
        "quality": Quality(verdict="keep", reason="explicit statement"),
        "search_questions": ["What does the user like?", "Any favourites?", "Food tastes?"],
    }
    return Candidate(**(fields | changes))


LISBON_TURN = "I moved to Lisbon last month and I can't stand cilantro."


def test_valid_extraction_returns_candidates_with_turn_id_and_cost() -> None:
    # Given the API answers with two valid candidates, both from T1
    api = FakeMessagesApi(Reply("extract_valid"))
    fails = JsonFailCounter()
    # When a one-turn batch is extracted
    out = extract_with_llm(batch(LISBON_TURN), CONFIG, client_for(api), on_json_fail=fails)
    # Then both candidates come back, tied to the turn's id, with the call's usage and cost
    assert [(c.attribute, c.value) for c in out.candidates] == [
        ("lives_in", "Lisbon"),
        ("dislikes", "cilantro"),
    ]
    assert {c.source_turn_id for c in out.candidates} == {"turn-1"}
    assert len(out.calls) == 1
    assert out.calls[0].model == "claude-haiku-4-5-20251001"
    assert (out.input_tokens, out.output_tokens) == usage_of("extract_valid")
    assert out.cost_usd == pytest.approx(haiku_cost("extract_valid"))
    assert fails.count == 0


def test_request_carries_model_prompt_sections_and_output_schema() -> None:
    # Given a working API
    api = FakeMessagesApi(Reply("extract_valid"))
    # When a one-turn batch is extracted
    extract_with_llm(batch(LISBON_TURN), CONFIG, client_for(api), on_json_fail=JsonFailCounter())
    # Then the request names the configured model and carries the whole prompt
    (request,) = api.requests
    assert request["model"] == "claude-haiku-4-5"
    assert request["max_tokens"] > 0
    for tag in ("output_schema", "type_rules", "grounding_rules", "quality_rules", "examples"):
        assert f"<{tag}>" in system_text(request)
    (message,) = request["messages"]
    assert message["role"] == "user"
    # And the turn is shown by its ref with its own timestamp and weekday, never by its id
    assert (
        '{"ref": "T1", "role": "user", "timestamp": "2025-03-14T10:01:00Z", "weekday": "Friday", '
        f'"text": "{LISBON_TURN}"}}'
    ) in message["content"]
    assert "turn-1" not in message["content"]
    # And it asks for structured output with the Candidate schema (strict: no extra keys)
    output_format = request["output_config"]["format"]
    assert output_format["type"] == "json_schema"
    candidate_schema = output_format["schema"]["$defs"]["Candidate"]
    assert candidate_schema["additionalProperties"] is False
    assert {"text", "type", "confidence", "search_questions"} <= set(candidate_schema["required"])
    assert api.headers[0]["authorization"] == "Bearer test-key"


def test_a_three_turn_batch_is_one_call_and_each_candidate_names_its_own_turn() -> None:
    # Given three new turns days apart, and an answer that lists T3's claims before T1's
    inp = ExtractPromptInput(
        turns=(
            BatchTurn(
                turn_id="msg-a",
                role=Role.USER,
                text="I moved to Lisbon last month.",
                timestamp=datetime(2025, 3, 10, 9, 0),
            ),
            BatchTurn(
                turn_id="msg-b",
                role=Role.USER,
                text="Thanks, that helps.",
                timestamp=datetime(2025, 3, 12, 9, 0),
            ),
            BatchTurn(
                turn_id="msg-c",
                role=Role.USER,
                text="My sister Priya starts at Google tomorrow.",
                timestamp=datetime(2025, 3, 14, 9, 0),
            ),
        ),
        session_turns=conversation(2),
    )
    api = FakeMessagesApi(Reply("extract_batch_three_turns"))
    fails = JsonFailCounter()
    # When the batch is extracted
    out = extract_with_llm(inp, CONFIG, client_for(api), on_json_fail=fails)
    # Then one call read all three turns, each with its ref and its own date
    (request,) = api.requests
    content = request["messages"][0]["content"]
    for ref, stamp, weekday in (
        ("T1", "2025-03-10T09:00:00Z", "Monday"),
        ("T2", "2025-03-12T09:00:00Z", "Wednesday"),
        ("T3", "2025-03-14T09:00:00Z", "Friday"),
    ):
        line = f'{{"ref": "{ref}", "role": "user", "timestamp": "{stamp}", "weekday": "{weekday}"'
        assert line in content
    # And every candidate is attributed to the turn whose words are its evidence
    assert [(c.attribute, c.source_turn_id) for c in out.candidates] == [
        ("starts_job_at", "msg-c"),
        ("sister", "msg-c"),
        ("lives_in", "msg-a"),
    ]
    assert out.candidates[0].valid_at == datetime(2025, 3, 15, tzinfo=UTC)
    # And the small-talk turn yields nothing, without any failure
    assert all(c.source_turn_id != "msg-b" for c in out.candidates)
    assert fails.count == 0
    assert count_llm_calls(inp, CONFIG) == 1


def test_empty_answer_is_a_normal_result() -> None:
    # Given the model finds nothing worth remembering
    api = FakeMessagesApi(Reply("extract_empty"))
    fails = JsonFailCounter()
    # When the batch is extracted
    out = extract_with_llm(
        batch("Thanks, that helps a lot."), CONFIG, client_for(api), on_json_fail=fails
    )
    # Then there are no candidates, no failure and one paid call
    assert out.candidates == ()
    assert fails.count == 0
    assert len(api.requests) == 1
    assert out.cost_usd == pytest.approx(haiku_cost("extract_empty"))


def test_the_model_marks_an_explicit_correction_and_only_that_claim_carries_it() -> None:
    # Given a turn that corrects an earlier email and one that states a plain preference, and
    # a model that marks the first as a correction
    api = FakeMessagesApi(Reply("extract_correction"))
    inp = batch(
        "Correction to what I told you last week: my email is rui.costa@example.org.",
        "Also, hiking is my favourite weekend thing.",
    )
    # When the batch is extracted
    out = extract_with_llm(inp, CONFIG, client_for(api), on_json_fail=JsonFailCounter())
    # Then the structured output asks for the field, and the answer's flags come through
    (request,) = api.requests
    properties = request["output_config"]["format"]["schema"]["$defs"]["Candidate"]["properties"]
    assert properties["correction"]["type"] == "boolean"
    assert [(c.value, c.correction, c.source_turn_id) for c in out.candidates] == [
        ("rui.costa@example.org", True, "turn-1"),
        ("hiking", False, "turn-2"),
    ]


def test_merge_keeps_a_correction_found_by_either_pass_of_the_same_turn() -> None:
    # Given the rules read "Correction: ..." as a correction, and the model the same claim
    # more confidently without the cue; and another turn's claim without it
    rules = candidate("ramen", 0.8, correction=True, source_turn_id="turn-1")
    model = candidate("ramen", 0.95, source_turn_id="turn-1")
    elsewhere = candidate("sushi", 0.9, source_turn_id="turn-2")
    later = candidate("sushi", 0.6, correction=True, source_turn_id="turn-3")
    # When they are merged
    merged = merge_candidates([[rules, elsewhere], [model, later]])
    # Then the most confident wording stays, still a correction; another turn's cue does not
    # carry over
    assert merged == [model.model_copy(update={"correction": True}), elsewhere]


def test_a_truncated_answer_is_asked_again_once_with_twice_the_room() -> None:
    # Given the first answer is cut off at max_tokens and the second is valid
    api = FakeMessagesApi(Reply("extract_truncated"), Reply("extract_valid"))
    fails = JsonFailCounter()
    # When the batch is extracted
    out = extract_with_llm(batch(LISBON_TURN), CONFIG, client_for(api), on_json_fail=fails)
    # Then the second request had twice the output limit, and its candidates are returned
    assert [r["max_tokens"] for r in api.requests] == [
        CONFIG.max_output_tokens,
        2 * CONFIG.max_output_tokens,
    ]
    assert len(out.candidates) == 2
    # And it is no malformed answer: the room was too small, the model was not wrong
    assert fails.count == 0
    # And both requests are paid for and accounted (as the one call they make)
    assert out.input_tokens == usage_of("extract_truncated")[0] + usage_of("extract_valid")[0]
    assert out.cost_usd == pytest.approx(haiku_cost("extract_truncated", "extract_valid"))


def test_an_answer_truncated_twice_fails_as_truncated_without_a_third_request() -> None:
    # Given the model's answers are cut off at max_tokens every time
    api = FakeMessagesApi(Reply("extract_truncated"), Reply("extract_truncated"))
    # When the batch is extracted
    with pytest.raises(TruncatedLlmOutput) as raised:
        extract_with_llm(batch(LISBON_TURN), CONFIG, client_for(api), on_json_fail=lambda: None)
    # Then two requests were made, not the malformed-answer retry on top
    assert len(api.requests) == 2
    # And both are paid for in the error
    assert raised.value.usage.cost_usd == pytest.approx(
        haiku_cost("extract_truncated", "extract_truncated")
    )


@pytest.mark.parametrize("answer", ["extract_unknown_ref", "extract_missing_ref"])
def test_a_candidate_without_a_known_ref_is_malformed_and_retried(answer: str) -> None:
    # Given a first answer whose candidate names no ref of the batch (T7 of 2 turns, or null)
    api = FakeMessagesApi(Reply(answer), Reply("extract_valid"))
    fails = JsonFailCounter()
    # When a two-turn batch is extracted
    out = extract_with_llm(
        batch(LISBON_TURN, "Thanks!"), CONFIG, client_for(api), on_json_fail=fails
    )
    # Then the answer counts as malformed and is retried, like invalid JSON
    assert fails.count == 1
    assert len(api.requests) == 2
    assert api.requests[1] == api.requests[0]
    # And only the retry's candidates come back, attributed; both calls are accounted
    assert {c.source_turn_id for c in out.candidates} == {"turn-1"}
    assert out.cost_usd == pytest.approx(haiku_cost(answer, "extract_valid"))


def test_malformed_twice_fails_the_batch_visibly() -> None:
    # Given the model answers badly twice: an unknown ref, then a value absent from its text
    api = FakeMessagesApi(Reply("extract_unknown_ref"), Reply("extract_value_not_in_text"))
    fails = JsonFailCounter()
    # When a two-turn batch is extracted
    with pytest.raises(ExtractionFailed) as raised:
        extract_with_llm(
            batch(LISBON_TURN, "Also, I work at Arrive."),
            CONFIG,
            client_for(api),
            on_json_fail=fails,
        )
    # Then it fails as a permanent error (never a silent []) after exactly one retry
    error = raised.value
    assert isinstance(error, PermanentError)
    assert len(api.requests) == 2
    assert fails.count == 2
    assert error.malformed == 2
    # And the error names the batch
    assert error.batch == "batch of 2 turns starting turn-1"
    assert str(error).startswith("batch of 2 turns starting turn-1: ")
    # And the cost of both calls is still reported, and the cause chain is kept
    assert sum(c.cost_usd for c in error.calls) == pytest.approx(
        haiku_cost("extract_unknown_ref", "extract_value_not_in_text")
    )
    assert isinstance(error.__cause__, MalformedLlmOutput)
    assert isinstance(error.__cause__.__cause__, ValidationError)
    # And no message quotes the turns or the model's answer
    assert "Lisbon" not in str(error)
    assert "Arrive" not in str(error)
    assert "Porto" not in str(error.__cause__)


def test_unknown_refs_twice_fail_a_one_turn_batch_named_by_its_turn() -> None:
    # Given the model names an unknown ref twice
    api = FakeMessagesApi(Reply("extract_unknown_ref"), Reply("extract_unknown_ref"))
    # When a one-turn batch is extracted
    with pytest.raises(ExtractionFailed) as raised:
        extract_with_llm(
            batch(LISBON_TURN), CONFIG, client_for(api), on_json_fail=JsonFailCounter()
        )
    # Then the error names the turn, says what was wrong and does not quote the bad ref
    assert raised.value.batch == "turn turn-1"
    cause = str(raised.value.__cause__)
    assert cause == "candidate 1 has an unknown source_turn_id (refs: T1)"
    assert "T7" not in cause


def test_rate_limit_is_retried_by_the_sdk() -> None:
    # Given the API throttles once, asking for a 1 ms wait
    api = FakeMessagesApi(
        Reply("error_rate_limited", status=429, headers={"retry-after-ms": "1"}),
        Reply("extract_valid"),
    )
    fails = JsonFailCounter()
    started = time.monotonic()
    # When the batch is extracted
    out = extract_with_llm(batch(LISBON_TURN), CONFIG, client_for(api), on_json_fail=fails)
    # Then the SDK retried on its own: two HTTP requests, one accounted call, no json_fail
    assert len(api.requests) == 2
    assert api.headers[1]["x-stainless-retry-count"] == "1"
    assert len(out.calls) == 1
    assert len(out.candidates) == 2
    assert fails.count == 0
    assert time.monotonic() - started < 1.0


def test_persistent_overload_becomes_a_transient_error() -> None:
    # Given the API stays overloaded
    overloaded = Reply("error_overloaded", status=529, headers={"retry-after-ms": "1"})
    api = FakeMessagesApi(overloaded, overloaded, overloaded)
    # When the batch is extracted with two SDK retries
    with pytest.raises(LlmUnavailable) as raised:
        extract_with_llm(
            batch(LISBON_TURN), CONFIG, client_for(api), on_json_fail=JsonFailCounter()
        )
    # Then it is retryable by name (Step Functions), after the SDK's own three attempts
    assert isinstance(raised.value, TransientError)
    assert len(api.requests) == 3
    assert isinstance(raised.value.__cause__, anthropic.InternalServerError)


@pytest.mark.parametrize(
    ("failure", "sdk_error"),
    [
        (httpx2.ConnectError, anthropic.APIConnectionError),
        (httpx2.ReadTimeout, anthropic.APITimeoutError),
    ],
)
def test_connection_failure_or_timeout_becomes_a_transient_error(
    failure: type[httpx2.TransportError], sdk_error: type[anthropic.APIConnectionError]
) -> None:
    # Given the API cannot be reached, or does not answer in time
    def fail(request: httpx2.Request) -> httpx2.Response:
        raise failure("no answer", request=request)

    client = AnthropicExtractorClient(
        CONFIG,
        api_key="test-key",
        base_url="http://testserver",
        http_client=httpx2.Client(transport=httpx2.MockTransport(fail)),
        max_retries=0,
    )
    # When the batch is extracted
    with pytest.raises(LlmUnavailable) as raised:
        extract_with_llm(batch(LISBON_TURN), CONFIG, client, on_json_fail=JsonFailCounter())
    # Then the SDK's error is kept as the cause
    assert isinstance(raised.value.__cause__, sdk_error)


def test_bad_request_is_permanent_and_not_retried() -> None:
    # Given the API rejects the request itself
    api = FakeMessagesApi(Reply("error_invalid_request", status=400))
    fails = JsonFailCounter()
    # When the batch is extracted
    with pytest.raises(LlmRequestRejected) as raised:
        extract_with_llm(batch(LISBON_TURN), CONFIG, client_for(api), on_json_fail=fails)
    # Then it is permanent, sent once, and not mistaken for malformed output
    assert raised.value.status_code == 400
    assert isinstance(raised.value, PermanentError)
    assert len(api.requests) == 1
    assert fails.count == 0


def test_hypothetical_is_capped_even_when_the_model_is_confident() -> None:
    # Given a hypothetical turn, and a model answering with confidence 0.9
    answer = json.loads(recorded("extract_hypothetical_uncapped")["content"][0]["text"])
    assert answer["candidates"][0]["confidence"] == 0.9
    api = FakeMessagesApi(Reply("extract_hypothetical_uncapped"))
    text = "If I get the job at Zalando, I'll move to Berlin."
    # When the batch is extracted
    out = extract_with_llm(batch(text), CONFIG, client_for(api), on_json_fail=JsonFailCounter())
    # Then the post-check caps its confidence
    (berlin,) = out.candidates
    assert berlin.confidence <= CONFIG.hypothetical_confidence_cap


def test_a_hypothetical_turn_does_not_cap_another_turns_candidate() -> None:
    # Given a plain turn and a sarcastic hypothetical one, and a model confident about both
    api = FakeMessagesApi(Reply("extract_batch_hypothetical"))
    inp = batch(
        "We just adopted a cat named Miso.",
        "If I win the lottery I'll buy a boat, yeah right.",
    )
    # When the batch is extracted
    out = extract_with_llm(inp, CONFIG, client_for(api), on_json_fail=JsonFailCounter())
    # Then only the hypothetical turn's claim is capped; the plain turn's claim is untouched
    confidence = {(c.value, c.source_turn_id): c.confidence for c in out.candidates}
    assert confidence == {
        ("Miso", "turn-1"): 0.95,
        ("a boat", "turn-2"): CONFIG.hypothetical_confidence_cap,
    }


@pytest.mark.parametrize(
    "text",
    [
        "Imagine I lived in Berlin.",
        "Suppose I lived in Berlin.",
        "Let's pretend I live in Berlin.",
        "What if I lived in Berlin?",
        "I wish I lived in Berlin.",
        "I'm basically a Berlin local by now.",
        "I’m basically a Berlin local by now.",
        "Let's role-play: I live in Berlin.",
        "Oh sure, I love living in Berlin /s",
        "Yeah right, Berlin is my favourite city.",
    ],
)
def test_hypothetical_framings_are_capped(text: str) -> None:
    # Given a confident candidate from a framed turn
    berlin = candidate("Berlin", 0.9)
    # When the post-check runs
    (capped,) = cap_hypotheticals([berlin], text, 0.3)
    # Then its confidence is capped and nothing else changes
    assert capped.confidence == 0.3
    assert capped.model_copy(update={"confidence": 0.9}) == berlin


def test_only_the_hypothetical_sentence_is_capped() -> None:
    # Given a plain statement followed by a hypothetical one
    text = "I love ramen. What if I tried sushi instead?"
    ramen, sushi = candidate("ramen", 0.95), candidate("sushi", 0.8)
    # When the post-check runs
    capped = cap_hypotheticals([ramen, sushi], text, 0.3)
    # Then the plainly stated claim keeps its confidence
    assert [c.confidence for c in capped] == [0.95, 0.3]


def test_plain_turn_is_left_alone() -> None:
    # Given a turn with no framing (a word like "gift" must not read as "if")
    claims = [candidate("ramen", 0.95)]
    # When the post-check runs
    # Then nothing changes
    assert cap_hypotheticals(claims, "I got a ramen gift, I love ramen.", 0.3) == claims


def test_a_hedged_turn_caps_the_models_confidence_end_to_end() -> None:
    # Given a model that is sure (0.95) of both claims of a turn that hedges them
    api = FakeMessagesApi(Reply("extract_valid"))
    text = "I think I moved to Lisbon last month and I can't stand cilantro."
    # When the turn is extracted
    out = extract_with_llm(batch(text), CONFIG, client_for(api), on_json_fail=JsonFailCounter())
    # Then the post-check caps both at the hedge ceiling
    assert {c.value: c.confidence for c in out.candidates} == {"Lisbon": 0.6, "cilantro": 0.6}


@pytest.mark.parametrize(
    ("text", "confidence"),
    [
        ("I love ramen.", 0.95),
        ("I love ramen, probably.", 0.6),
        ("Do I love ramen?", 0.5),
        ("My brother says I love ramen.", 0.5),
        ("I'm going to love ramen in Tokyo.", 0.5),
        ("I wish I could eat ramen every day.", 0.4),
        ("I love ramen. Maybe I love ramen too much.", 0.95),
    ],
)
def test_the_wording_post_check_caps_by_the_plainest_stating_sentence(
    text: str, confidence: float
) -> None:
    # Given a confident candidate and a turn that states it plainly, hedged, asked, reported,
    # planned or wished
    ramen = candidate("ramen", 0.95)
    # When the post-check runs
    (capped,) = cap_by_wording([ramen], text)
    # Then the confidence is the plainest stating sentence's ceiling
    assert capped.confidence == confidence


def test_a_value_the_model_reworded_keeps_its_confidence() -> None:
    # Given a candidate whose value appears in no sentence of the turn
    noodles = candidate("noodle soup", 0.9)
    # When the post-check runs on a hedged turn
    # Then the model's own confidence stands: there is no sentence to read
    assert cap_by_wording([noodles], "I think I love ramen.") == [noodles]


def test_long_conversation_gets_a_parallel_detail_pass_merged_without_duplicates() -> None:
    # Given a 10-message conversation (9 earlier turns + a one-turn batch), ~400-char windows,
    # and the detail pass on every window holding a new turn
    config = ExtractConfig(detail_chunk_chars=400, detail_pass="long_conversations")
    inp = batch("Let's go with the second one.", session=conversation(9))
    assert count_llm_calls(inp, config) == 2
    api = FakeMessagesApi(Reply("extract_full_pass_long"), detail=Reply("extract_detail_window"))
    # When the batch is extracted
    out = extract_with_llm(inp, config, client_for(api, config), on_json_fail=JsonFailCounter())
    # Then one full pass and one detail call (the only window holding the batch turn) were made
    assert len(api.full_requests) == 1
    (detail,) = api.detail_requests
    assert section_lines(detail, "window")[-1].startswith('{"ref": "T1"')
    # And the merge keeps one candidate per memory key, the most confident one
    keys = [memory_key(c) for c in out.candidates]
    assert len(keys) == len(set(keys))
    by_attribute = {c.attribute: c for c in out.candidates}
    assert set(by_attribute) == {"chosen_plan", "engineer_count", "plan_price"}
    assert by_attribute["chosen_plan"].confidence == 0.95  # detail beat the full pass's 0.8
    assert "$29/month" in by_attribute["chosen_plan"].text
    assert {c.source_turn_id for c in out.candidates} == {"turn-1"}
    # And every call is accounted and summed
    names = ["extract_full_pass_long", "extract_detail_window"]
    assert len(out.calls) == len(names)
    assert out.input_tokens == sum(usage_of(name)[0] for name in names)
    assert out.output_tokens == sum(usage_of(name)[1] for name in names)
    assert out.cost_usd == pytest.approx(haiku_cost(*names))


def test_detail_calls_run_concurrently_with_the_full_pass() -> None:
    # Given a batch of two long turns that lands in exactly two windows, and an API that holds
    # every request until the full pass and both windows are in flight together
    config = ExtractConfig(
        detail_chunk_chars=400, detail_overlap_messages=0, detail_pass="long_conversations"
    )
    inp = batch(
        "Let's go with the second one.".ljust(300, "."),
        "And book the onboarding call.".ljust(300, "."),
        session=conversation(9),
    )
    assert count_llm_calls(inp, config) == 3
    api = FakeMessagesApi(Reply("extract_full_pass_long"), detail=Reply("extract_detail_window"))
    barrier = threading.Barrier(3, timeout=5)

    def handle(request: httpx2.Request) -> httpx2.Response:
        barrier.wait()  # breaks, failing the call, if the passes run one after the other
        return api.handle(request)

    client = AnthropicExtractorClient(
        config,
        api_key="test-key",
        base_url="http://testserver",
        http_client=httpx2.Client(transport=httpx2.MockTransport(handle)),
        max_retries=0,
    )
    # When the batch is extracted
    out = extract_with_llm(inp, config, client, on_json_fail=JsonFailCounter())
    # Then all three calls met at the barrier and their results were merged
    assert len(api.requests) == 3
    assert len(out.candidates) == 3


@pytest.mark.parametrize(("earlier", "expected_calls"), [(5, 1), (6, 2)])
def test_the_detail_pass_needs_a_long_conversation(earlier: int, expected_calls: int) -> None:
    # Given a three-turn batch after 5 earlier turns (8 messages, one below the threshold)
    # or after 6 (9 messages, at the threshold), the detail pass on every window
    config = ExtractConfig(detail_pass="long_conversations")
    inp = batch(
        "Let's go with the second one.",
        "Monthly billing.",
        "Thanks!",
        session=conversation(earlier),
    )
    api = FakeMessagesApi(Reply("extract_full_pass_long"), detail=Reply("extract_detail_window"))
    # When the batch is extracted
    extract_with_llm(inp, config, client_for(api, config), on_json_fail=JsonFailCounter())
    # Then a short conversation gets the full pass only, a long one one window more
    assert len(api.full_requests) == 1
    assert len(api.detail_requests) == expected_calls - 1
    # And count_llm_calls foretold exactly what was sent
    assert count_llm_calls(inp, config) == len(api.requests) == expected_calls


@pytest.mark.parametrize(("chars", "expected_calls"), [(2_000, 1), (2_001, 2)])
def test_by_default_the_detail_pass_reads_only_a_turn_the_full_pass_saw_cut(
    chars: int, expected_calls: int
) -> None:
    # Given a long conversation whose new turn fits max_turn_chars (2,000), or is one longer
    text = "Let's go with the second one, the Team plan. ".ljust(chars - 4, ".") + " END"
    inp = batch(text, session=conversation(9))
    api = FakeMessagesApi(Reply("extract_full_pass_long"), detail=Reply("extract_detail_window"))
    # When the batch is extracted with the default config
    extract_with_llm(inp, CONFIG, client_for(api), on_json_fail=JsonFailCounter())
    # Then a turn the full pass showed whole gets no detail pass (it would reread the same
    # text); a cut one gets a window that shows it whole, its end included
    (full,) = api.full_requests
    assert (" END" in "".join(section_lines(full, "new_turns"))) is (chars <= 2_000)
    assert len(api.detail_requests) == expected_calls - 1
    assert all(" END" in "".join(section_lines(d, "window")) for d in api.detail_requests)
    assert count_llm_calls(inp, CONFIG) == len(api.requests) == expected_calls


def test_windows_of_context_only_are_not_sent() -> None:
    # Given 24 earlier turns (the latest 20 are shown), a three-turn batch and small windows
    config = ExtractConfig(detail_chunk_chars=400, detail_pass="long_conversations")
    inp = batch(
        "Let's go with the second one.",
        "We'll pay monthly.",
        "Thanks, that's all for now.",
        session=conversation(24),
    )
    shown: tuple[SessionTurn | BatchTurn, ...] = (
        *inp.session_turns[-config.max_source_turns :],
        *inp.turns,
    )
    all_windows = detail_windows(shown, 400, config.detail_overlap_messages)
    api = FakeMessagesApi(Reply("extract_full_pass_long"), detail=Reply("extract_detail_window"))
    # When the batch is extracted
    extract_with_llm(inp, config, client_for(api, config), on_json_fail=JsonFailCounter())
    # Then only the windows holding a batch turn were sent: the last two of nineteen
    assert len(all_windows) == 19
    assert len(api.detail_requests) == 2
    assert count_llm_calls(inp, config) == len(api.requests) == 3
    # And every window sent holds batch turns, shown as in the full pass (same refs)
    (full,) = api.full_requests
    new_turns = set(section_lines(full, "new_turns"))
    assert len(new_turns) == 3
    windows = [section_lines(request, "window") for request in api.detail_requests]
    batch_lines = [[line for line in window if line.startswith('{"ref"')] for window in windows]
    assert all(batch_lines)
    assert {line for lines in batch_lines for line in lines} == new_turns
    sent = "\n".join(line for window in windows for line in window)
    # And only the context next to the batch is sent again
    assert "(message 21)" in sent
    assert "(message 20)" not in sent


def test_a_detail_window_that_stays_malformed_fails_the_batch() -> None:
    # Given a valid full pass but detail windows that always answer with an unknown ref
    config = ExtractConfig(detail_chunk_chars=10_000, detail_pass="long_conversations")
    api = FakeMessagesApi(Reply("extract_full_pass_long"), detail=Reply("extract_unknown_ref"))
    fails = JsonFailCounter()
    # When a long conversation is extracted (one window)
    with pytest.raises(ExtractionFailed) as raised:
        extract_with_llm(
            batch("Let's go with the second one.", session=conversation(9)),
            config,
            client_for(api, config),
            on_json_fail=fails,
        )
    # Then the window's two failures are counted and all three calls are accounted
    assert fails.count == 2
    assert len(api.detail_requests) == 2
    assert len(raised.value.calls) == 3


def test_detail_windows_overlap_and_cover_every_turn() -> None:
    # Given ten turns of 100 characters
    turns = tuple(SessionTurn(role=Role.USER, text=f"{i}".ljust(100, "-")) for i in range(10))
    # When they are cut into windows of 300 characters with two turns of overlap
    windows = detail_windows(turns, 300, 2)
    # Then each window fits, repeats the previous window's last two turns, and all are covered
    assert all(sum(len(t.text) for t in w) <= 300 for w in windows)
    for previous, current in itertools.pairwise(windows):
        assert previous[-2:] == current[:2]
    assert {t for w in windows for t in w} == set(turns)
    assert windows[-1][-1] == turns[-1]


def test_an_oversized_turn_gets_a_window_of_its_own() -> None:
    # Given a turn longer than a whole window
    turns = (
        SessionTurn(role=Role.USER, text="a" * 50),
        SessionTurn(role=Role.ASSISTANT, text="b" * 500),
        SessionTurn(role=Role.USER, text="c" * 50),
    )
    # When windows are cut with no overlap
    windows = detail_windows(turns, 100, 0)
    # Then it stands alone and the cutting still moves forward
    assert windows == [turns[:1], turns[1:2], turns[2:]]


def test_merge_keeps_the_most_confident_duplicate_in_first_seen_order() -> None:
    # Given duplicates across passes (same memory key, different confidence and wording)
    first = candidate("ramen", 0.7)
    better = candidate("ramen", 0.9, text="The user really likes ramen.")
    other = candidate("sushi", 0.8)
    tie = candidate("sushi", 0.8, text="The user likes sushi a lot.")
    # When they are merged
    merged = merge_candidates([[first, other], [better, tie]])
    # Then one per key survives, the most confident, ties keep the first seen
    assert merged == [better, other]


def test_prices_cover_dated_and_bedrock_model_ids() -> None:
    # Given the same model under its API, dated and Bedrock names
    names = [
        "claude-haiku-4-5",
        "claude-haiku-4-5-20251001",
        "anthropic.claude-haiku-4-5-20251001-v1:0",
        "us.anthropic.claude-haiku-4-5-20251001-v1:0",
        "global.anthropic.claude-haiku-4-5-20251001-v1:0",
    ]
    # Then all share one price, and a cost is tokens times price
    prices = ExtractConfig().prices_per_mtok
    assert {price_per_mtok(name, prices) for name in names} == {(HAIKU_IN, HAIKU_OUT)}
    assert cost_usd("claude-haiku-4-5", 1_000_000, 200_000, prices) == pytest.approx(2.0)


def test_unknown_model_or_provider_fails_at_construction() -> None:
    # Given a model without a price, or a provider that does not exist
    api = FakeMessagesApi()
    # Then building the client fails with a config error and no request is sent
    with pytest.raises(ConfigError, match="no price for model 'claude-unknown-1'"):
        client_for(api, ExtractConfig(model="claude-unknown-1"))
    with pytest.raises(ValidationError, match="'anthropic', 'bedrock' or 'bedrock-converse'"):
        ExtractConfig(provider="vertex")  # type: ignore[arg-type]
    assert api.requests == []


def test_bedrock_provider_signs_requests_with_iam_credentials(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given IAM credentials in the environment and a Bedrock model id
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test-secret")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_BEARER_TOKEN_BEDROCK", raising=False)
    model = "eu.anthropic.claude-haiku-4-5-20251001-v1:0"
    config = ExtractConfig(provider="bedrock", model=model)
    seen: list[httpx2.Request] = []

    def handle(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(200, json=recorded("extract_empty"))

    client = AnthropicExtractorClient(
        config,
        aws_region="eu-west-1",
        http_client=httpx2.Client(transport=httpx2.MockTransport(handle)),
        max_retries=0,
    )
    # When a batch is extracted
    out = extract_with_llm(batch("Thanks!"), config, client, on_json_fail=JsonFailCounter())
    # Then the call went to Bedrock's invoke endpoint, SigV4-signed, with the structured format
    (request,) = seen
    assert str(request.url) == (
        f"https://bedrock-runtime.eu-west-1.amazonaws.com/model/{model}/invoke"
    )
    assert request.headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert json.loads(request.content)["output_config"]["format"]["type"] == "json_schema"
    assert out.cost_usd == pytest.approx(haiku_cost("extract_empty"))


def test_importing_the_extractor_does_not_import_anthropic() -> None:
    # Given a fresh interpreter
    code = (
        "import sys, memwrite.extract.llm, memwrite.adapters.anthropic.extractor;"
        "print('anthropic' in sys.modules)"
    )
    # When the extractor and its adapter are imported
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    # Then the SDK (about 3 s of cold start) is not loaded until a client is built
    assert result.stdout.strip() == "False"


def test_overload_answers_halve_the_model_budget_once_rate_limits_compound() -> None:
    # Given a model budget and an API that is overloaded (529), then rate limited (429)
    clock = [1_800_000_000.0]
    budget = ModelBudget(
        ModelConfig(aimd_cooldown_s=0.0), InMemoryBudgetStore(), now=lambda: clock[0]
    )
    overloaded = Reply("error_overloaded", status=529, headers={"retry-after-ms": "1"})
    limited = Reply("error_rate_limited", status=429, headers={"retry-after-ms": "1"})
    api = FakeMessagesApi(overloaded, overloaded, overloaded, limited, limited)
    client = AnthropicExtractorClient(
        CONFIG,
        api_key="test-key",
        base_url="http://testserver",
        http_client=httpx2.Client(transport=httpx2.MockTransport(api.handle)),
        max_retries=0,
        budget=budget,
    )

    def factor() -> float:
        return min(shard.factor for shard in budget.snapshot("anthropic", CONFIG.model))

    # When three calls are answered 529, a second apart (each past the retry-after)
    for _ in range(3):
        clock[0] += 1
        with pytest.raises(LlmUnavailable):
            extract_with_llm(batch(LISBON_TURN), CONFIG, client, on_json_fail=JsonFailCounter())
    # Then the budget's limits are halved, not compounded
    assert factor() == pytest.approx(0.5, abs=0.01)
    # When two are answered 429: those compound
    for _ in range(2):
        clock[0] += 1
        with pytest.raises(LlmUnavailable):
            extract_with_llm(batch(LISBON_TURN), CONFIG, client, on_json_fail=JsonFailCounter())
    assert factor() == pytest.approx(0.125, abs=0.01)
