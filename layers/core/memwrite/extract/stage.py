"""Stage 2, extract: rules first (free), one LLM call per batch for what they cannot handle.

The unit is a batch: the turns of one user's session that arrive together (an SQS batch). Each
turn goes through the rule fast-path; the turns the rules did not fully understand share one
LLM full pass (plus the detail pass on long conversations), with the rest of the session as
context. Offline (no LLM configured) those turns are recorded as `DeferredNoLLM`; when the model
fails after its own retries (throttled, overloaded, refusing, malformed twice) as
`DeferredModelFailed` with an error span. A deferred user turn is kept as an *episode*
(`memwrite.episode`, settings `pipeline.episodes`) in the same transaction as its session-log
entry, and its rule candidates are dropped: the backfill extracts the whole turn later.

`memwrite.extract.candidates.extract_candidates` is the pure decision (used by the stage and
by `memwrite extract`); `run` is the stage: session context, spans, metrics and the session
log. Failures are never a silent `[]`: a malformed answer is retried once, then the batch's
turns become pending episodes with error spans (with `episodes.keep = off`: the exception goes
to Step Functions' Catch, the DLQ). A turn whose user was erased while it was in flight is not
logged (the log's append checks its trace) and goes no further: `UserErased`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from memwrite.candidate import Candidate, memory_key
from memwrite.config import EpisodesConfig, ExtractConfig, PipelineConfig
from memwrite.episode import Episode, EpisodeStatus
from memwrite.errors import (
    SourceErased,
)
from memwrite.extract.candidates import extract_candidates
from memwrite.extract.direct_candidate import candidate_of
from memwrite.extract.extraction import BatchExtraction, TurnExtraction
from memwrite.extract.requests import batch_turns, session_context
from memwrite.ids import content_hash
from memwrite.memory import DIRECT_SOURCE
from memwrite.models import (
    LlmUsageSummary,
    QueuedTurn,
    Role,
    SpanResult,
    StageSpan,
    session_sort_key,
)
from memwrite.payloads import ExtractedTurn, ExtractInput, Extractor, ExtractOutput
from memwrite.ports import CandidateVerifier, ExtractionLlm, MetricsSink, SessionLog, SpanStore
from memwrite.reasons import (
    DeferredModelFailed,
    DeferredNoLLM,
    ExtractionError,
    NoCandidates,
    Reason,
    UserErased,
)
from memwrite.spans import failure_recorded, make_span, record_spans, usage_summary

if TYPE_CHECKING:
    from memwrite.ports import StageAdapters

__all__ = [
    "STAGE",
    "ExtractDeps",
    "build_deps",
    "run",
]

STAGE = "extract"


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


def _turn_verdict(
    extraction: TurnExtraction, model_error: str | None
) -> tuple[SpanResult, Reason | None]:
    if extraction.extractor is Extractor.DEFERRED:
        if model_error is not None:
            # Visible: an error span, and the turn waits as an episode (never a silent drop).
            return SpanResult.ERROR, DeferredModelFailed(error=model_error)
        # Offline: kept as an episode (episodes off: whatever the rules found goes on).
        result = SpanResult.PASS if extraction.candidates else SpanResult.REJECT
        return result, DeferredNoLLM()
    if not extraction.candidates:
        return SpanResult.REJECT, NoCandidates(extractor=extraction.extractor.value)
    return SpanResult.PASS, None


def _episode_of(
    turn: QueuedTurn,
    extraction: TurnExtraction,
    model_error: str | None,
    config: EpisodesConfig,
    now: float,
) -> Episode | None:
    """The episode a turn is kept as, if any: a user turn extraction deferred (`keep =
    deferred`), or any user turn (`all`; those extracted now are born `extracted`)."""
    if config.keep == "off" or turn.role is not Role.USER or turn.direct is not None:
        return None
    deferred = extraction.extractor is Extractor.DEFERRED
    if not deferred and config.keep != "all":
        return None
    reason = DeferredModelFailed(error=model_error) if model_error else DeferredNoLLM()
    return Episode(
        turn=turn,
        status=EpisodeStatus.PENDING if deferred else EpisodeStatus.EXTRACTED,
        deferred_reason=reason.model_dump(mode="json") if deferred else {},
        expires_at=int(now) + config.retention_secs,
    )


def _log_turns(
    turns: Sequence[QueuedTurn],
    config: ExtractConfig,
    log: SessionLog,
    now: float,
    episodes: dict[str, Episode] | None = None,
) -> frozenset[str]:
    """Append the batch's turns to the session log, each with its episode (if kept) in the
    same commit; returns the ids of the turns whose user was erased meanwhile (their trace is
    marked or gone): none of those is logged."""
    erased: set[str] = set()
    kept = episodes or {}
    for turn in turns:
        if turn.trace_id in erased:
            continue
        try:
            log.append(
                turn,
                now=now,
                retention_secs=config.session_log_retention_secs,
                episode=kept.get(turn.turn_id),
            )
        except SourceErased:
            erased.add(turn.trace_id)
    return frozenset(turn.turn_id for turn in turns if turn.trace_id in erased)


def _with_direct(
    extraction: BatchExtraction, direct: Sequence[QueuedTurn], ordered: Sequence[QueuedTurn]
) -> BatchExtraction:
    """The batch's extraction with its direct memories in place, each the candidate it is as
    written (no rules, no model); in the order of `ordered`."""
    found = {turn.turn_id: turn for turn in extraction.turns}
    for turn in direct:
        assert turn.direct is not None
        candidate = candidate_of(turn.direct, turn.turn_id, turn.observed_at)
        found[turn.turn_id] = TurnExtraction(turn.turn_id, Extractor.DIRECT, (candidate,))
    return replace(extraction, turns=tuple(found[turn.turn_id] for turn in ordered))


def run(payload: ExtractInput, config: PipelineConfig, deps: ExtractDeps) -> ExtractOutput:
    """The extract stage for a batch of one session's queued turns."""
    started = time.perf_counter()
    extract_config = config.extract
    turns = payload.turns
    # SQS may deliver the same message twice in one batch: one turn id, one turn.
    unique = {turn.turn_id: turn for turn in turns}
    ordered = sorted(unique.values(), key=session_sort_key)
    batch = batch_turns(ordered)
    keep_episodes = config.episodes.keep != "off"
    direct = [turn for turn in ordered if turn.direct is not None]
    inferred = [turn for turn in batch if unique[turn.turn_id].direct is None]
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
    ) as paid:
        extraction = BatchExtraction(())
        if inferred:
            extraction = extract_candidates(
                inferred,
                session_context(ordered, extract_config, deps.session_log, deps.clock()),
                extract_config,
                deps.llm,
                on_json_fail=lambda: deps.metrics.event(STAGE, "extraction_json_fail"),
                verifier=deps.verifier,
                defer_on_model_failure=keep_episodes,
            )
    if direct:
        extraction = _with_direct(extraction, direct, ordered)
    # Before the spans: a turn whose user was erased while it was in flight is not logged,
    # and goes no further (`UserErased`); only its spans (ids, no text) are written.
    now = deps.clock()
    if extraction.model_error is not None:
        # What the failed calls cost is paid all the same (a malformed answer, say).
        extraction = replace(extraction, llm_calls=tuple(paid))
        deps.metrics.event(STAGE, "extraction.deferred_model_failed", len(ordered))
    # A backfill re-runs episodes that exist already: it keeps no new ones.
    episodes = {
        turn.turn_id: episode
        for turn, turn_extraction in zip(ordered, extraction.turns, strict=True)
        if not payload.backfill
        and (
            episode := _episode_of(
                turn, turn_extraction, extraction.model_error, config.episodes, now
            )
        )
        is not None
    }
    erased = _log_turns(ordered, extract_config, deps.session_log, now, episodes)
    if episodes:
        deps.metrics.event(STAGE, "episodes.kept", len(episodes) - len(erased & episodes.keys()))
    latency_ms = (time.perf_counter() - started) * 1000
    spans: list[StageSpan] = []
    # A batch's LLM usage is recorded once, on the span of its first LLM-extracted turn (of its
    # first turn when only the verifier called a model, or when the model failed).
    usage = usage_summary(extraction.llm_calls)
    any_llm_turn = any(t.extractor is Extractor.LLM for t in extraction.turns)
    for turn, turn_extraction in zip(ordered, extraction.turns, strict=True):
        result, reason = _turn_verdict(turn_extraction, extraction.model_error)
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
        source=DIRECT_SOURCE if first.direct is not None else first.source.value,
        turns=[
            ExtractedTurn(
                turn_id=turn.turn_id,
                trace_id=turn.trace_id,
                observed_at=turn.observed_at,
                extractor=turn_extraction.extractor,
                pinned=turn.direct.pinned if turn.direct is not None else False,
                expires_on=turn.direct.expires_at if turn.direct is not None else None,
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
