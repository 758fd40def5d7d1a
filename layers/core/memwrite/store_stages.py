"""Stages 4-6 as pipeline tasks: dedupe and conflict decide, persist commits.

Dedupe and conflict plan every candidate of the batch in order against a `StagedStore` (so each
sees the ones before it) and record what they decided; persist then commits each candidate for
real, planning again from a fresh read: its result is the authoritative one if a concurrent
writer got in between (its span says what was finally written).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from memwrite.config import PipelineConfig
from memwrite.errors import MemwriteError
from memwrite.items import ConflictNote, DedupeNote, ItemsPayload, PipelineItem
from memwrite.models import SpanResult, StageSpan
from memwrite.persist import (
    PersistDeps,
    PersistOutcome,
    PersistResult,
    persist_candidate,
    plan_candidate,
)
from memwrite.ports import MetricsSink, SpanStore
from memwrite.reasons import (
    Contradiction,
    DuplicateConfirmed,
    LateArrival,
    Reason,
    StoreError,
    Supersedes,
)
from memwrite.spans import make_span, record_spans
from memwrite.staged_store import StagedStore

__all__ = ["StoreStageDeps", "conflict_stage", "dedupe_stage", "persist_stage"]


@dataclass
class StoreStageDeps:
    persist: PersistDeps
    spans: SpanStore
    metrics: MetricsSink


def _span(
    payload: ItemsPayload,
    item: PipelineItem,
    *,
    stage: str,
    result: SpanResult,
    reason: Reason | None,
    latency_ms: float,
) -> StageSpan:
    return make_span(
        trace_id=item.trace_id,
        tenant=payload.tenant,
        user_id=payload.user_id,
        stage=stage,
        item_id=item.item_id,
        result=result,
        reason=reason,
        latency_ms=latency_ms,
    )


def _plan_all(
    payload: ItemsPayload,
    config: PipelineConfig,
    deps: StoreStageDeps,
    note: Callable[[PipelineItem, PersistResult], tuple[PipelineItem, SpanResult, Reason | None]],
    stage: str,
) -> ItemsPayload:
    staged = StagedStore(deps.persist.store)
    planning = PersistDeps(
        store=staged,
        embedder=deps.persist.embedder,
        judge=deps.persist.judge,
        clock=deps.persist.clock,
    )
    items: list[PipelineItem] = []
    spans: list[StageSpan] = []
    for item in payload.items:
        started = time.perf_counter()
        plan = plan_candidate(payload.persist_item(item), config, planning)
        if plan.commit is not None:
            staged.commit(plan.commit)
        noted, result, reason = note(item, plan.result)
        items.append(noted)
        spans.append(
            _span(
                payload,
                item,
                stage=stage,
                result=result,
                reason=reason,
                latency_ms=(time.perf_counter() - started) * 1000,
            )
        )
    record_spans(spans, deps.spans, deps.metrics)
    return payload.model_copy(update={"items": items})


def _note_dedupe(
    item: PipelineItem, result: PersistResult
) -> tuple[PipelineItem, SpanResult, Reason | None]:
    decision = result.dedupe
    note = DedupeNote(target=decision.target, tier=decision.tier, similarity=decision.similarity)
    noted = item.model_copy(update={"dedupe": note})
    if decision.tier is not None:
        # Not a new memory, but not lost either: persist merges it (corroboration + 1).
        return noted, SpanResult.TRANSFORM, DuplicateConfirmed(tier=decision.tier)
    return noted, SpanResult.PASS, None


def _note_conflict(
    item: PipelineItem, result: PersistResult
) -> tuple[PipelineItem, SpanResult, Reason | None]:
    note = ConflictNote(
        supersedes=list(result.superseded),
        contradicts=list(result.contradicts),
        born_superseded=result.born_superseded,
    )
    noted = item.model_copy(update={"conflict": note})
    reason: Reason | None = None
    if result.contradicts:
        reason = Contradiction(count=len(result.contradicts))
    elif result.born_superseded:
        reason = LateArrival()
    elif result.superseded:
        reason = Supersedes(count=len(result.superseded))
    return noted, SpanResult.TRANSFORM if reason else SpanResult.PASS, reason


def dedupe_stage(
    payload: ItemsPayload, config: PipelineConfig, deps: StoreStageDeps
) -> ItemsPayload:
    return _plan_all(payload, config, deps, _note_dedupe, "dedupe")


def conflict_stage(
    payload: ItemsPayload, config: PipelineConfig, deps: StoreStageDeps
) -> ItemsPayload:
    return _plan_all(payload, config, deps, _note_conflict, "conflict")


def persist_stage(
    payload: ItemsPayload, config: PipelineConfig, deps: StoreStageDeps
) -> ItemsPayload:
    """Commit each candidate in order; a failure leaves error spans and propagates (Catch)."""
    items: list[PipelineItem] = []
    spans: list[StageSpan] = []
    for index, item in enumerate(payload.items):
        started = time.perf_counter()
        try:
            result = persist_candidate(payload.persist_item(item), config, deps.persist)
        except MemwriteError as exc:
            # Earlier candidates are committed (each atomically); this and later ones are not.
            failed = [
                _span(
                    payload,
                    rest,
                    stage="persist",
                    result=SpanResult.ERROR,
                    reason=StoreError(error=type(exc).__name__),
                    latency_ms=0.0,
                )
                for rest in payload.items[index:]
            ]
            record_spans([*spans, *failed], deps.spans, deps.metrics)
            raise
        items.append(
            item.model_copy(update={"memory_id": result.memory_id, "outcome": result.outcome.value})
        )
        reason = (
            DuplicateConfirmed(tier=result.dedupe.tier)
            if result.outcome is not PersistOutcome.STORED and result.dedupe.tier is not None
            else None
        )
        spans.append(
            _span(
                payload,
                item,
                stage="persist",
                result=SpanResult.PASS,
                reason=reason,
                latency_ms=(time.perf_counter() - started) * 1000,
            )
        )
    record_spans(spans, deps.spans, deps.metrics)
    return payload.model_copy(update={"items": items})
