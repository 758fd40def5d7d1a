"""The verifier end to end through the real anthropic client, over recorded HTTP responses:
pass, correct, drop (Unverified{check}), the malformed-answer retry, when it is asked at all
(off by default, per tenant, importance threshold, rule-made candidates), and its cost on the
extract stage's trace.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memwrite.adapters.anthropic.verifier import AnthropicVerifier
from memwrite.adapters.in_memory import CountingMetrics, InMemorySessionLog, InMemorySpanStore
from memwrite.claims.candidate import Candidate, MemoryType, Quality
from memwrite.config.settings import ExtractConfig, PipelineConfig, Settings, VerifierConfig
from memwrite.config.tenant_overrides import TenantOverrides
from memwrite.errors import VerificationFailed
from memwrite.extract.candidates import extract_candidates
from memwrite.extract.extraction import BatchExtraction, TurnExtraction
from memwrite.extract.stage import ExtractDeps, run
from memwrite.extract.verifier import verify_extraction
from memwrite.models import QueuedTurn, Role, Source
from memwrite.payloads import ExtractInput, Extractor
from memwrite.prompts.extract import BatchTurn
from memwrite.prompts.verify import render
from memwrite.reasons import Unverified, VerifierCheck
from tests.recorded_api import RecordedApi, haiku_cost

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
ON = VerifierConfig(enabled=True)
GARDEN_TURN = BatchTurn(
    turn_id="turn-1", role=Role.USER, text="I love your garden, the roses are huge!", timestamp=T0
)
CATS_TURN = BatchTurn(
    turn_id="turn-2",
    role=Role.USER,
    text="I'm allergic to cats with long fur, short-haired ones are fine.",
    timestamp=T0,
)


def verifier_for(api: RecordedApi) -> AnthropicVerifier:
    return AnthropicVerifier(
        ExtractConfig(),
        api_key="test-key",
        base_url="http://testserver",
        http_client=api.client(),
        max_retries=0,
    )


def candidate(attribute: str, value: str, turn: BatchTurn, importance: float = 0.5) -> Candidate:
    return Candidate(
        text=f"The user {attribute.replace('_', ' ')} {value}.",
        type=MemoryType.PREFERENCE,
        topic="interests",
        entity="user",
        attribute=attribute,
        value=value,
        predicate_is_stateful=False,
        importance=importance,
        confidence=0.9,
        grounded=True,
        quality=Quality(verdict="keep", reason="explicit statement"),
        search_questions=["What does the user like?", "Any allergies?", "What to avoid?"],
        source_turn_id=turn.turn_id,
    )


def llm_batch(*candidates: Candidate) -> BatchExtraction:
    turn_id = candidates[0].source_turn_id or ""
    return BatchExtraction((TurnExtraction(turn_id, Extractor.LLM, candidates),))


def test_a_supported_candidate_passes_and_its_call_is_paid_for() -> None:
    # Given a candidate the verifier confirms
    api = RecordedApi("verify_pass")
    allergy = candidate("is_allergic_to", "cats with long fur", CATS_TURN)
    # When the extraction is verified
    out = verify_extraction(llm_batch(allergy), [CATS_TURN], ON, verifier_for(api))
    # Then it is kept unchanged, after one call whose usage and cost join the batch's calls
    assert out.candidates == [allergy]
    (usage,) = out.llm_calls
    assert usage.cost_usd == pytest.approx(haiku_cost("verify_pass"))


def test_the_other_speakers_thing_is_dropped_with_the_failed_check() -> None:
    # Given a memory of the other speaker's garden
    api = RecordedApi("verify_drop_object")
    garden = candidate("likes", "the garden", GARDEN_TURN)
    # When it is verified
    out = verify_extraction(llm_batch(garden), [GARDEN_TURN], ON, verifier_for(api))
    # Then it is not kept, and the rejection names the check that failed
    assert out.candidates == []
    assert out.turns[0].rejected == ((garden, Unverified(check=VerifierCheck.OBJECT_IDENTITY)),)


def test_a_cut_value_is_corrected_from_the_turn() -> None:
    # Given an allergy cut short ("cats" for "cats with long fur")
    api = RecordedApi("verify_correct_completeness")
    cats = candidate("is_allergic_to", "cats", CATS_TURN)
    # When it is verified
    out = verify_extraction(llm_batch(cats), [CATS_TURN], ON, verifier_for(api))
    # Then the kept memory carries the whole value, everything else unchanged
    (corrected,) = out.candidates
    assert (corrected.value, corrected.text) == (
        "cats with long fur",
        "The user is allergic to cats with long fur.",
    )
    assert corrected.model_copy(update={"value": "cats", "text": cats.text}) == cats


def test_the_request_carries_the_prompt_the_eight_checks_and_the_schema() -> None:
    # Given a working API
    api = RecordedApi("verify_pass")
    cats = candidate("is_allergic_to", "cats", CATS_TURN)
    # When a candidate is verified
    verify_extraction(llm_batch(cats), [GARDEN_TURN, CATS_TURN], ON, verifier_for(api))
    # Then the request is the rendered prompt, with every turn of the batch and all eight checks
    (request,) = api.requests
    prompt = render(cats, [GARDEN_TURN, CATS_TURN])
    assert request["system"] == prompt.system
    assert request["messages"] == prompt.messages
    assert request["max_tokens"] == ON.max_output_tokens
    assert all(check.value in prompt.system for check in VerifierCheck)
    assert "turn-1" in prompt.messages[0]["content"]
    schema = request["output_config"]["format"]["schema"]
    assert set(schema["required"]) >= {"outcome", "failed_check", "reason"}


@pytest.mark.parametrize("first", ["verify_malformed", "verify_correct_value_not_in_text"])
def test_a_malformed_answer_or_invalid_correction_is_asked_again_once(first: str) -> None:
    # Given a truncated answer (or a correction whose text lacks its value), then a valid pass
    api = RecordedApi(first, "verify_pass")
    cats = candidate("is_allergic_to", "cats", CATS_TURN)
    # When it is verified
    out = verify_extraction(llm_batch(cats), [CATS_TURN], ON, verifier_for(api))
    # Then the retry decides, and both calls are paid for
    assert out.candidates == [cats]
    assert len(out.llm_calls) == 2


def test_an_answer_malformed_twice_fails_the_batch_visibly_with_its_cost() -> None:
    # Given an API that answers malformed twice
    api = RecordedApi("verify_malformed", "verify_malformed")
    cats = candidate("is_allergic_to", "cats", CATS_TURN)
    # When it is verified
    with pytest.raises(VerificationFailed) as failure:
        verify_extraction(llm_batch(cats), [CATS_TURN], ON, verifier_for(api))
    # Then the failure is raised (no silent pass or drop) and carries both paid calls
    assert len(failure.value.calls) == 2
    assert len(api.requests) == 2


@pytest.mark.parametrize(
    "config",
    [
        VerifierConfig(),  # off by default
        VerifierConfig(enabled=True, min_importance=0.8),  # below the importance threshold
        VerifierConfig(enabled=True, include_rule_candidates=False),  # rule-made
    ],
)
def test_candidates_the_config_does_not_want_checked_cost_no_call(config: VerifierConfig) -> None:
    # Given a rule-made candidate of importance 0.5 and a verifier that must not be asked
    api = RecordedApi()
    turn = BatchTurn(turn_id="t", role=Role.USER, text="I love jazz.", timestamp=T0)
    # When the turn is extracted with that verifier config
    out = extract_candidates(
        [turn],
        [],
        ExtractConfig(verifier=config),
        None,
        on_json_fail=lambda: None,
        verifier=verifier_for(api),
    )
    # Then the rules' memory is kept as made and no request was sent
    assert [c.value for c in out.candidates] == ["jazz"]
    assert api.requests == []
    assert out.llm_calls == ()


def test_a_tenant_turns_the_verifier_on_with_its_own_threshold() -> None:
    # Given a deployment with the verifier off and one tenant that wants it for important memories
    settings = Settings(
        tenants={"acme": TenantOverrides(verifier_enabled=True, verifier_min_importance=0.7)}
    )
    # When each tenant's effective config is read
    acme = settings.for_request("acme").extract.verifier
    other = settings.for_request("globex").extract.verifier
    # Then only that tenant verifies, from importance 0.7, and the deployment builds a verifier
    assert (acme.enabled, acme.min_importance) == (True, 0.7)
    assert other.enabled is False
    assert settings.verifier_wanted() is True
    assert Settings().verifier_wanted() is False


def test_the_verifiers_cost_reaches_the_trace_of_a_rules_only_batch() -> None:
    # Given a turn the rules handle alone, with the verifier on
    api = RecordedApi("verify_pass")
    deps = ExtractDeps(
        spans=InMemorySpanStore(),
        metrics=CountingMetrics(),
        session_log=InMemorySessionLog(),
        llm=None,
        verifier=verifier_for(api),
    )
    turn = QueuedTurn(
        tenant="acme",
        user_id="dana",
        session_id="s1",
        agent_id=None,
        trace_id="trace-1",
        turn_id="turn-0",
        role=Role.USER,
        text="I'm allergic to peanuts.",
        observed_at=T0,
        source=Source.USER_EXPLICIT,
    )
    # When the stage runs
    out = run(ExtractInput(turns=[turn]), PipelineConfig(extract=ExtractConfig(verifier=ON)), deps)
    # Then the memory passes, and the turn's span carries the verifier call and its cost
    assert [c.value for c in out.candidates] == ["peanuts"]
    (span,) = deps.spans.spans_of("acme", "trace-1")
    assert span.llm is not None
    assert span.llm.calls == 1
    assert span.llm.cost_usd == pytest.approx(haiku_cost("verify_pass"))


def test_the_verifier_adapter_does_not_import_the_sdk_at_module_import() -> None:
    # Given the verifier modules
    # When they are imported in a fresh interpreter
    import subprocess
    import sys

    code = (
        "import sys, memwrite.extract.verifier, memwrite.adapters.anthropic.verifier;"
        "print('anthropic' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # Then the ~3 s SDK import is left to the first call
    assert done.stdout.strip() == "False"
