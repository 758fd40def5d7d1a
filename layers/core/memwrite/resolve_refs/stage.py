"""Stage 3, resolve_refs: resolve each candidate's entity, drop what stays ambiguous.

Input: the extract task's output (ids and candidates); output: `ItemsPayload`, every item with
its stable entity id. The batch's turn texts (the pronoun window) come from the session log.
The cascade itself (pronoun rules, grammar, fuzzy aliases, the LLM judge) is
`memwrite.resolve_refs.references`. Entity writes are conditional on the batch's source traces: the
candidates of a turn whose user was erased in flight are rejected (`UserErased`) and nothing
of that turn reaches the entities.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from memwrite.claims.candidate import Candidate
from memwrite.claims.entities import Entity, merge_entities
from memwrite.config.settings import PipelineConfig
from memwrite.costs.usage import LlmUsage
from memwrite.errors import SourceErased, WriteConflict
from memwrite.model_ports import ResolveJudge
from memwrite.models import SpanResult, StageSpan
from memwrite.payloads import ExtractedTurn, ExtractOutput, ItemsPayload, PipelineItem
from memwrite.ports import EntityStore, MetricsSink, SessionLog, SpanStore
from memwrite.reasons import JudgeError, ResolutionFailed, UserErased
from memwrite.resolve_refs.references import BatchResolution, ResolvedCandidate, resolve_batch
from memwrite.spans import failure_recorded, item_span, record_spans, usage_summary

if TYPE_CHECKING:
    from memwrite.ports import StageAdapters

__all__ = [
    "KNOWN_ENTITIES",
    "MAX_SAVE_ATTEMPTS",
    "STAGE",
    "ResolveDeps",
    "build_deps",
    "run",
    "save_entity",
]

STAGE = "resolve_refs"
KNOWN_ENTITIES = 500  # fuzzy matching sees this many of the user's most recent entities


MAX_SAVE_ATTEMPTS = 5


def save_entity(store: EntityStore, entity: Entity, source_trace_ids: Sequence[str]) -> Entity:
    """Insert `entity`, or merge it into the stored one (`merge_entities`), with an optimistic
    version check: a concurrent writer's aliases are re-read and kept, never overwritten.
    `SourceErased` (a source trace's user was erased) propagates: nothing is written."""
    for attempt in range(1, MAX_SAVE_ATTEMPTS + 1):
        found = store.get(entity.tenant, entity.user_id, entity.entity_id)
        merged = entity if found is None else merge_entities(found.entity, entity)
        if found is not None and merged == found.entity:
            return merged  # nothing new: a redelivery writes nothing
        try:
            store.put(
                merged,
                expected_version=None if found is None else found.version,
                source_trace_ids=source_trace_ids,
            )
        except WriteConflict:
            if attempt == MAX_SAVE_ATTEMPTS:
                raise
            continue
        return merged
    raise AssertionError("unreachable: the loop returns or raises")


@dataclass
class ResolveDeps:
    entities: EntityStore
    session_log: SessionLog
    spans: SpanStore
    metrics: MetricsSink
    judge: ResolveJudge | None = None
    clock: Callable[[], float] = field(default=time.time)


def build_deps(adapters: StageAdapters) -> ResolveDeps:
    return ResolveDeps(
        entities=adapters.entities(),
        session_log=adapters.session_log(),
        spans=adapters.spans,
        metrics=adapters.metrics,
        judge=adapters.resolve_judge(),
    )


@dataclass
class _Resolved:
    """The batch resolved without the turns of `erased` traces (their users were erased)."""

    resolution: BatchResolution
    erased: frozenset[str]
    llm_calls: list[LlmUsage]
    judge_malformed: int


def _resolve_and_save(
    payload: ExtractOutput, texts: Mapping[str, str], config: PipelineConfig, deps: ResolveDeps
) -> _Resolved:
    """Resolve the batch and save its entities, each save conditional on the batch's traces.

    A trace found erased is left out and the rest resolved again (at most once per trace of
    the batch): nothing of an erased turn (its candidates, its text in the pronoun window)
    reaches the entities. What was saved before the erasure's mark is deleted by the erasure.
    """
    trace_of = {turn.turn_id: turn.trace_id for turn in payload.turns}
    erased: set[str] = set()
    calls: list[LlmUsage] = []
    malformed = 0
    while True:
        live = [c for c in payload.candidates if trace_of[c.source_turn_id or ""] not in erased]
        resolution = resolve_batch(
            live,
            {tid: text for tid, text in texts.items() if trace_of[tid] not in erased},
            deps.entities.entities_of(payload.tenant, payload.user_id, KNOWN_ENTITIES),
            tenant=payload.tenant,
            user_id=payload.user_id,
            at=datetime.now(UTC),
            judge=deps.judge,
            model=config.task_model("resolve_judge"),
        )
        calls.extend(resolution.llm_calls)
        malformed += resolution.judge_malformed
        sources = sorted({trace for trace in trace_of.values() if trace not in erased})
        try:
            for entity in resolution.upserts:
                save_entity(deps.entities, entity, sources)
        except SourceErased as exc:
            erased.add(exc.trace_id)
            continue
        return _Resolved(resolution, frozenset(erased), calls, malformed)


def _unresolved(candidate: Candidate, turns: Mapping[str, ExtractedTurn]) -> PipelineItem:
    """The candidate as an item with no entity yet: its span id on a failure or an erasure."""
    turn = turns[candidate.source_turn_id or ""]
    return PipelineItem(
        candidate=candidate,
        entity_id="",
        turn_id=turn.turn_id,
        trace_id=turn.trace_id,
        observed_at=turn.observed_at,
    )


def run(payload: ExtractOutput, config: PipelineConfig, deps: ResolveDeps) -> ItemsPayload:
    started = time.perf_counter()
    turns = {turn.turn_id: turn for turn in payload.turns}
    logged = deps.session_log.recent(
        payload.tenant,
        payload.user_id,
        payload.session_id,
        "\uffff",
        config.extract.max_source_turns + len(turns),
        now=deps.clock(),
    )
    texts = {turn.turn_id: turn.text for turn in logged if turn.turn_id in turns}
    with failure_recorded(
        STAGE,
        deps.spans,
        deps.metrics,
        started=started,
        reason=JudgeError,
        undone=payload.candidates,
        error_span=lambda candidate, error, latency_ms: item_span(
            payload,
            _unresolved(candidate, turns),
            STAGE,
            result=SpanResult.ERROR,
            reason=error,
            latency_ms=latency_ms,
        ),
    ):
        resolved_batch = _resolve_and_save(
            payload, {tid: texts[tid] for tid in turns if tid in texts}, config, deps
        )
    resolution = resolved_batch.resolution
    for _ in range(resolved_batch.judge_malformed):
        deps.metrics.event(STAGE, "resolve_json_fail")
    deps.metrics.llm_usage(STAGE, resolved_batch.llm_calls)
    latency_ms = (time.perf_counter() - started) * 1000
    items: list[PipelineItem] = []
    spans: list[StageSpan] = []
    # The judge's usage is recorded once, on the batch's first span (the trace sums it).
    usage = usage_summary(resolved_batch.llm_calls)
    for candidate in payload.candidates:
        turn = turns[candidate.source_turn_id or ""]
        if turn.trace_id in resolved_batch.erased:
            spans.append(
                item_span(
                    payload,
                    _unresolved(candidate, turns),
                    STAGE,
                    result=SpanResult.REJECT,
                    reason=UserErased(),
                    latency_ms=latency_ms,
                    llm=usage if not spans else None,
                )
            )
    for resolved in resolution.resolutions:
        turn = turns[resolved.candidate.source_turn_id or ""]
        item = PipelineItem(
            candidate=resolved.candidate,
            entity_id=resolved.entity_id if isinstance(resolved, ResolvedCandidate) else "",
            turn_id=turn.turn_id,
            trace_id=turn.trace_id,
            observed_at=turn.observed_at,
        )
        if isinstance(resolved, ResolvedCandidate):
            items.append(item)
        spans.append(
            item_span(
                payload,
                item,
                STAGE,
                result=SpanResult.PASS
                if isinstance(resolved, ResolvedCandidate)
                else SpanResult.REJECT,
                reason=None
                if isinstance(resolved, ResolvedCandidate)
                else ResolutionFailed(detail=resolved.detail),
                latency_ms=latency_ms,
                llm=usage if not spans else None,
            )
        )
    record_spans(spans, deps.spans, deps.metrics)
    return ItemsPayload(
        tenant=payload.tenant,
        user_id=payload.user_id,
        session_id=payload.session_id,
        source=payload.source,
        turns=payload.turns,
        items=items,
    )
