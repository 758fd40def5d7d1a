"""The extract stage on batches: rules first, the LLM for the rest, spans for everything."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from memwrite.adapters.in_memory import (
    CountingMetrics,
    InMemorySessionLog,
    InMemorySpanStore,
    InMemoryTurnLedger,
)
from memwrite.config.settings import EpisodesConfig, ExtractConfig, PipelineConfig
from memwrite.costs.usage import LlmUsage
from memwrite.errors import BudgetWait, ExtractionFailed, MalformedLlmOutput
from memwrite.extract.stage import ExtractDeps, run
from memwrite.model_ports import LlmCall
from memwrite.models import QueuedTurn, Role, Source, SpanResult
from memwrite.payloads import ExtractInput, Extractor, ExtractOutput
from memwrite.ports import TraceRecord
from memwrite.prompts import PromptMessage
from memwrite.prompts.extract import ExtractionResult
from memwrite.reasons import DeferredModelFailed, DeferredNoLLM, QualityDiscard, UserErased
from memwrite.records.episode import Episode, EpisodeStatus

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def extract_batch(
    turns: list[QueuedTurn], config: ExtractConfig, deps: ExtractDeps
) -> ExtractOutput:
    """The extract stage's `run` on one session's turns."""
    return run(ExtractInput(turns=turns), PipelineConfig(extract=config), deps)


def queued(
    text: str,
    minute: int = 0,
    session: str = "s1",
    turn_id: str | None = None,
    user: str = "dana",
) -> QueuedTurn:
    return QueuedTurn(
        tenant="acme",
        user_id=user,
        session_id=session,
        agent_id=None,
        trace_id="trace-1",
        turn_id=turn_id or f"turn-{minute}",
        role=Role.USER,
        text=text,
        observed_at=T0 + timedelta(minutes=minute),
        source=Source.USER_EXPLICIT,
    )


NOW = 1_772_000_000.0  # the stage's clock: when turns are logged and the log is read


class Deps(ExtractDeps):
    """ExtractDeps with the concrete in-memory adapters, so tests can read them back."""

    spans: InMemorySpanStore
    metrics: CountingMetrics
    session_log: InMemorySessionLog


def offline_deps() -> Deps:
    return Deps(
        spans=InMemorySpanStore(),
        metrics=CountingMetrics(),
        session_log=InMemorySessionLog(),
        llm=None,
        clock=lambda: NOW,
    )


def test_turn_fully_handled_by_rules_needs_no_llm() -> None:
    # Given a simple first-person claim, offline
    deps = offline_deps()
    # When the batch is extracted
    out = extract_batch([queued("I live in Berlin.")], ExtractConfig(), deps)
    # Then the rules produced the memory and the turn span passes
    assert out.turns[0].extractor is Extractor.RULES
    assert [(c.attribute, c.value) for c in out.candidates] == [("lives_in", "Berlin")]
    spans = deps.spans.spans_of("acme", "trace-1")
    assert [(s.stage, s.result, s.reason) for s in spans] == [("extract", SpanResult.PASS, None)]


def test_offline_turn_the_rules_cannot_handle_is_deferred_not_dropped() -> None:
    # Given a turn with knowledge the rules do not understand, and no LLM
    deps = offline_deps()
    turn = queued("Our team is migrating the billing service to Rust over the summer.")
    # When extracted
    out = extract_batch([turn], ExtractConfig(), deps)
    # Then it is recorded as DeferredNoLLM (span and metric), not silently empty
    assert out.turns[0].extractor is Extractor.DEFERRED
    spans = deps.spans.spans_of("acme", "trace-1")
    assert spans[0].reason == DeferredNoLLM()
    assert deps.metrics.counts[("extract", "reject", "DeferredNoLLM")] == 1
    # And a deferred turn is not a pre-filter escape: no one judged it empty yet
    assert deps.metrics.events[("extract", "prefilter.escaped")] == 0


def test_partially_understood_turn_is_kept_whole_as_an_episode() -> None:
    # Given a turn the rules understand only in part, offline
    deps = offline_deps()
    turn = queued("I'm allergic to peanuts, and the quarterly audit slipped to late May.")
    # When extracted
    out = extract_batch([turn], ExtractConfig(), deps)
    # Then no candidate of the deferred turn goes on: the whole turn is a pending episode
    assert out.turns[0].extractor is Extractor.DEFERRED
    assert out.candidates == []
    span = deps.spans.spans_of("acme", "trace-1")[0]
    assert (span.result, span.reason) == (SpanResult.REJECT, DeferredNoLLM())
    episode = deps.session_log.episodes[turn.turn_id]
    assert episode.status is EpisodeStatus.PENDING
    assert episode.turn == turn
    assert episode.deferred_reason == {"type": "DeferredNoLLM"}


def test_with_episodes_off_the_rule_candidates_of_a_deferred_turn_go_on() -> None:
    # Given episodes switched off
    deps = offline_deps()
    config = PipelineConfig(episodes=EpisodesConfig(keep="off"))
    turn = queued("I'm allergic to peanuts, and the quarterly audit slipped to late May.")
    # When extracted
    out = run(ExtractInput(turns=[turn]), config, deps)
    # Then the old behaviour: what the rules found goes on, and nothing is kept
    assert [c.value for c in out.candidates] == ["peanuts"]
    assert deps.session_log.episodes == {}


def test_discarded_candidates_get_their_own_spans() -> None:
    # Given a hypothetical claim (the rules keep it, marked discard)
    deps = offline_deps()
    out = extract_batch(
        [queued("If I lived in Paris I would cycle everywhere.")], ExtractConfig(), deps
    )
    # Then no candidate goes on, and the rejection is visible with its reason
    assert out.candidates == []
    spans = deps.spans.spans_of("acme", "trace-1")
    candidate_spans = [s for s in spans if s.kind == "candidate"]
    assert [s.reason for s in candidate_spans] == [QualityDiscard(reason="hypothetical")]
    # And the turn counts as one the pre-filter let through for nothing
    assert deps.metrics.events[("extract", "prefilter.escaped")] == 1


def test_batch_turns_are_logged_as_context_for_later_batches() -> None:
    # Given one batch extracted
    deps = offline_deps()
    extract_batch([queued("I live in Berlin.", minute=0)], ExtractConfig(), deps)
    # When the session log is read for a later turn
    later = queued("I work at SAP.", minute=5)
    earlier = deps.session_log.recent("acme", "dana", "s1", "9999", limit=20, now=NOW)
    # Then the earlier turn is there, and re-running the same batch does not duplicate it
    extract_batch([queued("I live in Berlin.", minute=0)], ExtractConfig(), deps)
    assert [
        t.text for t in deps.session_log.recent("acme", "dana", "s1", "9999", limit=20, now=NOW)
    ] == ["I live in Berlin."]
    assert [t.turn_id for t in earlier] == ["turn-0"]
    assert later.turn_id == "turn-5"


def test_another_user_of_the_session_is_not_context() -> None:
    # Given dana's batch extracted in session s1
    deps = offline_deps()
    extract_batch([queued("I live in Berlin.", minute=0)], ExtractConfig(), deps)
    # When sam, in the same session, has a later batch extracted
    extract_batch(
        [queued("I work at SAP.", minute=5, turn_id="sam-5", user="sam")], ExtractConfig(), deps
    )
    # Then each user's context holds only their own turns
    assert [
        t.text for t in deps.session_log.recent("acme", "sam", "s1", "9999", limit=20, now=NOW)
    ] == ["I work at SAP."]
    assert [
        t.text for t in deps.session_log.recent("acme", "dana", "s1", "9999", limit=20, now=NOW)
    ] == ["I live in Berlin."]


def test_a_batch_holds_one_session() -> None:
    with pytest.raises(ValidationError, match="one tenant, user and session"):
        ExtractInput(turns=[queued("I live in Berlin."), queued("I live in Rome.", session="s2")])


class ScriptedLlm:
    """Our `ExtractionLlm` port answering from a script (the SDK itself is tested against
    recorded HTTP responses in test_llm_extractor.py)."""

    def __init__(self, answers: list[list[dict[str, object]] | Exception]) -> None:
        self.answers = answers
        self.prompts: list[str] = []

    def extract(self, system: str, messages: Sequence[PromptMessage], model: str) -> LlmCall:
        self.prompts.append(str(messages[-1]["content"]))
        answer = self.answers.pop(0)
        usage = LlmUsage(model=model, input_tokens=1_000, output_tokens=200, cost_usd=0.002)
        if isinstance(answer, Exception):
            raise MalformedLlmOutput(str(answer), usage)
        result = ExtractionResult.model_validate({"candidates": answer})
        return LlmCall(result=result, usage=usage)

    def budget_wait_s(self, prompt_chars: int, model: str, within_s: float | None = None) -> float:
        return 0.0


RUST = {
    "text": "The user's team is migrating the billing service to Rust.",
    "type": "fact",
    "topic": "work",
    "entity": "user",
    "attribute": "team_migrating_to",
    "value": "Rust",
    "predicate_is_stateful": True,
    "importance": 0.6,
    "confidence": 0.9,
    "grounded": True,
    "quality": {"verdict": "keep", "reason": "explicit statement"},
    "search_questions": [
        "What is the user's team migrating to?",
        "Which language is the billing service moving to?",
        "What is the user's team working on?",
    ],
    "source_turn_id": "T2",
}


def test_only_turns_beyond_the_rules_cost_an_llm_call_and_share_one() -> None:
    # Given a batch with a rule-covered turn and a turn the rules cannot handle
    llm = ScriptedLlm([[RUST]])
    deps = offline_deps()
    deps.llm = llm
    batch = [
        queued("I live in Berlin.", minute=0),
        queued("Our team is migrating the billing service to Rust this summer.", minute=1),
    ]
    # When the batch is extracted
    out = extract_batch(batch, ExtractConfig(), deps)
    # Then one call covered the batch, each turn kept its own candidates and extractor
    assert len(llm.prompts) == 1
    assert [(t.turn_id, t.extractor) for t in out.turns] == [
        ("turn-0", Extractor.RULES),
        ("turn-1", Extractor.LLM),
    ]
    assert {(c.source_turn_id, c.value) for c in out.candidates} == {
        ("turn-0", "Berlin"),
        ("turn-1", "Rust"),
    }
    # And the call's cost is on the trace, once
    spans = deps.spans.spans_of("acme", "trace-1")
    assert sum(s.llm.calls for s in spans if s.llm) == 1
    assert sum(s.llm.cost_usd for s in spans if s.llm) == pytest.approx(0.002)


def test_rules_only_batch_never_calls_the_llm() -> None:
    llm = ScriptedLlm([])
    deps = offline_deps()
    deps.llm = llm
    extract_batch(
        [queued("I live in Berlin."), queued("I'm vegan.", minute=1)], ExtractConfig(), deps
    )
    assert llm.prompts == []


def test_malformed_twice_keeps_the_batch_as_pending_episodes_visibly() -> None:
    # Given a model that answers malformed JSON twice
    llm = ScriptedLlm([ValueError("not json"), ValueError("still not json")])
    deps = offline_deps()
    deps.llm = llm
    batch = [
        queued("Our team is migrating the billing service to Rust this summer.", minute=0),
        queued("The audit moved to May because finance is short-staffed.", minute=1),
    ]
    # When extracted
    out = extract_batch(batch, ExtractConfig(), deps)
    # Then no memory, but an error span with a typed reason for every turn...
    assert out.candidates == []
    spans = deps.spans.spans_of("acme", "trace-1")
    assert [(s.item_id, s.result, s.reason) for s in spans] == [
        ("turn-0", SpanResult.ERROR, DeferredModelFailed(error="ExtractionFailed")),
        ("turn-1", SpanResult.ERROR, DeferredModelFailed(error="ExtractionFailed")),
    ]
    assert deps.metrics.events[("extract", "extraction_json_fail")] == 2
    # ...and every turn kept as a pending episode (never a silent drop, never the DLQ)
    assert sorted(deps.session_log.episodes) == ["turn-0", "turn-1"]
    assert {e.status for e in deps.session_log.episodes.values()} == {EpisodeStatus.PENDING}


def test_malformed_twice_with_episodes_off_fails_the_batch_visibly() -> None:
    # Given a model that answers malformed JSON twice, and episodes off
    llm = ScriptedLlm([ValueError("not json"), ValueError("still not json")])
    deps = offline_deps()
    deps.llm = llm
    batch = [queued("Our team is migrating the billing service to Rust this summer.")]
    config = PipelineConfig(episodes=EpisodesConfig(keep="off"))
    # When extracted / Then the stage raises (Step Functions Catch -> DLQ)...
    with pytest.raises(ExtractionFailed):
        run(ExtractInput(turns=batch), config, deps)
    # ...after an error span, and nothing was logged as extracted context
    spans = deps.spans.spans_of("acme", "trace-1")
    assert [(s.item_id, s.result) for s in spans] == [("turn-0", SpanResult.ERROR)]
    assert deps.session_log.recent("acme", "dana", "s1", "9999", limit=20, now=NOW) == []


def test_earlier_batches_are_the_context_of_later_ones() -> None:
    llm = ScriptedLlm([[], []])
    deps = offline_deps()
    deps.llm = llm
    extract_batch(
        [queued("We adopted a greyhound named Biscuit last week.", minute=0)], ExtractConfig(), deps
    )
    extract_batch(
        [queued("He sleeps about twenty hours a day, honestly.", minute=5)], ExtractConfig(), deps
    )
    assert "Biscuit" in llm.prompts[1]


def test_a_turn_whose_user_was_erased_in_flight_is_neither_logged_nor_passed_on() -> None:
    # Given a batch holding a turn of an erased request (its trace gone from the ledger) and a
    # turn of a later request of the same session (its trace recorded)
    ledger = InMemoryTurnLedger()
    ledger.put_trace(
        TraceRecord("trace-2", "acme", "dana", "s1", None, "user_explicit", "", ("turn-5",))
    )
    deps = Deps(
        spans=InMemorySpanStore(),
        metrics=CountingMetrics(),
        session_log=InMemorySessionLog(ledger),
        llm=None,
        clock=lambda: NOW,
    )
    erased = queued("I live in Berlin.", minute=0)
    later = queued("I work at SAP.", minute=5).model_copy(update={"trace_id": "trace-2"})
    # When the batch is extracted
    out = extract_batch([erased, later], ExtractConfig(), deps)
    # Then only the later turn is logged and passed on
    logged = deps.session_log.recent("acme", "dana", "s1", "9999", limit=20, now=NOW)
    assert [t.turn_id for t in logged] == [later.turn_id]
    assert [t.turn_id for t in out.turns] == [later.turn_id]
    assert [c.value for c in out.candidates] == ["SAP"]
    # And the erased turn is rejected as UserErased, visibly (span and metric)
    spans = deps.spans.spans_of("acme", "trace-1")
    assert [(s.kind, s.result, s.reason) for s in spans] == [
        ("turn", SpanResult.REJECT, UserErased())
    ]
    assert deps.metrics.counts[("extract", "reject", "UserErased")] == 1


class WritesCounted(InMemorySessionLog):
    """The in-memory session log, counting its writes."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def append_batch(
        self,
        turns: Sequence[QueuedTurn],
        now: float,
        retention_secs: int,
        episodes: Mapping[str, Episode] | None = None,
    ) -> frozenset[str]:
        self.writes += 1
        return super().append_batch(turns, now, retention_secs, episodes)


def test_a_batch_is_logged_in_one_write_with_its_episodes() -> None:
    # Given a batch of three turns offline, two of which the rules cannot handle
    deps = offline_deps()
    deps.session_log = log = WritesCounted()
    batch = [
        queued("I live in Berlin.", minute=0),
        queued("Our team is migrating the billing service to Rust.", minute=1),
        queued("The offsite moved to the lake house near Potsdam.", minute=2),
    ]
    # When it is extracted
    extract_batch(batch, ExtractConfig(), deps)
    # Then all three turns are in the session log after one write, the two deferred with
    # their episodes
    assert log.writes == 1
    logged = log.recent("acme", "dana", "s1", "~", limit=20, now=NOW)
    assert [turn.turn_id for turn in logged] == ["turn-0", "turn-1", "turn-2"]
    assert sorted(log.episodes) == ["turn-1", "turn-2"]


class LineLlm:
    """An `ExtractionLlm` whose budget is empty: each ask takes the next place in the line
    (20 s apart from 20 s on); keeps how long each asker said it could still wait."""

    def __init__(self) -> None:
        self.within: list[float | None] = []

    def extract(self, system: str, messages: Sequence[PromptMessage], model: str) -> LlmCall:
        raise AssertionError("no call while the budget is empty")

    def budget_wait_s(self, prompt_chars: int, model: str, within_s: float | None = None) -> float:
        self.within.append(within_s)
        return 20.0 * sum(1 for w in self.within if w is not None)


@pytest.mark.parametrize(
    ("delay_s", "wait_s"), [(0.0, 1), (0.4, 1), (1.0, 1), (2.41, 3), (119.99, 120)]
)
def test_a_wait_for_the_budget_is_said_in_whole_seconds_never_shorter(
    delay_s: float, wait_s: int
) -> None:
    # Given the delay to a batch's place in line / When it waits for the budget
    wait = BudgetWait(delay_s, 12.04)
    # Then its message gives the wait rounded up to whole seconds, at least one (a Step
    # Functions Wait takes a positive integer), beside the exact delay the local queue uses
    assert json.loads(str(wait)) == {
        "wait_s": wait_s,
        "delay_s": round(delay_s, 1),
        "waited_s": 12.0,
    }
    assert (wait.wait_s, wait.delay_s) == (wait_s, delay_s)


def test_waiting_batches_are_put_back_each_until_its_place_in_line() -> None:
    # Given an empty budget, and three live batches accepted 30 s ago
    llm = LineLlm()
    deps = offline_deps()
    deps.llm = llm
    accepted = datetime.fromtimestamp(NOW - 30, UTC)
    config = PipelineConfig()
    waits, messages = [], []
    for user in ("dana", "alex", "kim"):
        turn = queued("We kept talking about the quarterly plan.", user=user)
        payload = ExtractInput(turns=[turn.model_copy(update={"accepted_at": accepted})])
        # When each is extracted
        with pytest.raises(BudgetWait) as waited:
            run(payload, config, deps)
        waits.append(waited.value.delay_s)
        messages.append(json.loads(str(waited.value)))
    # Then each goes back to the queue until its own place (20, 40, 60 s), not all together,
    # having said it may wait what is left of max_wait_s
    assert waits == [20.0, 40.0, 60.0]
    # And its error says so in a JSON message the AWS state machine reads (its Wait counts
    # whole seconds), with how long the batch has waited since its turns were accepted
    assert messages == [
        {"wait_s": place, "delay_s": float(place), "waited_s": 30.0} for place in (20, 40, 60)
    ]
    assert llm.within == [config.model.max_wait_s - 30] * 3
    # And nothing was logged for them yet
    assert deps.session_log.turns == {}
