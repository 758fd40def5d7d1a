"""Stage 2, extract: rules first (free), one LLM call per batch for what they cannot handle.

The unit is a batch: the turns of one user's session that arrive together (an SQS batch). Each
turn goes through the rule fast-path; the turns the rules did not fully understand share one
LLM full pass (plus the detail pass on long conversations), with the rest of the session as
context. Offline (no LLM configured) those turns are recorded as `DeferredNoLLM`.

`extract_candidates` is the pure decision (used by the stage and by `memwrite extract`);
`run` is the stage: session context, spans, metrics and the session log. Failures are
never a silent `[]`: a malformed answer is retried once, then every turn of the batch gets an
error span and the exception goes to Step Functions' Catch (the DLQ). A turn whose user was
erased while it was in flight is not logged (the log's append checks its trace) and goes no
further: `UserErased`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memwrite.candidate import Candidate, memory_key
from memwrite.config import ExtractConfig, PipelineConfig
from memwrite.errors import SourceErased
from memwrite.extract.extraction import BatchExtraction, TurnExtraction
from memwrite.extract.llm import extract_with_llm, merge_candidates
from memwrite.extract.rules import extract_with_rules
from memwrite.extract.verifier import verify_extraction
from memwrite.ids import content_hash
from memwrite.models import (
    LlmUsageSummary,
    QueuedTurn,
    SpanResult,
    StageSpan,
    session_sort_key,
)
from memwrite.payloads import ExtractedTurn, ExtractInput, Extractor, ExtractOutput
from memwrite.ports import CandidateVerifier, ExtractionLlm, MetricsSink, SessionLog, SpanStore
from memwrite.prompts.extract import BatchTurn, ExtractPromptInput, SessionTurn
from memwrite.reasons import (
    DeferredNoLLM,
    ExcludedTopic,
    ExtractionError,
    NoCandidates,
    QualityDiscard,
    Reason,
    Ungrounded,
    UserErased,
)
from memwrite.spans import failure_recorded, make_span, record_spans, usage_summary
from memwrite.usage import LlmUsage

if TYPE_CHECKING:
    from memwrite.ports import StageAdapters

__all__ = [
    "STAGE",
    "ExtractDeps",
    "build_deps",
    "excluded_topic",
    "extract_candidates",
    "run",
]

STAGE = "extract"


def excluded_topic(candidate: Candidate, config: ExtractConfig) -> ExcludedTopic | None:
    """The tenant's topic filter (`extraction.include_topics`, `exclude_topics`): applied to
    the candidates of the rules and of the model alike."""
    if candidate.topic in config.exclude_topics or (
        config.include_topics is not None and candidate.topic not in config.include_topics
    ):
        return ExcludedTopic(topic=candidate.topic)
    return None


def _triage(
    turn_id: str, extractor: Extractor, candidates: Sequence[Candidate], config: ExtractConfig
) -> TurnExtraction:
    kept: list[Candidate] = []
    rejected: list[tuple[Candidate, Reason]] = []
    for candidate in candidates:
        if excluded := excluded_topic(candidate, config):
            rejected.append((candidate, excluded))
        elif candidate.quality.verdict == "discard":
            rejected.append((candidate, QualityDiscard(reason=candidate.quality.reason)))
        elif not candidate.grounded:
            rejected.append((candidate, Ungrounded()))
        else:
            kept.append(candidate)
    return TurnExtraction(turn_id, extractor, tuple(kept), tuple(rejected))


def extract_candidates(
    turns: Sequence[BatchTurn],
    context: Sequence[SessionTurn],
    config: ExtractConfig,
    llm: ExtractionLlm | None,
    *,
    on_json_fail: Callable[[], None],
    verifier: CandidateVerifier | None = None,
) -> BatchExtraction:
    """Rules on every turn; one LLM batch when some turn is beyond them and an LLM is set;
    then the verifier, when `config.verifier` has it on and one is wired."""
    rules = {
        turn.turn_id: extract_with_rules(
            turn.text,
            role=turn.role.value,
            observed_at=turn.timestamp,
            source_turn_id=turn.turn_id,
        )
        for turn in turns
    }
    needs_llm = any(not found.fully_covered for found in rules.values())
    llm_candidates: dict[str, list[Candidate]] = {}
    calls: tuple[LlmUsage, ...] = ()
    if needs_llm and llm is not None:
        # The whole batch goes in, in order, so the model reads the conversation as it went;
        # turns the rules covered cost no extra call and their candidates are merged below.
        result = extract_with_llm(
            ExtractPromptInput(turns=tuple(turns), session_turns=tuple(context)),
            config,
            llm,
            on_json_fail=on_json_fail,
        )
        calls = result.calls
        for candidate in result.candidates:
            llm_candidates.setdefault(candidate.source_turn_id or "", []).append(candidate)
    extractions = []
    for turn in turns:
        found = rules[turn.turn_id]
        if found.fully_covered:
            extractor = Extractor.RULES
        elif llm is None:
            extractor = Extractor.DEFERRED
        else:
            extractor = Extractor.LLM
        # The rules' candidates are exact; the LLM fills in the rest (same key: higher confidence).
        merged = merge_candidates([found.candidates, llm_candidates.get(turn.turn_id, [])])
        extractions.append(_triage(turn.turn_id, extractor, merged, config))
    return verify_extraction(
        BatchExtraction(tuple(extractions), calls), turns, config.verifier, verifier
    )


@dataclass
class ExtractDeps:
    spans: SpanStore
    metrics: MetricsSink
    session_log: SessionLog
    llm: ExtractionLlm | None
    verifier: CandidateVerifier | None = None
    clock: Callable[[], float] = field(default=time.time)


def build_deps(adapters: StageAdapters) -> ExtractDeps:
    return ExtractDeps(
        spans=adapters.spans,
        metrics=adapters.metrics,
        session_log=adapters.session_log(),
        llm=adapters.extraction_llm(),
        verifier=adapters.verifier(),
    )


def _span(
    turn: QueuedTurn,
    *,
    result: SpanResult,
    reason: Reason | None,
    latency_ms: float,
    candidate: Candidate | None = None,
    llm: LlmUsageSummary | None = None,
) -> StageSpan:
    item_id = turn.turn_id
    if candidate is not None:
        item_id = f"{turn.turn_id}:{content_hash(memory_key(candidate))}"
    return make_span(
        trace_id=turn.trace_id,
        tenant=turn.tenant,
        user_id=turn.user_id,
        stage=STAGE,
        item_id=item_id,
        result=result,
        reason=reason,
        latency_ms=latency_ms,
        kind="turn" if candidate is None else "candidate",
        llm=llm,
    )


def _turn_verdict(extraction: TurnExtraction) -> tuple[SpanResult, Reason | None]:
    if extraction.extractor is Extractor.DEFERRED:
        # Offline: whatever the rules found goes on; the rest of the turn is recorded, not lost.
        result = SpanResult.PASS if extraction.candidates else SpanResult.REJECT
        return result, DeferredNoLLM()
    if not extraction.candidates:
        return SpanResult.REJECT, NoCandidates(extractor=extraction.extractor.value)
    return SpanResult.PASS, None


def _context(
    turns: Sequence[QueuedTurn], config: ExtractConfig, log: SessionLog, now: float
) -> list[SessionTurn]:
    first = turns[0]
    earlier = log.recent(
        first.tenant,
        first.user_id,
        first.session_id,
        session_sort_key(first),
        config.max_source_turns,
        now=now,
    )
    return [SessionTurn(role=t.role, text=t.text, timestamp=t.observed_at) for t in earlier]


def _log_turns(
    turns: Sequence[QueuedTurn], config: ExtractConfig, log: SessionLog, now: float
) -> frozenset[str]:
    """Append the batch's turns to the session log; returns the ids of the turns whose user
    was erased meanwhile (their trace is marked or gone): none of those is logged."""
    erased: set[str] = set()
    for turn in turns:
        if turn.trace_id in erased:
            continue
        try:
            log.append(turn, now=now, retention_secs=config.session_log_retention_secs)
        except SourceErased:
            erased.add(turn.trace_id)
    return frozenset(turn.turn_id for turn in turns if turn.trace_id in erased)


def run(payload: ExtractInput, config: PipelineConfig, deps: ExtractDeps) -> ExtractOutput:
    """The extract stage for a batch of one session's queued turns."""
    started = time.perf_counter()
    extract_config = config.extract
    turns = payload.turns
    # SQS may deliver the same message twice in one batch: one turn id, one turn.
    unique = {turn.turn_id: turn for turn in turns}
    ordered = sorted(unique.values(), key=session_sort_key)
    batch = [
        BatchTurn(
            turn_id=t.turn_id,
            role=t.role,
            text=t.text,
            timestamp=t.observed_at,
            in_reply_to=t.context,
        )
        for t in ordered
    ]
    with failure_recorded(
        STAGE,
        deps.spans,
        deps.metrics,
        started=started,
        reason=ExtractionError,
        undone=ordered,
        error_span=lambda turn, error, latency_ms: _span(
            turn, result=SpanResult.ERROR, reason=error, latency_ms=latency_ms
        ),
    ):
        extraction = extract_candidates(
            batch,
            _context(ordered, extract_config, deps.session_log, deps.clock()),
            extract_config,
            deps.llm,
            on_json_fail=lambda: deps.metrics.event(STAGE, "extraction_json_fail"),
            verifier=deps.verifier,
        )
    # Before the spans: a turn whose user was erased while it was in flight is not logged,
    # and goes no further (`UserErased`); only its spans (ids, no text) are written.
    erased = _log_turns(ordered, extract_config, deps.session_log, deps.clock())
    latency_ms = (time.perf_counter() - started) * 1000
    spans: list[StageSpan] = []
    # A batch's LLM usage is recorded once, on the span of its first LLM-extracted turn (of its
    # first turn when only the verifier called a model).
    usage = usage_summary(extraction.llm_calls)
    any_llm_turn = any(t.extractor is Extractor.LLM for t in extraction.turns)
    for turn, turn_extraction in zip(ordered, extraction.turns, strict=True):
        result, reason = _turn_verdict(turn_extraction)
        if turn.turn_id in erased:
            result, reason = SpanResult.REJECT, UserErased()
        charged = usage if turn_extraction.extractor is Extractor.LLM or not any_llm_turn else None
        usage = None if charged else usage
        spans.append(_span(turn, result=result, reason=reason, latency_ms=latency_ms, llm=charged))
        if turn.turn_id not in erased:
            spans.extend(
                _span(
                    turn, result=SpanResult.REJECT, reason=why, latency_ms=0.0, candidate=candidate
                )
                for candidate, why in turn_extraction.rejected
            )
    record_spans(spans, deps.spans, deps.metrics)
    # Turns the pre-filter let through that held nothing: its escape rate (README).
    escaped = sum(1 for s in spans if s.kind == "turn" and isinstance(s.reason, NoCandidates))
    if escaped:
        deps.metrics.event(STAGE, "prefilter.escaped", escaped)
    deps.metrics.llm_usage(STAGE, extraction.llm_calls)
    deps.metrics.timing(STAGE, latency_ms)
    first = ordered[0]
    return ExtractOutput(
        tenant=first.tenant,
        user_id=first.user_id,
        session_id=first.session_id,
        source=first.source.value,
        turns=[
            ExtractedTurn(
                turn_id=turn.turn_id,
                trace_id=turn.trace_id,
                observed_at=turn.observed_at,
                extractor=turn_extraction.extractor,
            )
            for turn, turn_extraction in zip(ordered, extraction.turns, strict=True)
            if turn.turn_id not in erased
        ],
        candidates=[
            candidate
            for turn, turn_extraction in zip(ordered, extraction.turns, strict=True)
            if turn.turn_id not in erased
            for candidate in turn_extraction.candidates
        ],
    )
