"""Stage 2, extract: rules first (free), the LLM only for what they cannot handle.

`extract_candidates` is the pure decision for one turn (used by the stage and by `memwrite
extract`); `extract_turn` is the stage: it adds the session context, spans, metrics and the
session log. Failures are never a silent `[]`: a malformed answer is retried once, then the
turn fails with an error span and the exception goes to Step Functions' Catch (the DLQ).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum

from pydantic import BaseModel

from memwrite.candidate import Candidate, memory_key
from memwrite.config import ExtractConfig
from memwrite.errors import MemwriteError
from memwrite.ids import content_hash
from memwrite.llm_extractor import (
    ExtractionFailed,
    ExtractionLlm,
    LlmUsage,
    extract_with_llm,
    merge_candidates,
)
from memwrite.models import (
    LlmUsageSummary,
    QueuedTurn,
    SpanResult,
    StageSpan,
    session_sort_key,
)
from memwrite.ports import MetricsSink, SessionLog, SpanStore
from memwrite.prompts.extract import ExtractPromptInput, SessionTurn
from memwrite.reasons import (
    DeferredNoLLM,
    ExtractionError,
    NoCandidates,
    QualityDiscard,
    Reason,
    Ungrounded,
)
from memwrite.rules_extractor import extract_with_rules

__all__ = [
    "STAGE",
    "ExtractDeps",
    "ExtractInput",
    "ExtractedTurn",
    "Extraction",
    "Extractor",
    "extract_candidates",
    "extract_turn",
]

STAGE = "extract"


class Extractor(StrEnum):
    RULES = "rules"  # the rule fast-path understood the whole turn: no LLM call
    LLM = "llm"
    DEFERRED = "deferred"  # offline and the rules could not handle all of it


@dataclass(frozen=True)
class Extraction:
    """One turn's extraction: kept candidates, rejected ones with their reason, LLM usage."""

    extractor: Extractor
    candidates: tuple[Candidate, ...]
    rejected: tuple[tuple[Candidate, Reason], ...] = ()
    llm_calls: tuple[LlmUsage, ...] = ()


def _usage_summary(calls: Sequence[LlmUsage]) -> LlmUsageSummary | None:
    if not calls:
        return None
    return LlmUsageSummary(
        calls=len(calls),
        input_tokens=sum(c.input_tokens for c in calls),
        output_tokens=sum(c.output_tokens for c in calls),
        cost_usd=round(sum(c.cost_usd for c in calls), 8),
        models=tuple(sorted({c.model for c in calls})),
    )


def _triage(
    extractor: Extractor, candidates: Sequence[Candidate], calls: tuple[LlmUsage, ...] = ()
) -> Extraction:
    kept: list[Candidate] = []
    rejected: list[tuple[Candidate, Reason]] = []
    for candidate in candidates:
        if candidate.quality.verdict == "discard":
            rejected.append((candidate, QualityDiscard(reason=candidate.quality.reason)))
        elif not candidate.grounded:
            rejected.append((candidate, Ungrounded()))
        else:
            kept.append(candidate)
    return Extraction(extractor, tuple(kept), tuple(rejected), calls)


def extract_candidates(
    inp: ExtractPromptInput,
    config: ExtractConfig,
    llm: ExtractionLlm | None,
    *,
    on_json_fail: Callable[[], None],
) -> Extraction:
    """Rules first; the LLM when the rules did not understand the whole turn and one is set."""
    rules = extract_with_rules(
        inp.turn_text,
        role=inp.role.value,
        observed_at=inp.turn_timestamp,
        source_turn_id=inp.turn_id,
    )
    if rules.fully_covered:
        return _triage(Extractor.RULES, rules.candidates)
    if llm is None:
        return _triage(Extractor.DEFERRED, rules.candidates)
    result = extract_with_llm(inp, config, llm, on_json_fail=on_json_fail)
    # The rules' candidates are exact; the LLM's fill in the rest (same key: higher confidence).
    merged = merge_candidates([rules.candidates, result.candidates])
    return _triage(Extractor.LLM, merged, result.calls)


class ExtractInput(BaseModel):
    """Step Functions task input: one queued turn (the SQS message body)."""

    turn: QueuedTurn


class ExtractedTurn(BaseModel):
    """Task output: ids and the kept candidates only, far below the 256 KB payload limit."""

    trace_id: str
    tenant: str
    user_id: str
    session_id: str
    turn_id: str
    observed_at: datetime
    source: str
    extractor: Extractor
    candidates: list[Candidate]


@dataclass
class ExtractDeps:
    spans: SpanStore
    metrics: MetricsSink
    session_log: SessionLog
    llm: ExtractionLlm | None
    clock: Callable[[], float] = field(default=time.time)


def _span(
    turn: QueuedTurn,
    *,
    item_id: str,
    result: SpanResult,
    reason: Reason | None,
    latency_ms: float,
    kind: str = "turn",
    llm: LlmUsageSummary | None = None,
) -> StageSpan:
    return StageSpan(
        trace_id=turn.trace_id,
        tenant=turn.tenant,
        user_id=turn.user_id,
        stage=STAGE,
        item_id=item_id,
        result=result,
        reason=reason,
        latency_ms=round(latency_ms, 3),
        at=datetime.now(UTC),
        kind="candidate" if kind == "candidate" else "turn",
        llm=llm,
    )


def _turn_verdict(extraction: Extraction) -> tuple[SpanResult, Reason | None]:
    if extraction.extractor is Extractor.DEFERRED:
        # Offline: whatever the rules found goes on; the rest of the turn is recorded, not lost.
        result = SpanResult.PASS if extraction.candidates else SpanResult.REJECT
        return result, DeferredNoLLM()
    if not extraction.candidates:
        return SpanResult.REJECT, NoCandidates(extractor=extraction.extractor.value)
    return SpanResult.PASS, None


def extract_turn(turn: QueuedTurn, config: ExtractConfig, deps: ExtractDeps) -> ExtractedTurn:
    """The extract stage for one queued turn."""
    started = time.perf_counter()
    context = deps.session_log.recent(
        turn.tenant, turn.session_id, session_sort_key(turn), config.max_source_turns
    )
    inp = ExtractPromptInput(
        turn_id=turn.turn_id,
        turn_text=turn.text,
        role=turn.role,
        turn_timestamp=turn.observed_at,
        session_turns=tuple(
            SessionTurn(role=t.role, text=t.text, timestamp=t.observed_at) for t in context
        ),
    )
    try:
        extraction = extract_candidates(
            inp,
            config,
            deps.llm,
            on_json_fail=lambda: deps.metrics.event(STAGE, "extraction_json_fail"),
        )
    except MemwriteError as exc:
        calls = exc.calls if isinstance(exc, ExtractionFailed) else ()
        error_span = _span(
            turn,
            item_id=turn.turn_id,
            result=SpanResult.ERROR,
            reason=ExtractionError(error=type(exc).__name__),
            latency_ms=(time.perf_counter() - started) * 1000,
            llm=_usage_summary(calls),
        )
        deps.spans.put_spans([error_span])
        deps.metrics.count(STAGE, SpanResult.ERROR.value, error_span.reason)
        raise
    latency_ms = (time.perf_counter() - started) * 1000
    result, reason = _turn_verdict(extraction)
    spans = [
        _span(
            turn,
            item_id=turn.turn_id,
            result=result,
            reason=reason,
            latency_ms=latency_ms,
            llm=_usage_summary(extraction.llm_calls),
        )
    ]
    spans.extend(
        _span(
            turn,
            item_id=f"{turn.turn_id}:{content_hash(memory_key(candidate))}",
            result=SpanResult.REJECT,
            reason=why,
            latency_ms=0.0,
            kind="candidate",
        )
        for candidate, why in extraction.rejected
    )
    deps.spans.put_spans(spans)
    deps.session_log.append(turn)
    for span in spans:
        deps.metrics.count(STAGE, span.result.value, span.reason)
    deps.metrics.timing(STAGE, latency_ms)
    return ExtractedTurn(
        trace_id=turn.trace_id,
        tenant=turn.tenant,
        user_id=turn.user_id,
        session_id=turn.session_id,
        turn_id=turn.turn_id,
        observed_at=turn.observed_at,
        source=turn.source.value,
        extractor=extraction.extractor,
        candidates=list(extraction.candidates),
    )
