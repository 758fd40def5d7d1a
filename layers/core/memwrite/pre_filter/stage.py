"""`POST /v1/turns`: pre-filter every turn, enqueue the survivors once, record what happened.

Ordering keeps the promise "nothing lost, the ledger never lies": the trace is written before
any message can reach a consumer; the ledger marks a turn enqueued only after SQS accepted it;
a turn SQS refused is reported back as failed (the client re-sends it) and is not in the ledger.
A crash between the send and the ledger write leaves a message without a ledger row: a later
re-send enqueues it again, which the downstream stages absorb (they are idempotent).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from memwrite.config.settings import PipelineConfig
from memwrite.errors import IdempotencyKeyReused, TimestampInFuture
from memwrite.ids import new_trace_id, trace_id_for_key, turn_id
from memwrite.models import (
    FailedTurn,
    IngestRequest,
    IngestResponse,
    IngestTurn,
    QueuedTurn,
    Role,
    SkippedTurn,
    SpanResult,
    StageSpan,
    TraceInput,
)
from memwrite.ports import MetricsSink, SpanStore, TraceRecord, TurnLedger, TurnQueue
from memwrite.pre_filter.checks import (
    STAGE,
    Screening,
    after_rate_gate,
    count_words,
    mask_secrets,
    may_be_short_answer,
    question_of,
    rate_key,
    rule_name,
    screen,
)
from memwrite.pre_filter.rate_gate import RateGate
from memwrite.reasons import (
    DuplicateTurn,
    EnqueueFailed,
    Reason,
    Redacted,
    ShortAnswer,
    SkipReason,
)
from memwrite.records.episode import preceding_of
from memwrite.topics.matcher import marked_topic

if TYPE_CHECKING:
    from memwrite.ports import StageAdapters

__all__ = ["RETRY_AFTER_SECS", "IngestDeps", "ingest_turns"]

RETRY_AFTER_SECS = 2


@dataclass
class IngestDeps:
    queue: TurnQueue
    ledger: TurnLedger
    spans: SpanStore
    metrics: MetricsSink
    rate_gate: RateGate
    clock: Callable[[], float] = field(default=time.time)


def build_deps(adapters: StageAdapters) -> IngestDeps:
    return IngestDeps(
        queue=adapters.queue(),
        ledger=adapters.ledger(),
        spans=adapters.spans,
        metrics=adapters.metrics,
        rate_gate=RateGate(
            adapters.settings.pipeline.pre_filter.rate_map_max_entries,
            shared=adapters.rate_store(),
        ),
    )


@dataclass
class _Screened:
    """One turn's stage-1 decision: its screening and the reason it is skipped (the
    screening's or a later gate's; None: it passes). What `decision_of` would make of the two,
    read without building that model for every turn."""

    turn: IngestTurn
    turn_id: str
    screening: Screening
    reason: SkipReason | None
    latency_ms: float
    # The end of the turn before it in the request (masked), for its episode's search text.
    preceding: str | None = None

    @property
    def passed(self) -> bool:
        return self.reason is None and self.screening.text is not None


def _turn_ids(request: IngestRequest, tenant: str, masked: list[str]) -> tuple[str, ...]:
    return tuple(
        turn_id(
            tenant,
            request.user_id,
            request.session_id,
            turn.role.value,
            content,
            timestamp=turn.timestamp,
        )
        for turn, content in zip(request.turns, masked, strict=True)
    )


def _mask_and_screen(
    request: IngestRequest, tenant: str, config: PipelineConfig, deps: IngestDeps
) -> tuple[list[str], list[tuple[Screening, float]]]:
    """Each turn with its secrets masked (what turn ids hash and what the trace keeps, for
    replay) and its screening (with how long it took, in ms), one turn after the other: both
    scan the same text, which the firewall's cache of the last few texts then still holds (a
    request's turns all masked before the first is screened would have pushed it out)."""
    # The request's turns are one conversation, in order, continuing the session's earlier
    # requests: a short first turn may answer the question the last one ended with.
    previous: str | None = None
    if may_be_short_answer(request.turns[0].content):
        previous = deps.ledger.last_question(
            tenant, request.user_id, request.session_id, now=deps.clock()
        )
    masked: list[str] = []
    screenings: list[tuple[Screening, float]] = []
    for turn in request.turns:
        masked.append(mask_secrets(turn.content))
        started = time.perf_counter()
        screening = screen(turn.content, config.pre_filter, previous)
        screenings.append((screening, (time.perf_counter() - started) * 1000))
        previous = turn.content
    return masked, screenings


def _gate_all(
    request: IngestRequest,
    turn_ids: tuple[str, ...],
    tenant: str,
    config: PipelineConfig,
    deps: IngestDeps,
    *,
    screenings: list[tuple[Screening, float]],
    known: set[str],
    masked: list[str],
) -> tuple[list[_Screened], str | None]:
    """Each turn's screening through the rate and role gates, and the question the request's
    last turn ends with (for the session's next request: `question_of`)."""
    screened: list[_Screened] = []
    rate_scope = f"{tenant}\x1f{request.user_id}"
    admitted, claim_ms = _rate_gate(
        request, turn_ids, screenings, rate_scope=rate_scope, config=config, deps=deps, known=known
    )
    before: str | None = None  # the turn before, masked
    for index, (turn, tid, words) in enumerate(zip(request.turns, turn_ids, masked, strict=True)):
        started = time.perf_counter()
        screening, screen_ms = screenings[index]
        reason = screening.reason
        if reason is None and screening.text is not None:  # kept: the rate and role gates
            passed = admitted.get(index, True)
            reason = after_rate_gate(turn.role, config.pre_filter, admitted=passed)
        latency_ms = screen_ms + (time.perf_counter() - started) * 1000
        latency_ms += claim_ms if index in admitted else 0.0
        # Only a user turn that passes can become an episode: the others need no context.
        item = _Screened(turn, tid, screening, reason, latency_ms)
        if item.passed and turn.role is Role.USER and before is not None:
            item.preceding = _preceding(before, config)
        screened.append(item)
        before = words
    last = screenings[-1][0]
    if last.judged:
        return screened, last.ends_with
    return screened, question_of(request.turns[-1].content, config.pre_filter)


def _rate_gate(
    request: IngestRequest,
    turn_ids: tuple[str, ...],
    screenings: list[tuple[Screening, float]],
    *,
    rate_scope: str,
    config: PipelineConfig,
    deps: IngestDeps,
    known: set[str],
) -> tuple[dict[int, bool], float]:
    """Whether the rate gate admits each kept turn (by its place), its claims in one write, and
    each one's share of that write's time (ms). A turn accepted earlier is a duplicate whatever
    the window: it neither meets the gate (whose slot a later turn of the same words may hold)
    nor claims it. A turn's own time when the client gives it: a history replayed in one
    request does not rate-limit words said minutes or days apart."""
    started = time.perf_counter()
    gated = [
        index
        for index, ((screening, _), tid) in enumerate(zip(screenings, turn_ids, strict=True))
        if screening.reason is None and screening.text is not None and tid not in known
    ]
    if not gated:
        return {}, 0.0
    claims = [
        (
            rate_key(screenings[index][0], rate_scope),
            turn_ids[index],
            stamp.timestamp() if (stamp := request.turns[index].timestamp) else deps.clock(),
        )
        for index in gated
    ]
    window = config.pre_filter.rate_limit_window_secs
    admitted = dict(zip(gated, deps.rate_gate.admit_all(claims, window), strict=True))
    return admitted, (time.perf_counter() - started) * 1000 / len(gated)


def _preceding(masked: str, config: PipelineConfig) -> str | None:
    """What the next turn's episode is searched with (`memwrite.records.episode.preceding_of`),
    unless the words are of a topic the tenant excluded: those are kept in no form."""
    extract = config.extract
    if extract.exclude_topics and marked_topic(masked, extract.exclude_topics, extract.topic_terms):
        return None
    return preceding_of(masked)


def ingest_turns(
    request: IngestRequest,
    *,
    tenant: str,
    config: PipelineConfig,
    deps: IngestDeps,
    idempotency_key: str | None = None,
) -> IngestResponse:
    """Run stage 1 on a request and enqueue its survivors; never raises for a per-turn failure.

    Raises before anything is written: `TimestampInFuture` when a turn is dated too far ahead,
    `IdempotencyKeyReused` when the key named a different request.
    """
    now = datetime.fromtimestamp(deps.clock(), tz=UTC)
    _refuse_future_timestamps(request, now, config.ingest.max_clock_skew_secs)
    trace_id = trace_id_for_key(tenant, idempotency_key) if idempotency_key else new_trace_id()
    masked, screenings = _mask_and_screen(request, tenant, config, deps)
    turn_ids = _turn_ids(request, tenant, masked)
    # A retry under the same Idempotency-Key replays its trace: it must be the same request,
    # and the turns that trace already enqueued keep their spans (they are not "duplicates").
    trace = TraceRecord(
        trace_id=trace_id,
        tenant=tenant,
        user_id=request.user_id,
        session_id=request.session_id,
        agent_id=request.agent_id,
        source=request.source.value,
        created_at=now.isoformat(),
        turn_ids=turn_ids,
    )
    existing = deps.ledger.get_trace(tenant, trace_id) if idempotency_key else None
    if existing is not None and (differing := _differing_fields(existing, trace)):
        raise IdempotencyKeyReused(
            f"this Idempotency-Key was used for a different request ({', '.join(differing)})"
        )
    known = deps.ledger.already_enqueued(tenant, turn_ids)
    # The rate gate claims slots for the turns not accepted before.
    screened, last = _gate_all(
        request, turn_ids, tenant, config, deps, screenings=screenings, known=known, masked=masked
    )
    own: set[str] = set()
    if existing is not None:
        own = {
            span.item_id
            for span in deps.spans.spans_of(tenant, trace_id)
            if span.kind == "turn" and span.result in (SpanResult.PASS, SpanResult.TRANSFORM)
        }

    survivors: dict[str, _Screened] = {}
    for item in screened:
        if item.passed:
            survivors.setdefault(item.turn_id, item)  # a turn repeated in one request is one turn
    # Every turn accepted earlier is reported a duplicate, even one today's rules would skip.
    duplicates = set(known)
    to_send = [
        QueuedTurn(
            tenant=tenant,
            user_id=request.user_id,
            session_id=request.session_id,
            agent_id=request.agent_id,
            trace_id=trace_id,
            turn_id=tid,
            role=item.turn.role,
            text=item.screening.text or "",
            observed_at=item.turn.timestamp or now,
            source=request.source,
            context=item.screening.context,
            preceding=item.preceding,
            accepted_at=now,
        )
        for tid, item in survivors.items()
        if tid not in duplicates
    ]
    if existing is None:
        inputs = [
            TraceInput(role=turn.role, content=content, timestamp=turn.timestamp)
            for turn, content in zip(request.turns, masked, strict=True)
        ]
        deps.ledger.put_trace(trace, inputs)
    outcome = deps.queue.enqueue(to_send) if to_send else None
    sent = sorted(outcome.sent) if outcome else []
    failed = outcome.failed if outcome else {}
    raced = deps.ledger.record_enqueued(tenant, trace_id, sent) if sent else set()
    duplicates |= raced

    counted = [item for item in screened if item.turn_id not in own]
    spans = [
        _span_of(
            item,
            trace_id=trace_id,
            tenant=tenant,
            user_id=request.user_id,
            at=now,
            duplicates=duplicates,
            failed=failed,
        )
        for item in counted
    ]
    deps.spans.put_spans(spans)
    deps.ledger.set_last_question(
        tenant,
        request.user_id,
        request.session_id,
        last,
        now=now.timestamp(),
        retention_secs=config.pre_filter.short_answer_window_secs,
    )
    for span in spans:
        deps.metrics.count(STAGE, span.result.value, span.reason)
        deps.metrics.timing(STAGE, span.latency_ms)
    _count_rules(counted, deps.metrics)

    return IngestResponse(
        trace_id=trace_id,
        accepted=len(set(sent) - raced),
        skipped=[
            SkippedTurn(turn_id=item.turn_id, reason=item.reason)
            for item in screened
            if item.reason is not None and item.turn_id not in duplicates
        ],
        turn_ids=[item.turn_id for item in screened],
        duplicates=sorted(duplicates),
        failed=[
            FailedTurn(turn_id=tid, error=error, retry_after_secs=RETRY_AFTER_SECS)
            for tid, error in failed.items()
        ],
    )


def _refuse_future_timestamps(request: IngestRequest, now: datetime, max_skew_secs: int) -> None:
    latest = now + timedelta(seconds=max_skew_secs)
    for index, turn in enumerate(request.turns):
        if turn.timestamp is not None and turn.timestamp > latest:
            raise TimestampInFuture(f"turns[{index}].timestamp", max_skew_secs)


def _differing_fields(earlier: TraceRecord, retry: TraceRecord) -> list[str]:
    """What a request under a reused Idempotency-Key changed; turns cover role, content, time."""
    fields = ("user_id", "session_id", "agent_id", "source")
    differing = [name for name in fields if getattr(earlier, name) != getattr(retry, name)]
    return differing + (["turns"] if earlier.turn_ids != retry.turn_ids else [])


def _count_rules(items: list[_Screened], metrics: MetricsSink) -> None:
    """The drift signal: turns and sentences screened, rejections and dropped sentences by rule
    (README, "Pre-filter metrics")."""
    if not items:
        return
    metrics.event(STAGE, "prefilter.screened", len(items))
    metrics.event(STAGE, "prefilter.sentences", sum(item.screening.sentences for item in items))
    rejected = Counter(rule_name(item.reason) for item in items if item.reason)
    dropped = Counter(rule for item in items for rule in item.screening.dropped_by)
    for name, counts in (("prefilter.rejected", rejected), ("prefilter.sentence_dropped", dropped)):
        for rule, value in counts.items():
            metrics.by_rule(STAGE, name, rule, value)


def _span_of(
    item: _Screened,
    *,
    trace_id: str,
    tenant: str,
    user_id: str,
    at: datetime,
    duplicates: set[str],
    failed: dict[str, str],
) -> StageSpan:
    result: SpanResult
    reason: Reason | None
    if item.turn_id in duplicates:
        result, reason = SpanResult.REJECT, DuplicateTurn()
    elif item.reason is not None:
        result, reason = SpanResult.REJECT, item.reason
    elif item.turn_id in failed:
        result, reason = SpanResult.ERROR, EnqueueFailed(error=failed[item.turn_id])
    elif item.screening.context is not None:
        words = count_words(item.screening.text or "")
        short = ShortAnswer(word_count=words, redacted=item.screening.redacted)
        result, reason = SpanResult.TRANSFORM, short
    elif item.screening.redacted:
        result, reason = SpanResult.TRANSFORM, Redacted(kinds=item.screening.redacted)
    else:
        result, reason = SpanResult.PASS, None
    return StageSpan(
        trace_id=trace_id,
        tenant=tenant,
        user_id=user_id,
        stage=STAGE,
        item_id=item.turn_id,
        result=result,
        reason=reason,
        latency_ms=round(item.latency_ms, 3),
        at=at,
    )
