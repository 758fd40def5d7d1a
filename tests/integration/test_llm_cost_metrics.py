"""What the model calls cost, as the dashboard and the trace show it: every stage that calls a
model prints `llm.calls`, `llm.input_tokens`, `llm.output_tokens` and `llm.cost_usd` EMF lines
(by Stage and model family), and its spans carry the same usage, so `GET /v1/traces/{id}`'s
`cost_usd` and the dashboard's LLM cost widget agree. Model answers are recorded replies served
to the real anthropic client (httpx2 mock transport)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from memwrite.adapters.anthropic.dedupe_judge import AnthropicDedupeJudge
from memwrite.adapters.anthropic.extractor import AnthropicExtractorClient
from memwrite.adapters.anthropic.questions import AnthropicQuestions
from memwrite.adapters.anthropic.resolve_judge import AnthropicResolveJudge
from memwrite.adapters.anthropic.verifier import AnthropicVerifier
from memwrite.adapters.aws.emf_metrics import EmfMetrics
from memwrite.adapters.in_memory import (
    InMemoryEntityStore,
    InMemorySessionLog,
    InMemorySpanStore,
    InMemoryTurnLedger,
)
from memwrite.claims.candidate import Candidate
from memwrite.claims.entities import entity_id_for
from memwrite.config.settings import (
    DedupeConfig,
    EpisodesConfig,
    ExtractConfig,
    PipelineConfig,
    VerifierConfig,
)
from memwrite.conflict import stage as conflict
from memwrite.dedupe import stage as dedupe
from memwrite.errors import IndexUnavailable, LlmUnavailable
from memwrite.extract import stage as extract
from memwrite.extract.rules import extract_with_rules
from memwrite.hype import stage as hype
from memwrite.models import QueuedTurn, Role, Source
from memwrite.payloads import (
    ExtractedTurn,
    ExtractInput,
    Extractor,
    ExtractOutput,
    ItemsPayload,
    PipelineItem,
)
from memwrite.persist import stage as persist
from memwrite.ports import MemoryStore, TraceRecord
from memwrite.read.traces import TraceStatus, get_trace
from memwrite.resolve_refs import stage as resolve
from memwrite.stages import STAGES
from memwrite.wiring import build_memory_store, build_pre_filter_function_deps, build_stage_deps
from memwrite_local.runtime.aws import LocalAws
from tests import patels as patel_case
from tests.embedders import FixedSimilarityEmbedder
from tests.emf import emf_metrics, metric_total
from tests.recorded_api import RecordedApi, haiku_cost, recorded
from tests.reliability.test_index_outage import Outage
from tests.sources import record_trace

TENANT, USER = "acme", "u1"
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
HAIKU = "claude-haiku-4-5"  # the Model dimension: the price table's family, not the dated id
EXTRACT = ExtractConfig()
# 0.86 sits in the dedupe judge's band: below merge (0.92), above distinct (0.80).
CONFIG = PipelineConfig(
    extract=ExtractConfig(verifier=VerifierConfig(enabled=True)),
    dedupe=DedupeConfig(dedupe_merge_threshold=0.92, dedupe_distinct_threshold=0.80),
)
IN_BAND = FixedSimilarityEmbedder(0.86)
# Beyond the rules: extracting it takes the model (recorded: Lisbon, cilantro).
LLM_TURN = "Since last month Lisbon has been home, and cilantro ruins every dish for me."


@pytest.fixture
def printed_metrics(monkeypatch: pytest.MonkeyPatch) -> EmfMetrics:
    """The Lambdas' metrics sink, printing its EMF lines as in Lambda."""
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    return EmfMetrics()


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> Iterator[MemoryStore]:
    with LocalAws():
        monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
        # The traces of the turns written below (`payload_of`), recorded as ingest records them.
        ledger = build_pre_filter_function_deps().ingest.ledger
        for turn in ("t1", "t2", "t3", "h1"):
            record_trace(ledger, TENANT, USER, f"trace-{turn}")
        yield build_memory_store()


def recorded_client(api: RecordedApi) -> dict[str, Any]:
    return {
        "api_key": "test-key",
        "base_url": "http://testserver",
        "http_client": api.client(),
        "max_retries": 0,
    }


def tokens(*names: str) -> tuple[int, int]:
    usages = [recorded(name)["usage"] for name in names]
    return sum(u["input_tokens"] for u in usages), sum(u["output_tokens"] for u in usages)


def assert_dashboard_shows(out: str, stage: str, *replies: str) -> None:
    """The stage's LLM lines add up to the recorded replies' calls, tokens and cost."""
    metrics = emf_metrics(out)
    dims = {"Stage": stage, "Model": HAIKU}
    assert metric_total(metrics, "llm.calls", **dims) == len(replies)
    assert (
        metric_total(metrics, "llm.input_tokens", **dims),
        metric_total(metrics, "llm.output_tokens", **dims),
    ) == tokens(*replies)
    expected = sum(haiku_cost(name) for name in replies)
    assert metric_total(metrics, "llm.cost_usd", **dims) == pytest.approx(expected)


def trace_of(
    trace_id: str, spans: InMemorySpanStore, tenant: str = TENANT, user: str = USER
) -> Any:
    """`GET /v1/traces/{trace_id}` over `spans` (its one turn: the trace id's tail)."""
    turn = trace_id.removeprefix("trace-")
    ledger = InMemoryTurnLedger()
    ledger.put_trace(TraceRecord(trace_id, tenant, user, "s1", None, "user_explicit", "", (turn,)))
    return get_trace(tenant, trace_id, ledger, spans)


def malformed_on_spans(trace: Any) -> dict[str, int]:
    return {span.stage: span.llm.malformed for span in trace.spans if span.llm}


def queued_turn(tenant: str, user: str, turn_id: str, text: str) -> QueuedTurn:
    return QueuedTurn(
        tenant=tenant,
        user_id=user,
        session_id="s1",
        agent_id=None,
        trace_id=f"trace-{turn_id}",
        turn_id=turn_id,
        role=Role.USER,
        text=text,
        observed_at=T0,
        source=Source.USER_EXPLICIT,
    )


def payload_of(candidate: Candidate, turn: str, day: int) -> ItemsPayload:
    observed = T0 + timedelta(days=day)
    item = PipelineItem(
        candidate=candidate,
        entity_id=entity_id_for(TENANT, USER, "user"),
        turn_id=turn,
        trace_id=f"trace-{turn}",
        observed_at=observed,
    )
    extracted = ExtractedTurn(
        turn_id=turn, trace_id=f"trace-{turn}", observed_at=observed, extractor=Extractor.RULES
    )
    return ItemsPayload(
        tenant=TENANT,
        user_id=USER,
        session_id="s1",
        source="user_explicit",
        turns=[extracted],
        items=[item],
    )


def rules_payload(text: str, turn: str, day: int) -> ItemsPayload:
    (candidate,) = extract_with_rules(text).candidates
    return payload_of(candidate, turn, day)


def write(payload: ItemsPayload, store: MemoryStore, spans: InMemorySpanStore) -> ItemsPayload:
    """Dedupe, conflict and persist without a judge (the call-free path)."""
    metrics = EmfMetrics()
    deduped = dedupe.run(payload, CONFIG, dedupe.DedupeDeps(store, IN_BAND, spans, metrics))
    decided = conflict.run(deduped, CONFIG, conflict.ConflictDeps(store, spans, metrics))
    return persist.run(decided, CONFIG, persist.PersistDeps(store, IN_BAND, spans, metrics))


def test_the_verifier_calls_of_extract_are_on_the_dashboard_and_the_trace(
    printed_metrics: EmfMetrics, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a turn the rules handle and the verifier on, over a recorded pass
    api = RecordedApi("verify_pass")
    spans = InMemorySpanStore()
    deps = extract.ExtractDeps(
        spans=spans,
        metrics=printed_metrics,
        session_log=InMemorySessionLog(),
        llm=None,
        verifier=AnthropicVerifier(EXTRACT, **recorded_client(api)),
    )
    turn = queued_turn(TENANT, USER, "x1", "I'm allergic to peanuts.")
    capsys.readouterr()
    # When the extract stage runs
    extract.run(ExtractInput(turns=[turn]), CONFIG, deps)
    # Then the dashboard's extract LLM lines show the one call, its tokens and its cost
    assert_dashboard_shows(capsys.readouterr().out, "extract", "verify_pass")
    # And the trace charges the same cost
    trace = trace_of("trace-x1", spans)
    assert (trace.llm_calls, trace.cost_usd) == (1, pytest.approx(haiku_cost("verify_pass")))


def _mr_patel_to_resolve() -> tuple[InMemoryEntityStore, InMemorySessionLog, ExtractOutput]:
    """Two known Patels, and extract's output naming "Mr. Patel": resolve needs its judge."""
    entities = InMemoryEntityStore()
    for entity in patel_case.patels():
        entities.put(entity, expected_version=None, source_trace_ids=())
    log = InMemorySessionLog()
    turn = queued_turn(patel_case.TENANT, patel_case.USER, "turn-1", patel_case.TURN)
    log.append_batch([turn], now=T0.timestamp(), retention_secs=3_600)
    extracted = ExtractOutput(
        tenant=patel_case.TENANT,
        user_id=patel_case.USER,
        session_id="s1",
        source="user_explicit",
        turns=[
            ExtractedTurn(
                turn_id="turn-1", trace_id="trace-turn-1", observed_at=T0, extractor=Extractor.LLM
            )
        ],
        candidates=[patel_case.leave_claim()],
    )
    return entities, log, extracted


def test_the_resolve_judge_call_is_on_the_dashboard(
    printed_metrics: EmfMetrics, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given two known Patels, so "Mr. Patel" needs the judge, and a recorded decision
    entities, log, extracted = _mr_patel_to_resolve()
    spans = InMemorySpanStore()
    judge = AnthropicResolveJudge(EXTRACT, **recorded_client(RecordedApi("resolve_decision")))
    deps = resolve.ResolveDeps(entities, log, spans, printed_metrics, judge, T0.timestamp)
    capsys.readouterr()
    # When resolve_refs runs
    resolve.run(extracted, CONFIG, deps)
    # Then the dashboard's resolve_refs LLM lines show the judge's call, and the trace its cost
    assert_dashboard_shows(capsys.readouterr().out, "resolve_refs", "resolve_decision")
    trace = trace_of("trace-turn-1", spans, patel_case.TENANT, patel_case.USER)
    assert trace.cost_usd == pytest.approx(haiku_cost("resolve_decision"))


def test_dedupe_and_persist_judge_calls_reach_the_dashboard_and_the_trace(
    store: MemoryStore, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given "lives in Berlin" stored, and a candidate in the judge's band
    spans = InMemorySpanStore()
    write(rules_payload("I live in Berlin.", "t1", day=0), store, spans)
    # and a judge whose answers are twice malformed (paid, asked again), then same=true
    api = RecordedApi("dedupe_malformed", "dedupe_same", "dedupe_malformed", "dedupe_same")
    judge = AnthropicDedupeJudge(EXTRACT, **recorded_client(api))
    metrics = EmfMetrics()
    capsys.readouterr()
    # When dedupe and conflict decide the candidate, another writer moves the row underneath
    # (a move to Lisbon), and persist has to decide again with the judge
    deduped = dedupe.run(
        rules_payload("I live in Berlin, Germany.", "t2", day=3),
        CONFIG,
        dedupe.DedupeDeps(store, IN_BAND, spans, metrics, judge),
    )
    decided = conflict.run(deduped, CONFIG, conflict.ConflictDeps(store, spans, metrics))
    dedupe_out = capsys.readouterr().out
    write(rules_payload("I moved to Lisbon.", "t3", day=5), store, spans)
    capsys.readouterr()
    persist.run(decided, CONFIG, persist.PersistDeps(store, IN_BAND, spans, metrics, judge=judge))
    persist_out = capsys.readouterr().out
    # Then the dashboard shows each stage's two calls (the malformed one too) and its malformed
    # answer, on lines of its own
    for stage, out in (("dedupe", dedupe_out), ("persist", persist_out)):
        assert_dashboard_shows(out, stage, "dedupe_malformed", "dedupe_same")
        assert metric_total(emf_metrics(out), "dedupe_json_fail", Stage=stage) == 1
    # And the trace of the candidate charges all four calls, as the dashboard does
    trace = trace_of("trace-t2", spans)
    expected = 2 * (haiku_cost("dedupe_malformed") + haiku_cost("dedupe_same"))
    assert (trace.llm_calls, trace.cost_usd) == (4, pytest.approx(expected))
    # And each stage's span says which of its calls answered malformed, as its metric does
    assert malformed_on_spans(trace) == {"dedupe": 1, "persist": 1}
    # And the call-free writes cost nothing anywhere
    assert trace_of("trace-t1", spans).cost_usd == 0


def test_hype_question_calls_reach_the_dashboard_and_the_trace(
    store: MemoryStore, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a memory written without search questions (so HyPE asks the model for them)
    (candidate,) = extract_with_rules("I live in Porto.").candidates
    unasked = candidate.model_copy(update={"search_questions": []})
    spans = InMemorySpanStore()
    write(payload_of(unasked, "h1", day=0), store, spans)
    _, deps = build_stage_deps("hype")
    api = RecordedApi("hype_questions")
    deps = replace(deps, spans=spans, questions=AnthropicQuestions(EXTRACT, **recorded_client(api)))
    capsys.readouterr()
    # When its outbox row is indexed
    (change,) = deps.outbox.pending(10)
    indexed = hype.run(change, CONFIG, deps)
    # Then the model's questions were indexed, and the dashboard shows the call and its cost
    assert indexed.questions == recorded_questions()
    assert_dashboard_shows(capsys.readouterr().out, "hype", "hype_questions")
    # And the memory's trace charges it
    trace = trace_of("trace-h1", spans)
    assert (trace.llm_calls, trace.cost_usd) == (1, pytest.approx(haiku_cost("hype_questions")))


def recorded_questions() -> list[str]:
    answer: list[str] = json.loads(recorded("hype_questions")["content"][0]["text"])["questions"]
    return answer


def test_the_stages_with_llm_widgets_are_the_stages_covered_here() -> None:
    # Given the stages the dashboard draws LLM widgets for (`calls_model`)
    flagged = {stage.name for stage in STAGES if stage.calls_model}
    # Then each is one whose cost lines and spans this module checks
    assert flagged == {"extract", "resolve_refs", "dedupe", "persist", "hype"}


# A paid call, then a failure: the answers already received were paid for, so the failed
# attempt's error span and `llm.*` lines charge them; the retry's span replaces that error span
# and keeps its cost, so each attempt is counted once on the trace as on the dashboard.
OVERLOADED = ("error_overloaded", 529)  # the SDK's retries spent (max_retries=0): LlmUnavailable


def assert_trace_charges(trace: Any, *replies: str) -> None:
    """The trace's calls and cost are exactly the paid `replies`, each once."""
    assert (trace.llm_calls, trace.cost_usd) == (
        len(replies),
        pytest.approx(sum(haiku_cost(name) for name in replies)),
    )


def error_reasons(trace: Any, stage: str) -> list[str]:
    return [
        span.reason.type
        for span in trace.spans
        if span.stage == stage and span.result == "error" and span.reason
    ]


def test_an_extraction_that_fails_after_a_paid_answer_charges_it_and_its_retry_once_each(
    printed_metrics: EmfMetrics, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a turn beyond the rules, and a model that answers malformed (paid), is then
    # overloaded, and answers well on the redelivery
    api = RecordedApi("extract_truncated", OVERLOADED, "extract_valid")
    spans = InMemorySpanStore()
    deps = extract.ExtractDeps(
        spans=spans,
        metrics=printed_metrics,
        session_log=InMemorySessionLog(),
        llm=AnthropicExtractorClient(EXTRACT, **recorded_client(api)),
    )
    turn = queued_turn(TENANT, USER, "x2", LLM_TURN)
    # (episodes off: the failure goes to Step Functions' Retry rather than to an episode)
    config = PipelineConfig(episodes=EpisodesConfig(keep="off"))
    capsys.readouterr()
    # When the extract stage fails on the overload
    with pytest.raises(LlmUnavailable):
        extract.run(ExtractInput(turns=[turn]), config, deps)
    # Then its error span and its dashboard lines charge the malformed answer
    trace = trace_of("trace-x2", spans)
    assert trace.status is TraceStatus.FAILED
    assert error_reasons(trace, "extract") == ["ExtractionError"]
    assert_trace_charges(trace, "extract_truncated")
    assert_dashboard_shows(capsys.readouterr().out, "extract", "extract_truncated")
    # And when the redelivery succeeds, the trace charges both attempts, once each
    extract.run(ExtractInput(turns=[turn]), config, deps)
    retried = trace_of("trace-x2", spans)
    assert retried.status is not TraceStatus.FAILED
    assert_trace_charges(retried, "extract_truncated", "extract_valid")
    assert_dashboard_shows(capsys.readouterr().out, "extract", "extract_valid")


def test_a_resolve_judge_that_fails_after_a_paid_answer_charges_it_and_its_retry_once_each(
    printed_metrics: EmfMetrics, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given "Mr. Patel" between two known Patels, and a judge that answers malformed (paid), is
    # then overloaded, and decides on the retry
    entities, log, extracted = _mr_patel_to_resolve()
    spans = InMemorySpanStore()
    api = RecordedApi("resolve_malformed", OVERLOADED, "resolve_decision")
    judge = AnthropicResolveJudge(EXTRACT, **recorded_client(api))
    deps = resolve.ResolveDeps(entities, log, spans, printed_metrics, judge, T0.timestamp)
    capsys.readouterr()
    # When resolve_refs fails on the overload
    with pytest.raises(LlmUnavailable):
        resolve.run(extracted, CONFIG, deps)
    # Then the candidate's error span and the dashboard charge the malformed answer
    trace = trace_of("trace-turn-1", spans, patel_case.TENANT, patel_case.USER)
    assert error_reasons(trace, "resolve_refs") == ["JudgeError"]
    assert_trace_charges(trace, "resolve_malformed")
    assert_dashboard_shows(capsys.readouterr().out, "resolve_refs", "resolve_malformed")
    # And after the retry resolves it, the trace charges both attempts, once each
    resolve.run(extracted, CONFIG, deps)
    retried = trace_of("trace-turn-1", spans, patel_case.TENANT, patel_case.USER)
    assert retried.status is not TraceStatus.FAILED
    assert_trace_charges(retried, "resolve_malformed", "resolve_decision")
    assert_dashboard_shows(capsys.readouterr().out, "resolve_refs", "resolve_decision")


def test_dedupe_and_persist_judges_that_fail_after_a_paid_answer_charge_it_once(
    store: MemoryStore, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given "lives in Berlin" stored, a candidate in the judge's band, and a judge that answers
    # malformed (paid), is then overloaded, and answers on the retry: at dedupe, then again at
    # persist after another writer moved the row (a lost race)
    spans = InMemorySpanStore()
    write(rules_payload("I live in Berlin.", "t1", day=0), store, spans)
    api = RecordedApi(
        *("dedupe_malformed", OVERLOADED, "dedupe_same"),
        *("dedupe_malformed", OVERLOADED, "dedupe_same"),
    )
    judge = AnthropicDedupeJudge(EXTRACT, **recorded_client(api))
    metrics = EmfMetrics()
    dedupe_deps = dedupe.DedupeDeps(store, IN_BAND, spans, metrics, judge)
    payload = rules_payload("I live in Berlin, Germany.", "t2", day=3)
    capsys.readouterr()
    # When dedupe fails on the overload, then its retry decides
    with pytest.raises(LlmUnavailable):
        dedupe.run(payload, CONFIG, dedupe_deps)
    failed_at_dedupe = trace_of("trace-t2", spans)
    dedupe_out = capsys.readouterr().out
    deduped = dedupe.run(payload, CONFIG, dedupe_deps)
    dedupe_out += capsys.readouterr().out
    decided = conflict.run(deduped, CONFIG, conflict.ConflictDeps(store, spans, metrics))
    write(rules_payload("I moved to Lisbon.", "t3", day=5), store, spans)
    persist_deps = persist.PersistDeps(store, IN_BAND, spans, metrics, judge=judge)
    capsys.readouterr()
    with pytest.raises(LlmUnavailable):
        persist.run(decided, CONFIG, persist_deps)
    failed_at_persist = trace_of("trace-t2", spans)
    persist_out = capsys.readouterr().out
    persist.run(decided, CONFIG, persist_deps)
    persist_out += capsys.readouterr().out
    # Then each failure's error span charged the malformed answer it paid for
    assert error_reasons(failed_at_dedupe, "dedupe") == ["JudgeError"]
    assert_trace_charges(failed_at_dedupe, "dedupe_malformed")
    assert error_reasons(failed_at_persist, "persist") == ["StoreError"]
    assert malformed_on_spans(failed_at_persist) == {"dedupe": 1, "persist": 1}
    paid_before_persist = ("dedupe_malformed", "dedupe_same")
    assert_trace_charges(failed_at_persist, *paid_before_persist, "dedupe_malformed")
    # And the dashboard shows each stage's two attempts, once each
    for out, stage in ((dedupe_out, "dedupe"), (persist_out, "persist")):
        assert_dashboard_shows(out, stage, "dedupe_malformed", "dedupe_same")
    # And so does the trace once both retries succeeded: four calls, none twice
    trace = trace_of("trace-t2", spans)
    assert trace.status is not TraceStatus.FAILED
    assert_trace_charges(trace, *paid_before_persist, *paid_before_persist)


def test_hype_that_fails_after_its_questions_were_paid_charges_them_and_its_retry_once_each(
    store: MemoryStore, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a memory without search questions, and an index that is down when the memory is
    # written (after the model wrote the questions)
    (candidate,) = extract_with_rules("I live in Porto.").candidates
    unasked = candidate.model_copy(update={"search_questions": []})
    spans = InMemorySpanStore()
    write(payload_of(unasked, "h1", day=0), store, spans)
    _, deps = build_stage_deps("hype")
    api = RecordedApi("hype_questions", "hype_questions")
    questions = AnthropicQuestions(EXTRACT, **recorded_client(api))
    down = Outage(deps.index, writes_left=0)
    (change,) = deps.outbox.pending(10)
    capsys.readouterr()
    # When the row's indexing fails
    with pytest.raises(IndexUnavailable):
        hype.run(change, CONFIG, replace(deps, spans=spans, questions=questions, index=down))
    # Then its error span and the dashboard charge the questions' call
    trace = trace_of("trace-h1", spans)
    assert error_reasons(trace, "hype") == ["IndexingError"]
    assert_trace_charges(trace, "hype_questions")
    assert_dashboard_shows(capsys.readouterr().out, "hype", "hype_questions")
    # And once the retry indexed it, the trace charges both attempts' calls, once each
    hype.run(change, CONFIG, replace(deps, spans=spans, questions=questions))
    retried = trace_of("trace-h1", spans)
    assert retried.status is not TraceStatus.FAILED
    assert_trace_charges(retried, "hype_questions", "hype_questions")
    assert_dashboard_shows(capsys.readouterr().out, "hype", "hype_questions")


def test_a_dedupe_retry_decides_the_batch_again_and_charges_both_attempts_once_each(
    store: MemoryStore, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given "lives in Berlin" stored, a batch of two candidates in the judge's band, and a
    # judge that decides the first, is overloaded on the second, then decides both on the retry
    spans = InMemorySpanStore()
    write(rules_payload("I live in Berlin.", "t1", day=0), store, spans)
    first = rules_payload("I live in Berlin, Germany.", "t2", day=3)
    second = rules_payload("I live in East Berlin.", "t3", day=3)
    batch = first.model_copy(
        update={"turns": first.turns + second.turns, "items": first.items + second.items}
    )
    api = RecordedApi("dedupe_same", OVERLOADED, "dedupe_same", "dedupe_same")
    judge = AnthropicDedupeJudge(EXTRACT, **recorded_client(api))
    deps = dedupe.DedupeDeps(store, IN_BAND, spans, EmfMetrics(), judge)
    capsys.readouterr()
    # When the batch fails on the second candidate, and the retry decides both
    with pytest.raises(LlmUnavailable):
        dedupe.run(batch, CONFIG, deps)
    dedupe.run(batch, CONFIG, deps)
    # Then the first candidate's trace charges its judge call of each attempt, once each
    assert_trace_charges(trace_of("trace-t2", spans), "dedupe_same", "dedupe_same")
    assert_trace_charges(trace_of("trace-t3", spans), "dedupe_same")
    # And so does the dashboard
    assert_dashboard_shows(capsys.readouterr().out, "dedupe", *["dedupe_same"] * 3)
