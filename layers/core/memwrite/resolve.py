"""Stage 3, resolve_refs: resolve each candidate's entity, drop what stays ambiguous.

Input: the extract task's output (ids and candidates); output: `ItemsPayload`, every item with
its stable entity id. The batch's turn texts (the pronoun window) come from the session log.
The cascade itself (pronoun rules, grammar, fuzzy aliases, the LLM judge) is
`memwrite.references`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime

from memwrite.config import PipelineConfig
from memwrite.entities import Entity, merge_entities
from memwrite.errors import WriteConflict
from memwrite.models import SpanResult, StageSpan
from memwrite.payloads import ExtractOutput, ItemsPayload, PipelineItem
from memwrite.ports import EntityStore, MetricsSink, ResolveJudge, SessionLog, SpanStore
from memwrite.reasons import ResolutionFailed
from memwrite.references import ResolvedCandidate, resolve_batch
from memwrite.spans import make_span, record_spans, usage_summary

__all__ = [
    "KNOWN_ENTITIES",
    "MAX_SAVE_ATTEMPTS",
    "STAGE",
    "ResolveDeps",
    "run",
    "save_entity",
]

STAGE = "resolve_refs"
KNOWN_ENTITIES = 500  # fuzzy matching sees this many of the user's most recent entities


MAX_SAVE_ATTEMPTS = 5


def save_entity(store: EntityStore, entity: Entity) -> Entity:
    """Insert `entity`, or merge it into the stored one (`merge_entities`), with an optimistic
    version check: a concurrent writer's aliases are re-read and kept, never overwritten."""
    for attempt in range(1, MAX_SAVE_ATTEMPTS + 1):
        found = store.get(entity.tenant, entity.user_id, entity.entity_id)
        merged = entity if found is None else merge_entities(found.entity, entity)
        if found is not None and merged == found.entity:
            return merged  # nothing new: a redelivery writes nothing
        try:
            store.put(merged, expected_version=None if found is None else found.version)
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


def run(payload: ExtractOutput, config: PipelineConfig, deps: ResolveDeps) -> ItemsPayload:
    started = time.perf_counter()
    turns = {turn.turn_id: turn for turn in payload.turns}
    logged = deps.session_log.recent(
        payload.tenant,
        payload.user_id,
        payload.session_id,
        "\uffff",
        config.extract.max_source_turns + len(turns),
    )
    texts = {turn.turn_id: turn.text for turn in logged if turn.turn_id in turns}
    resolution = resolve_batch(
        payload.candidates,
        {tid: texts[tid] for tid in turns if tid in texts},
        deps.entities.entities_of(payload.tenant, payload.user_id, KNOWN_ENTITIES),
        tenant=payload.tenant,
        user_id=payload.user_id,
        at=datetime.now(UTC),
        judge=deps.judge,
        model=config.extract.model,
    )
    for entity in resolution.upserts:
        save_entity(deps.entities, entity)
    for _ in range(resolution.judge_malformed):
        deps.metrics.event(STAGE, "resolve_json_fail")
    deps.metrics.llm_usage(STAGE, resolution.llm_calls)
    latency_ms = (time.perf_counter() - started) * 1000
    items: list[PipelineItem] = []
    spans: list[StageSpan] = []
    # The judge's usage is recorded once, on the batch's first span (the trace sums it).
    usage = usage_summary(resolution.llm_calls)
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
            make_span(
                trace_id=turn.trace_id,
                tenant=payload.tenant,
                user_id=payload.user_id,
                stage=STAGE,
                item_id=item.item_id,
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
