"""Stage 5, conflict: what a keyed candidate supersedes, contradicts, or is superseded by.

Reads the candidate's entity_facts row (tenant, user, entity, predicate), adds the candidate's
observation (to the memory dedupe chose: itself, or the memory it merges into) and derives the
row's state with `memwrite.records.entity_facts.derive` (`memwrite.decisions.fact_row`, which
persist decides with again after a lost race): stateful predicates supersede by `observed_at`,
idempotent ones link contradictions. The decision, with the row version it was made on, goes
into the payload (`ConflictNote`); persist writes it only if it still finds that version.
Events and tasks are not keyed: they pass through with no note.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memwrite.config.settings import PipelineConfig
from memwrite.decisions.fact_row import decide_row
from memwrite.errors import StageInputError
from memwrite.models import SpanResult, StageSpan
from memwrite.payloads import ConflictNote, ItemsPayload
from memwrite.ports import MemoryStore, MetricsSink, SpanStore
from memwrite.reasons import Contradiction, LateArrival, PinnedMemory, Reason, Supersedes
from memwrite.records.store import FactRow, StoreItem
from memwrite.spans import item_span, record_spans, unrecorded

if TYPE_CHECKING:
    from memwrite.ports import StageAdapters

__all__ = ["STAGE", "ConflictDeps", "build_deps", "run"]

STAGE = "conflict"


def _reason(note: ConflictNote | None) -> Reason | None:
    if note is None:
        return None
    pinned = note.state.pinned_by.get(note.observation.memory_id)
    if pinned is not None:
        return PinnedMemory(memory_id=pinned)
    if note.contradicts:
        return Contradiction(count=len(note.contradicts))
    if note.born_superseded:
        return LateArrival()
    if note.supersedes:
        return Supersedes(count=len(note.supersedes))
    return None


@dataclass
class ConflictDeps:
    store: MemoryStore
    spans: SpanStore
    metrics: MetricsSink


def build_deps(adapters: StageAdapters) -> ConflictDeps:
    return ConflictDeps(
        store=adapters.memory_store(), spans=adapters.spans, metrics=adapters.metrics
    )


def run(payload: ItemsPayload, config: PipelineConfig, deps: ConflictDeps) -> ItemsPayload:
    """Decide every keyed candidate once, in order, each seeing the rows as the earlier ones of
    the batch will leave them (persist commits in the same order, one version each)."""
    rows: dict[str, FactRow] = {}
    items = []
    spans: list[StageSpan] = []
    replayed: list[StageSpan] = []  # items a redelivery finds applied
    for item in payload.items:
        started = time.perf_counter()
        if item.dedupe is None:
            raise StageInputError(f"{STAGE}: item {item.item_id} has no dedupe decision")
        store_item = StoreItem.of(payload, item)
        note = None
        fact_key = store_item.fact_key
        if fact_key is not None and not item.dedupe.already_applied:
            row = rows.get(fact_key) or deps.store.get_fact_row(
                payload.tenant, payload.user_id, fact_key
            )
            note = decide_row(store_item, item.dedupe, row)
            if note is not None:
                facts = {**row.facts, note.observation.memory_id: note.observation}
                rows[fact_key] = FactRow(facts=facts, version=row.version + 1)
        items.append(item.model_copy(update={"conflict": note}))
        reason = _reason(note)
        result = SpanResult.TRANSFORM if reason else SpanResult.PASS
        latency_ms = (time.perf_counter() - started) * 1000
        (replayed if item.dedupe.already_applied else spans).append(
            item_span(payload, item, STAGE, result=result, reason=reason, latency_ms=latency_ms)
        )
    record_spans([*spans, *unrecorded(replayed, deps.spans)], deps.spans, deps.metrics)
    return payload.model_copy(update={"items": items})
