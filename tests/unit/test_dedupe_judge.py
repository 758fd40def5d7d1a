"""The dedupe judge (tier 3) end to end through the real anthropic client, over recorded HTTP
responses; where `decide_duplicate` asks it and where it must not; the exact prompt snapshot.

`RecordedApi` is an httpx2 mock transport (the SDK's own HTTP stack): it serves the JSON bodies in
tests/recorded/anthropic in order and keeps every request body the client sent.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import anthropic
import httpx2
import pytest

from memwrite.adapters.anthropic.dedupe_judge import AnthropicDedupeJudge
from memwrite.config.settings import DedupeConfig, ExtractConfig
from memwrite.decisions.duplicate import Neighbour, decide_duplicate
from memwrite.errors import LlmRequestRejected, LlmUnavailable, PermanentError, TransientError
from memwrite.model_ports import DedupeJudge
from memwrite.prompts.dedupe import VERSION, render
from tests.embedders import FixedSimilarityEmbedder
from tests.recorded_api import RecordedApi, haiku_cost

SNAPSHOTS = Path(__file__).parent / "snapshots"
CONFIG = ExtractConfig()
CANDIDATE = "The user lives in Berlin, Germany."
EXISTING = "The user lives in Berlin."
NEAREST = Neighbour("mem-berlin", EXISTING)
# The band the judge decides: at or above 0.92 merge outright, below 0.80 keep distinct.
THRESHOLDS = DedupeConfig(dedupe_merge_threshold=0.92, dedupe_distinct_threshold=0.80)
IN_BAND = 0.86


def judge_for(api: RecordedApi) -> AnthropicDedupeJudge:
    return AnthropicDedupeJudge(
        CONFIG,
        api_key="test-key",
        base_url="http://testserver",
        http_client=httpx2.Client(transport=httpx2.MockTransport(api.handle)),
        max_retries=0,
    )


def test_the_judge_says_same_for_a_more_specific_restatement() -> None:
    # Given the API answers same=true
    api = RecordedApi("dedupe_same")
    judge = judge_for(api)
    # When the candidate is compared with the stored memory
    judgement = judge.same_memory(CANDIDATE, EXISTING)
    # Then they are the same memory, after one call whose usage and cost are reported
    assert judgement.same is True
    assert len(api.requests) == 1
    (usage,) = judgement.calls
    assert usage.model == "claude-haiku-4-5-20251001"
    assert usage.cost_usd == pytest.approx(haiku_cost("dedupe_same"))
    assert judgement.malformed == 0


def test_the_judge_says_different_for_another_value() -> None:
    # Given the API answers same=false
    api = RecordedApi("dedupe_different")
    judge = judge_for(api)
    # When another city is compared with the stored one
    judgement = judge.same_memory("The user lives in Bern.", EXISTING)
    # Then they stay two memories, and the call is paid for
    assert judgement.same is False
    assert len(judgement.calls) == 1
    assert judgement.malformed == 0


def test_the_request_carries_the_rendered_prompt_and_output_schema() -> None:
    # Given a working API
    api = RecordedApi("dedupe_same")
    # When a pair is judged
    judge_for(api).same_memory(CANDIDATE, EXISTING)
    # Then one request names the configured model and carries the prompt exactly as rendered
    (request,) = api.requests
    prompt = render(CANDIDATE, EXISTING)
    assert request["model"] == CONFIG.model
    assert request["max_tokens"] == 256
    assert request["system"] == prompt.system
    assert request["messages"] == prompt.messages
    # And it asks for structured output with the DedupeVerdict schema (strict: no extra keys)
    output_format = request["output_config"]["format"]
    assert output_format["type"] == "json_schema"
    schema = output_format["schema"]
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) == {"same", "reason"}


def test_a_malformed_answer_is_retried_and_the_retry_decides(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given a first answer truncated at max_tokens, then a valid same=true
    api = RecordedApi("dedupe_malformed", "dedupe_same")
    judge = judge_for(api)
    # When the pair is judged
    with caplog.at_level(logging.WARNING):
        judgement = judge.same_memory(CANDIDATE, EXISTING)
    # Then the retry decides, the same request was sent twice and both calls are paid for
    assert judgement.same is True
    assert len(api.requests) == 2
    assert api.requests[0] == api.requests[1]
    assert [c.output_tokens for c in judgement.calls] == [256, 19]
    # And the malformed answer is counted and logged without quoting either memory
    assert judgement.malformed == 1
    assert "stop_reason=max_tokens" in caplog.text
    assert "Berlin" not in caplog.text


def test_an_answer_malformed_twice_keeps_the_pair_distinct_after_two_calls(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given an API that answers malformed twice
    api = RecordedApi("dedupe_malformed", "dedupe_malformed")
    judge = judge_for(api)
    # When the pair is judged
    with caplog.at_level(logging.WARNING):
        judgement = judge.same_memory(CANDIDATE, EXISTING)
    # Then the pair is not the same (no merge on a guess), and no third call is made
    assert judgement.same is False
    assert len(api.requests) == 2
    assert judgement.malformed == 2
    assert len(judgement.calls) == 2
    assert "kept distinct" in caplog.text


def test_each_pair_reports_only_its_own_calls() -> None:
    # Given one judge and three answers: same, malformed, different
    api = RecordedApi("dedupe_same", "dedupe_malformed", "dedupe_different")
    judge = judge_for(api)
    # When two pairs are judged
    first = judge.same_memory(CANDIDATE, EXISTING)
    second = judge.same_memory("The user lives in Bern.", EXISTING)
    # Then each pair got its own verdict and is charged its own calls, the retry to the second
    assert (first.same, second.same) == (True, False)
    assert (len(first.calls), first.malformed) == (1, 0)
    assert (len(second.calls), second.malformed) == (2, 1)


@pytest.mark.parametrize(
    ("reply", "status", "error", "kind"),
    [
        ("error_rate_limited", 429, LlmUnavailable, TransientError),
        ("error_overloaded", 529, LlmUnavailable, TransientError),
        ("error_invalid_request", 400, LlmRequestRejected, PermanentError),
    ],
)
def test_api_errors_propagate_translated_with_their_cause(
    reply: str, status: int, error: type[Exception], kind: type[Exception]
) -> None:
    # Given the API fails with `status` (the SDK's own retries are off here)
    api = RecordedApi((reply, status))
    judge = judge_for(api)
    # When the pair is judged
    with pytest.raises(error) as raised:
        judge.same_memory(CANDIDATE, EXISTING)
    # Then the error is retryable or not by its class, and the SDK error is the cause
    assert isinstance(raised.value, kind)
    assert isinstance(raised.value.__cause__, anthropic.APIStatusError)
    # And it is not mistaken for a malformed answer: no retry
    assert len(api.requests) == 1


def test_in_the_band_the_judge_is_asked_once_and_same_merges() -> None:
    # Given the nearest memory in the band and a judge that answers same=true
    api = RecordedApi("dedupe_same")
    judge: DedupeJudge = judge_for(api)
    # When the candidate is deduped
    decision = decide_duplicate(
        CANDIDATE,
        [NEAREST],
        embedder=FixedSimilarityEmbedder(IN_BAND),
        config=THRESHOLDS,
        judge=judge,
    )
    # Then the judge was asked exactly once, about the candidate and the nearest memory
    (request,) = api.requests
    assert request["messages"] == render(CANDIDATE, EXISTING).messages
    # And the candidate merges into it, decided by tier 3, with the judge's call to pay for
    assert (decision.target, decision.tier) == ("mem-berlin", 3)
    assert decision.similarity == pytest.approx(IN_BAND, abs=1e-6)
    assert decision.judgement is not None and len(decision.judgement.calls) == 1


def test_in_the_band_a_different_verdict_keeps_a_new_memory() -> None:
    # Given the nearest memory in the band and a judge that answers same=false
    api = RecordedApi("dedupe_different")
    # When the candidate is deduped
    decision = decide_duplicate(
        CANDIDATE,
        [NEAREST],
        embedder=FixedSimilarityEmbedder(IN_BAND),
        config=THRESHOLDS,
        judge=judge_for(api),
    )
    # Then one call was made and nothing merges
    assert len(api.requests) == 1
    assert (decision.target, decision.tier) == (None, None)


@pytest.mark.parametrize(
    ("similarity", "target", "tier"),
    [
        (0.97, "mem-berlin", 2),  # above the merge threshold: merged on similarity alone
        (0.50, None, None),  # below the distinct threshold: a new memory
    ],
)
def test_outside_the_band_the_judge_is_not_called(
    similarity: float, target: str | None, tier: int | None
) -> None:
    # Given a judge whose API has no answer to give
    api = RecordedApi()
    judge = judge_for(api)
    # When a candidate outside the band is deduped
    decision = decide_duplicate(
        CANDIDATE,
        [NEAREST],
        embedder=FixedSimilarityEmbedder(similarity),
        config=THRESHOLDS,
        judge=judge,
    )
    # Then similarity decides, and the judge sends nothing and costs nothing
    assert (decision.target, decision.tier) == (target, tier)
    assert api.requests == []
    assert decision.judgement is None


def test_importing_the_adapter_does_not_load_the_sdk() -> None:
    # Given a fresh interpreter
    code = (
        "import sys; import memwrite.adapters.anthropic.dedupe_judge, memwrite.dedupe.stage; "
        "print('anthropic' in sys.modules)"
    )
    # When the adapter and the stage are imported
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    # Then the SDK (about 3 s of cold start) is not loaded until a judge is built
    assert result.stdout.strip() == "False"


def assert_snapshot(name: str, actual: str) -> None:
    path = SNAPSHOTS / name
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8")
    if not path.exists():
        pytest.fail(f"{path} is missing: run with UPDATE_SNAPSHOTS=1 to create it")
    expected = path.read_text(encoding="utf-8")
    if actual != expected:
        same_version = expected.partition("\n")[0] == f"VERSION {VERSION}"
        hint = "bump VERSION, then " if same_version else ""
        pytest.fail(f"{name} changed: {hint}review and rerun with UPDATE_SNAPSHOTS=1")


def test_the_prompt_matches_the_snapshot() -> None:
    # Given a candidate with quotes in it (JSON-escaped in its section)
    candidate = 'The user calls Berlin, Germany "home".'
    # When the prompt is rendered against a stored memory
    prompt = render(candidate, EXISTING)
    # Then it is exactly the reviewed snapshot
    body = "\n".join(f"=== {m['role']} ===\n{m['content']}" for m in prompt.messages)
    assert_snapshot(
        "dedupe_prompt.txt", f"VERSION {VERSION}\n=== system ===\n{prompt.system}\n{body}\n"
    )
