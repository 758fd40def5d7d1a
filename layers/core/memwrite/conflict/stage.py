"""Stage 5, conflict: what a keyed candidate supersedes, contradicts, or is superseded by.

Reads the candidate's entity_facts row (tenant, user, entity, predicate), adds the candidate's
observation (to the memory dedupe chose: itself, or the memory it merges into) and derives the
row's state with `memwrite.entity_facts.derive`: stateful predicates supersede by `observed_at`,
idempotent ones link contradictions. The decision, with the row version it was made on, goes
into the payload (`ConflictNote`); persist writes it only if it still finds that version.
Events and tasks are not keyed: they pass through with no note.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memwrite.config import PipelineConfig
from memwrite.entity_facts import FactObservation, canonical_predicate, derive
from memwrite.errors import StageInputError
from memwrite.memory import DIRECT_SOURCE, normalise
from memwrite.models import SpanResult, StageSpan
from memwrite.payloads import ConflictNote, DedupeNote, ItemsPayload
from memwrite.ports import MemoryStore, MetricsSink, SpanStore
from memwrite.reasons import Contradiction, LateArrival, PinnedMemory, Reason, Supersedes
from memwrite.spans import item_span, record_spans, unrecorded
from memwrite.store import FactRow, StoreItem

if TYPE_CHECKING:
    from memwrite.ports import StageAdapters

__all__ = ["STAGE", "ConflictDeps", "decide", "run"]

STAGE = "conflict"


def decide(item: StoreItem, dedupe: DedupeNote, row: FactRow) -> ConflictNote | None:
    """The row's state once this candidate is in it; None for unkeyed types."""
    fact_key = item.fact_key
    if fact_key is None:
        return None
    candidate = item.candidate
    target = dedupe.written_id
    prior = row.facts.get(target)
    direct = item.source == DIRECT_SOURCE
    # A direct write states the fact as explicitly as a correction: either may replace a pin.
    corrected_at = item.observed_at if candidate.correction or direct else None
    if prior is not None:  # a merge: the memory's own value and polarity, seen again
        corrections = [at for at in (prior.corrected_at, corrected_at) if at is not None]
        observation = prior.model_copy(
            update={
                "observed_at": max(prior.observed_at, item.observed_at),
                "direct": prior.direct or direct,
                "pinned": prior.pinned or item.pinned,
                "corrected_at": max(corrections, default=None),
            }
        )
    else:
        _, negated = canonical_predicate(candidate.attribute, candidate.negated)
        observation = FactObservation(
            memory_id=target,
            value=normalise(candidate.value),
            negated=negated,
            observed_at=item.observed_at,
            direct=direct,
            pinned=item.pinned,
            corrected_at=corrected_at,
        )
    stateful = candidate.predicate_is_stateful
    before = derive(row.facts, stateful=stateful)
    state = derive({**row.facts, target: observation}, stateful=stateful)
    return ConflictNote(
        fact_key=fact_key,
        row_version=row.version,
        observation=observation,
        state=state,
        supersedes=sorted(
            mid for mid in state.superseded_by if mid != target and mid not in before.superseded_by
        ),
        contradicts=sorted(state.contradicts.get(target, ())),
        born_superseded=target in state.superseded_by,
    )


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
            note = decide(store_item, item.dedupe, row)
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
