"""The resolve judge end to end through the real anthropic client, over recorded HTTP responses,
and the exact snapshot of the prompt it sends.

`RecordedApi` is an httpx2 mock transport (the SDK's own HTTP stack): it serves the JSON bodies in
tests/recorded/anthropic in order and keeps every request body the client sent.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import anthropic
import httpx2
import pytest
from pydantic import ValidationError

from memwrite.adapters.anthropic.resolve_judge import AnthropicResolveJudge
from memwrite.claims.entities import entity_id_for
from memwrite.config.settings import ExtractConfig
from memwrite.costs.usage import LlmUsage
from memwrite.errors import (
    LlmRequestRejected,
    LlmUnavailable,
    MalformedLlmOutput,
    PermanentError,
    TransientError,
)
from memwrite.model_ports import ResolveJudge
from memwrite.prompts import PromptMessage
from memwrite.prompts.resolve_refs import (
    VERSION,
    JudgeEntity,
    JudgeReference,
    ResolvePromptInput,
    ResolveResult,
)
from memwrite.resolve_refs.references import (
    BatchResolution,
    ResolutionMethod,
    ResolvedCandidate,
    Unresolved,
    resolve_batch,
)
from tests.patels import AT, TENANT, TURN, USER, leave_claim, patels
from tests.recorded_api import RecordedApi, haiku_cost

SNAPSHOTS = Path(__file__).parent / "snapshots"
CONFIG = ExtractConfig()


def judge_for(api: RecordedApi) -> AnthropicResolveJudge:
    return AnthropicResolveJudge(
        CONFIG,
        api_key="test-key",
        base_url="http://testserver",
        http_client=httpx2.Client(transport=httpx2.MockTransport(api.handle)),
        max_retries=0,
    )


def resolve_patel(judge: ResolveJudge) -> BatchResolution:
    return resolve_batch(
        [leave_claim()],
        {"turn-1": TURN},
        patels(),
        tenant=TENANT,
        user_id=USER,
        at=AT,
        judge=judge,
        model=CONFIG.model,
    )


def test_the_judge_picks_an_option_and_the_variant_becomes_its_alias() -> None:
    # Given the API answers that R1 is E1 (Raj Patel, the manager)
    api = RecordedApi("resolve_decision")
    # When "Mr. Patel" is resolved against the two Patels
    out = resolve_patel(judge_for(api))
    # Then the claim is Raj Patel's, decided by the LLM, and "Mr. Patel" is now his alias
    (only,) = out.resolutions
    assert isinstance(only, ResolvedCandidate)
    assert (only.method, only.entity_id) == (
        ResolutionMethod.LLM,
        entity_id_for(TENANT, USER, "Raj Patel"),
    )
    assert only.candidate.entity == "Raj Patel"
    assert only.candidate.text == "Raj Patel approved the user's leave for May."
    (raj,) = out.upserts
    assert raj.aliases == ("my manager", "Mr. Patel")
    # And the call's usage and cost are reported
    (usage,) = out.llm_calls
    assert usage.model == "claude-haiku-4-5-20251001"
    assert usage.cost_usd == pytest.approx(haiku_cost("resolve_decision"))


def test_the_request_carries_the_model_prompt_and_output_schema() -> None:
    # Given a working API
    api = RecordedApi("resolve_decision")
    # When the ambiguous name is resolved
    resolve_patel(judge_for(api))
    # Then one request names the configured model and carries the prompt sections
    (request,) = api.requests
    assert request["model"] == CONFIG.model
    assert request["max_tokens"] == 2_048
    for tag in ("output_schema", "rules", "examples"):
        assert f"<{tag}>" in request["system"]
    content = request["messages"][0]["content"]
    assert '"words": "Mr. Patel", "kind": "name"' in content
    assert '"options": ["E1", "E2"], "may_be_new": true' in content
    # And it asks for structured output with the ResolveResult schema (strict: no extra keys)
    output_format = request["output_config"]["format"]
    assert output_format["type"] == "json_schema"
    decision = output_format["schema"]["$defs"]["ResolveDecision"]
    assert decision["additionalProperties"] is False
    assert set(decision["required"]) == {"ref", "answer", "reason"}


def test_unresolved_from_the_judge_fails_the_claim() -> None:
    # Given the API answers "unresolved"
    api = RecordedApi("resolve_unresolved")
    # When the ambiguous name is resolved
    out = resolve_patel(judge_for(api))
    # Then the claim fails with ResolutionFailed, no entity is touched, the call is paid for
    (only,) = out.resolutions
    assert isinstance(only, Unresolved)
    assert only.reason == "ResolutionFailed"
    assert out.upserts == ()
    assert len(out.llm_calls) == 1


def test_a_malformed_answer_is_retried_and_the_retry_decides() -> None:
    # Given a first answer truncated at max_tokens, then a valid one
    api = RecordedApi("resolve_malformed", "resolve_decision")
    # When the ambiguous name is resolved
    out = resolve_patel(judge_for(api))
    # Then the retry decides, both calls are paid for, and one malformed answer is counted
    (only,) = out.resolutions
    assert isinstance(only, ResolvedCandidate)
    assert only.entity_id == entity_id_for(TENANT, USER, "Raj Patel")
    assert len(api.requests) == 2
    assert api.requests[0] == api.requests[1]
    assert [c.output_tokens for c in out.llm_calls] == [16, 38]
    assert out.judge_malformed == 1


def test_an_answer_malformed_twice_fails_the_claim_after_two_calls() -> None:
    # Given an answer outside the options, then a truncated one
    api = RecordedApi("resolve_unknown_option", "resolve_malformed")
    # When the ambiguous name is resolved
    out = resolve_patel(judge_for(api))
    # Then the claim fails visibly and no third call is made
    (only,) = out.resolutions
    assert isinstance(only, Unresolved)
    assert only.detail == "the LLM judge answer stayed malformed after a retry"
    assert len(api.requests) == 2
    assert out.judge_malformed == 2


def test_a_truncated_answer_is_malformed_output_that_keeps_its_usage() -> None:
    # Given the truncated answer
    api = RecordedApi("resolve_malformed")
    messages: list[PromptMessage] = [{"role": "user", "content": "<references>...</references>"}]
    # When the adapter is called directly
    with pytest.raises(MalformedLlmOutput) as raised:
        judge_for(api).judge("system", messages, CONFIG.model)
    # Then the error says where the JSON broke, without quoting it, and carries the usage
    assert str(raised.value).startswith("stop_reason=max_tokens: 1 validation error(s)")
    assert "Patel" not in str(raised.value)
    assert raised.value.usage.output_tokens == 16


@pytest.mark.parametrize(
    ("reply", "status", "error", "kind"),
    [
        ("error_rate_limited", 429, LlmUnavailable, TransientError),
        ("error_overloaded", 529, LlmUnavailable, TransientError),
        ("error_invalid_request", 400, LlmRequestRejected, PermanentError),
    ],
)
def test_api_errors_are_translated_and_keep_their_cause(
    reply: str, status: int, error: type[Exception], kind: type[Exception]
) -> None:
    # Given the API fails with `status` (the SDK's own retries are off here)
    api = RecordedApi((reply, status))
    # When the ambiguous name is resolved
    with pytest.raises(error) as raised:
        resolve_patel(judge_for(api))
    # Then the error is retryable or not by its class, and the SDK error is the cause
    assert isinstance(raised.value, kind)
    assert isinstance(raised.value.__cause__, anthropic.APIStatusError)
    assert len(api.requests) == 1


def test_importing_the_adapter_does_not_load_the_sdk() -> None:
    # Given a fresh interpreter
    code = (
        "import sys; import memwrite.adapters.anthropic.resolve_judge, "
        "memwrite.resolve_refs.references; "
        "print('anthropic' in sys.modules)"
    )
    # When the adapter and the stage are imported
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    # Then the SDK (about 3 s of cold start) is not loaded until a judge is built
    assert result.stdout.strip() == "False"


def test_the_prompt_input_refuses_refs_it_does_not_define() -> None:
    # Given a reference whose option is not among the entities shown
    entity = JudgeEntity(ref="E1", name="Raj Patel", kind="person")
    reference = JudgeReference(
        ref="R1", words="Mr. Patel", kind="name", claim=TURN, options=("E2",)
    )
    # When the prompt input is built
    # Then it is refused: the model must never see an option it cannot look up
    with pytest.raises(ValidationError, match="not an entity"):
        ResolvePromptInput(turns=(), entities=(entity,), references=(reference,))


class CapturingJudge:
    """Keeps the prompt it is sent, then fails the call: the prompt is all a snapshot needs."""

    def __init__(self) -> None:
        self.prompt = ""

    def judge(
        self, system: str, messages: Sequence[PromptMessage], model: str
    ) -> tuple[ResolveResult, LlmUsage]:
        body = "\n".join(f"=== {m['role']} ===\n{m['content']}" for m in messages)
        self.prompt = f"VERSION {VERSION}\n=== system ===\n{system}\n{body}\n"
        raise LlmUnavailable("captured")


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
    # Given a batch with an ambiguous name, an ambiguous pronoun and a long turn
    turns = {
        "turn-1": TURN,
        "turn-2": "Ana and Maya came over. She is moving to Lisbon. " + "z" * 2_100,
    }
    base = leave_claim()
    claims = [
        base,
        base.model_copy(
            update={
                "entity": "Ana",
                "text": "Ana visited the user.",
                "value": "the user",
                "source_turn_id": "turn-2",
            }
        ),
        base.model_copy(
            update={
                "entity": "Maya",
                "text": "Maya visited the user.",
                "value": "the user",
                "source_turn_id": "turn-2",
            }
        ),
        base.model_copy(
            update={
                "entity": "She",
                "text": "She is moving to Lisbon.",
                "value": "Lisbon",
                "source_turn_id": "turn-2",
            }
        ),
    ]
    judge = CapturingJudge()
    # When the batch is resolved, up to the judge call
    with pytest.raises(LlmUnavailable):
        resolve_batch(
            claims,
            turns,
            patels(),
            tenant=TENANT,
            user_id=USER,
            at=AT,
            judge=judge,
            model=CONFIG.model,
        )
    # Then the prompt is exactly the reviewed snapshot
    assert_snapshot("resolve_prompt.txt", judge.prompt)
