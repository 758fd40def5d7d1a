"""Stage 2, extract: rules first (free), one LLM call per batch for what they cannot handle.

The unit is a batch: the turns of one user's session that arrive together (an SQS batch). Each
turn goes through the rule fast-path; the turns the rules did not fully understand share one
LLM full pass (plus the detail pass on long conversations), with the rest of the session as
context. Offline (no LLM configured) those turns are recorded as `DeferredNoLLM`; when the model
fails after its own retries (throttled, overloaded, refusing, malformed twice) as
`DeferredModelFailed` with an error span. A deferred user turn is kept as an *episode*
(`memwrite.records.episode`, settings `pipeline.episodes`) in the same transaction as its
session-log entry, and its rule candidates are dropped: the backfill extracts the whole turn later.

`memwrite.extract.candidates.extract_candidates` is the pure decision (used by the stage and
by `memwrite extract`); `run` is the stage: session context, spans, metrics and the session
log. Failures are never a silent `[]`: a malformed answer is retried once, then the batch's
turns become pending episodes with error spans (with `episodes.keep = off`: the exception goes
to Step Functions' Catch, the DLQ). A turn whose user was erased while it was in flight is not
logged (the log's append checks its trace) and goes no further: `UserErased`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, NoReturn

from memwrite.claims.candidate import Candidate, memory_key
from memwrite.config.settings import EpisodesConfig, ExtractConfig, PipelineConfig
from memwrite.errors import BudgetExhausted, BudgetWait
from memwrite.extract.candidates import BUDGET_ERROR, extract_candidates
from memwrite.extract.direct_candidate import candidate_of
from memwrite.extract.extraction import BatchExtraction, TurnExtraction
from memwrite.extract.requests import batch_turns, session_context
from memwrite.ids import content_hash
from memwrite.model_ports import CandidateVerifier, ExtractionLlm
from memwrite.models import (
    LlmUsageSummary,
    QueuedTurn,
    Role,
    SpanResult,
    StageSpan,
    session_sort_key,
)
from memwrite.payloads import ExtractedTurn, ExtractInput, Extractor, ExtractOutput
from memwrite.ports import MetricsSink, SessionLog, SpanStore, TurnLedger
from memwrite.prompts.extract import BatchTurn, full_pass_min_chars
from memwrite.reasons import (
    DeferredBudget,
    DeferredModelFailed,
    DeferredNoLLM,
    ExcludedTopic,
    ExtractionError,
    NoCandidates,
    Reason,
    UserErased,
)
from memwrite.records.episode import Episode, EpisodeStatus
from memwrite.records.memory import DIRECT_SOURCE
from memwrite.spans import failure_recorded, make_span, record_spans, usage_summary
from memwrite.topics.matcher import withheld_turn, withhold_words

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
    # A trace's recorded inputs: an excluded topic's turn is withheld there too.
    ledger: TurnLedger | None = None
    clock: Callable[[], float] = field(default=time.time)


def build_deps(adapters: StageAdapters) -> ExtractDeps:
    return ExtractDeps(
        spans=adapters.spans,
        metrics=adapters.metrics,
        session_log=adapters.session_log(),
        ledger=adapters.ledger(),
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


def _deferred_reason(model_error: str | None, waited_s: float) -> Reason | None:
    """Why a batch the model was needed for was deferred: no budget after `max_wait_s`
    (`DeferredBudget`), or the model failing (`DeferredModelFailed`); None: it was not."""
    if model_error is None:
        return None
    if model_error == BUDGET_ERROR:
        return DeferredBudget(waited_s=round(waited_s, 3))
    return DeferredModelFailed(error=model_error)


def _waited_s(turns: Sequence[QueuedTurn], now: float) -> float:
    """How long the batch has waited since its earliest turn was accepted (0 when unknown)."""
    accepted = [turn.accepted_at.timestamp() for turn in turns if turn.accepted_at is not None]
    return max(0.0, now - min(accepted)) if accepted else 0.0


def _extract_batch(
    inferred: Sequence[BatchTurn],
    ordered: Sequence[QueuedTurn],
    config: PipelineConfig,
    deps: ExtractDeps,
    wait_left_s: float | None,
) -> BatchExtraction | BudgetExhausted:
    """The batch's extraction, or the empty budget it must wait for (nothing written yet).
    `wait_left_s`: how much longer a live batch may wait for the budget (None: a backfill,
    which never waits; past `max_wait_s` the batch is deferred instead, `DeferredBudget`)."""
    defer_on_budget = wait_left_s is not None and wait_left_s <= 0
    if not inferred:
        return BatchExtraction(())
    if not defer_on_budget and deps.llm is not None:
        # Before the rules and the session context: a batch the budget cannot pay a full
        # pass for yet (its system prompt and turns: a lower bound of the call) waits at the
        # cost of one budget read, however often it is tried again. One the rules alone
        # would handle waits too, at most `max_wait_s`: then the rules run in any case. A
        # live batch takes a place in its tenant's line: the batches waiting for room come
        # back one at a time, not all when the bucket has room for one (docs/budget.md).
        chars = full_pass_min_chars(inferred, config.extract)
        room_in = deps.llm.budget_wait_s(chars, config.extract.model, wait_left_s)
        if room_in > 0:
            return BudgetExhausted(f"model budget: room in {room_in:.1f} s", room_in)
    try:
        return extract_candidates(
            inferred,
            session_context(ordered, config.extract, deps.session_log, deps.clock()),
            config.extract,
            deps.llm,
            on_json_fail=lambda: deps.metrics.event(STAGE, "extraction_json_fail"),
            verifier=deps.verifier,
            defer_on_model_failure=config.episodes.keep != "off",
            defer_on_budget=defer_on_budget,
        )
    except BudgetExhausted as exc:
        return exc


def _wait_for_budget(
    no_budget: BudgetExhausted,
    payload: ExtractInput,
    config: PipelineConfig,
    waited_s: float,
    metrics: MetricsSink,
) -> NoReturn:
    """The batch goes back to the queue until the budget expects room (at least
    `min_retry_delay_s`, at most what is left of `max_wait_s`); a backfill just stops."""
    if payload.backfill:
        raise no_budget  # its episodes stay pending for the next run
    metrics.event(STAGE, "budget.waits", len(payload.turns))
    remaining = config.model.max_wait_s - waited_s
    delay = min(max(no_budget.retry_after_s, config.model.min_retry_delay_s), remaining)
    raise BudgetWait(delay, waited_s) from no_budget


def _turn_verdict(
    extraction: TurnExtraction, deferred: Reason | None
) -> tuple[SpanResult, Reason | None]:
    if extraction.excluded is not None and not extraction.candidates:
        # Of an excluded topic: dropped whole, its words kept nowhere.
        return SpanResult.REJECT, extraction.excluded
    if extraction.extractor is Extractor.DEFERRED:
        if deferred is not None:
            # Visible: an error span, and the turn waits as an episode (never a silent drop).
            return SpanResult.ERROR, deferred
        # Offline: kept as an episode (episodes off: whatever the rules found goes on).
        result = SpanResult.PASS if extraction.candidates else SpanResult.REJECT
        return result, DeferredNoLLM()
    if not extraction.candidates:
        return SpanResult.REJECT, NoCandidates(extractor=extraction.extractor.value)
    return SpanResult.PASS, None


def _episode_of(
    turn: QueuedTurn,
    extraction: TurnExtraction,
    why: Reason | None,
    config: EpisodesConfig,
    now: float,
) -> Episode | None:
    """The episode a turn is kept as, if any: a user turn extraction deferred (`keep =
    deferred`), or any user turn (`all`; those extracted now are born `extracted`)."""
    if (
        config.keep == "off"
        or turn.role is not Role.USER
        or turn.direct is not None
        or extraction.excluded is not None
    ):
        return None
    deferred = extraction.extractor is Extractor.DEFERRED
    if not deferred and config.keep != "all":
        return None
    reason = why or DeferredNoLLM()
    return Episode(
        turn=turn,
        status=EpisodeStatus.PENDING if deferred else EpisodeStatus.EXTRACTED,
        deferred_reason=reason.model_dump(mode="json") if deferred else {},
        # Pending: kept until distilled (then `retention_days` from that day, backfill).
        expires_at=config.expires_at_kept(now, pending=deferred),
    )


def _log_turns(
    turns: Sequence[QueuedTurn],
    config: ExtractConfig,
    log: SessionLog,
    now: float,
    episodes: dict[str, Episode] | None = None,
    *,
    excluded: Mapping[str, str] | None = None,
) -> frozenset[str]:
    """Append the batch's turns to the session log in one write, each with its episode (if
    kept), those of an excluded topic (`excluded`: turn id -> topic) as a placeholder (over
    their words, for a backfill); returns the ids of the turns whose user was erased meanwhile
    (their trace is marked or gone): none of those is logged."""
    withheld = excluded or {}
    logged = [
        withheld_turn(turn, withheld[turn.turn_id]) if turn.turn_id in withheld else turn
        for turn in turns
    ]
    erased = log.append_batch(
        logged, now=now, retention_secs=config.session_log_retention_secs, episodes=episodes
    )
    return frozenset(turn.turn_id for turn in turns if turn.trace_id in erased)


def _with_direct(
    extraction: BatchExtraction,
    direct: Sequence[QueuedTurn],
    ordered: Sequence[QueuedTurn],
    config: ExtractConfig,
) -> BatchExtraction:
    """The batch's extraction with its direct memories in place, each the candidate it is as
    written (no rules, no model), unless of an excluded topic; in the order of `ordered`."""
    found = {turn.turn_id: turn for turn in extraction.turns}
    for turn in direct:
        assert turn.direct is not None
        candidate = candidate_of(turn.direct, turn.turn_id, turn.observed_at)
        if candidate.topic in config.exclude_topics:
            # Written as is, yet never kept: an excluded topic is stored in no form.
            excluded = ExcludedTopic(topic=candidate.topic)
            found[turn.turn_id] = TurnExtraction(
                turn.turn_id, Extractor.DIRECT, (), ((candidate, excluded),), excluded
            )
            continue
        found[turn.turn_id] = TurnExtraction(turn.turn_id, Extractor.DIRECT, (candidate,))
    return replace(extraction, turns=tuple(found[turn.turn_id] for turn in ordered))


def run(payload: ExtractInput, config: PipelineConfig, deps: ExtractDeps) -> ExtractOutput:
    """The extract stage for a batch of one session's queued turns."""
    started = time.perf_counter()
    extract_config = config.extract
    turns = payload.turns
    # A live batch waits for the model budget up to `model.max_wait_s` after it was accepted;
    # past that it is deferred (DeferredBudget). A backfill never waits here.
    waited_s = _waited_s(turns, deps.clock())
    # SQS may deliver the same message twice in one batch: one turn id, one turn. When it was
    # accepted is the queue's business: the session log and episodes keep the turn as said, so
    # a redelivered or re-sent turn stores the same.
    unique = {turn.turn_id: turn.model_copy(update={"accepted_at": None}) for turn in turns}
    ordered = sorted(unique.values(), key=session_sort_key)
    batch = batch_turns(ordered)
    wait_left_s = None if payload.backfill else config.model.max_wait_s - waited_s
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
        extracted = _extract_batch(inferred, ordered, config, deps, wait_left_s)
    if isinstance(extracted, BudgetExhausted):
        _wait_for_budget(extracted, payload, config, waited_s, deps.metrics)
    extraction = extracted
    if direct:
        extraction = _with_direct(extraction, direct, ordered, extract_config)
    # Before the spans: a turn whose user was erased while it was in flight is not logged,
    # and goes no further (`UserErased`); only its spans (ids, no text) are written.
    now = deps.clock()
    deferred = _deferred_reason(extraction.model_error, waited_s)
    if extraction.model_error is not None:
        # What the failed calls cost is paid all the same (a malformed answer, say).
        extraction = replace(extraction, llm_calls=tuple(paid))
        event = (
            "extraction.deferred_budget"
            if isinstance(deferred, DeferredBudget)
            else "extraction.deferred_model_failed"
        )
        deps.metrics.event(STAGE, event, len(ordered))
    # A backfill re-runs episodes that exist already: it keeps no new ones.
    episodes = {
        turn.turn_id: episode
        for turn, turn_extraction in zip(ordered, extraction.turns, strict=True)
        if not payload.backfill
        and (episode := _episode_of(turn, turn_extraction, deferred, config.episodes, now))
        is not None
    }
    excluded = {t.turn_id: t.excluded.topic for t in extraction.turns if t.excluded is not None}
    if excluded and deps.ledger is not None:
        withhold_words([unique[turn_id] for turn_id in excluded], excluded, deps.ledger, now)
    erased = _log_turns(ordered, extract_config, deps.session_log, now, episodes, excluded=excluded)
    if episodes:
        deps.metrics.event(STAGE, "episodes.kept", len(episodes) - len(erased & episodes.keys()))
    latency_ms = (time.perf_counter() - started) * 1000
    spans: list[StageSpan] = []
    # A batch's LLM usage is recorded once, on the span of its first LLM-extracted turn (of its
    # first turn when only the verifier called a model, or when the model failed).
    usage = usage_summary(extraction.llm_calls)
    any_llm_turn = any(t.extractor is Extractor.LLM for t in extraction.turns)
    for turn, turn_extraction in zip(ordered, extraction.turns, strict=True):
        result, reason = _turn_verdict(turn_extraction, deferred)
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
