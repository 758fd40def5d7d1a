"""Stage 4, dedupe: is this candidate a memory we already hold? Three tiers, cheapest first.

1. Content hash: the candidate's content-addressed memory id already exists.
2. Cosine similarity to the user's nearest memories of the same kind: at or above
   `dedupe_merge_threshold` it is the same memory (merge), below `dedupe_distinct_threshold` it
   is a new one.
3. An LLM judge only for the band in between; without one (offline) the band stays distinct,
   because a wrong merge loses a fact while a missed merge only costs a duplicate.

The tiers are `memwrite.decisions.duplicate`'s (persist makes the same decision again after a
lost race). The stage decides each candidate of a batch once, in order, and records the
decision in the payload (`DedupeNote`); later candidates of the batch see the earlier ones as
if they were stored (two near-identical candidates in one batch give one memory). Persist
commits the note as recorded, and decides again (`decide_on_read`) only if its transaction is
refused.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from memwrite.config.settings import PipelineConfig
from memwrite.costs.usage import LlmUsage
from memwrite.decisions.candidate_reads import read_candidate
from memwrite.decisions.duplicate import (
    PENDING_NEIGHBOURS,
    Known,
    decide_candidate,
    known_in_row,
    known_pending,
    known_unkeyed,
    own_memory,
    polarity,
)
from memwrite.model_ports import DedupeJudge, Embedder
from memwrite.models import SpanResult, StageSpan
from memwrite.payloads import DedupeNote, ItemsPayload
from memwrite.ports import MemoryIndex, MemoryStore, MetricsSink, SpanStore
from memwrite.reasons import DuplicateConfirmed, JudgeError
from memwrite.records.memory import normalise
from memwrite.records.store import StoreItem
from memwrite.spans import (
    failure_recorded,
    item_span,
    record_spans,
    unrecorded,
    usage_summary,
)

if TYPE_CHECKING:
    from memwrite.ports import StageAdapters

__all__ = ["STAGE", "DedupeDeps", "build_deps", "run"]

STAGE = "dedupe"


@dataclass
class DedupeDeps:
    store: MemoryStore
    embedder: Embedder
    spans: SpanStore
    metrics: MetricsSink
    judge: DedupeJudge | None = None
    index: MemoryIndex | None = None  # None: only not-yet-indexed events and tasks are compared


def build_deps(adapters: StageAdapters) -> DedupeDeps:
    return DedupeDeps(
        store=adapters.memory_store(),
        embedder=adapters.similarity_embedder(),
        spans=adapters.spans,
        metrics=adapters.metrics,
        judge=adapters.dedupe_judge(),
        index=adapters.search_index(),
    )


@dataclass
class _BatchSoFar:
    """What the batch's earlier candidates will write: later candidates must see it."""

    by_row: dict[str | None, list[Known]] = field(default_factory=dict)  # None: unkeyed
    by_id: dict[str, Known] = field(default_factory=dict)

    def add(self, item: StoreItem, note: DedupeNote) -> None:
        if note.target is not None:
            return
        candidate = item.candidate
        known = Known(
            note.memory_id,
            candidate.text,
            candidate.type,
            normalise(candidate.value),
            polarity(item),
            frozenset({item.turn_id}),
        )
        self.by_row.setdefault(item.fact_key, []).append(known)
        self.by_id[note.memory_id] = known


def run(payload: ItemsPayload, config: PipelineConfig, deps: DedupeDeps) -> ItemsPayload:
    """Decide every candidate once, in order; the decision goes into the payload."""
    batch = _BatchSoFar()
    pending: list[Known] | None = None  # read once per batch, only if an unkeyed type needs it
    items = []
    spans: list[StageSpan] = []
    replayed: list[StageSpan] = []  # items a redelivery finds applied
    calls: list[LlmUsage] = []
    malformed = 0
    for index, item in enumerate(payload.items):
        started = time.perf_counter()
        store_item = StoreItem.of(payload, item)
        # The decided candidates keep their spans; this one and the rest fail, visibly.
        with failure_recorded(
            STAGE,
            deps.spans,
            deps.metrics,
            reason=JudgeError,
            undone=payload.items[index:],
            error_span=lambda rest, error, _latency_ms: item_span(
                payload, rest, STAGE, result=SpanResult.ERROR, reason=error
            ),
            before=partial(_record, spans, replayed, calls, malformed, deps),
            started=started,
        ):
            reads = read_candidate(deps.store, store_item)
            if store_item.fact_key is not None:
                stored = known_in_row(reads)
            else:
                if pending is None:
                    memories = deps.store.pending_memories(
                        payload.tenant, payload.user_id, PENDING_NEIGHBOURS
                    )
                    pending = known_pending(memories)
                stored = known_unkeyed(store_item, pending, deps.store, deps.index)
            existing = own_memory(reads, store_item.memory_id) or batch.by_id.get(
                store_item.memory_id
            )
            note, judgement = decide_candidate(
                store_item,
                existing,
                [*stored, *batch.by_row.get(store_item.fact_key, [])],
                embedder=deps.embedder,
                config=config.dedupe,
                judge=deps.judge,
            )
        batch.add(store_item, note)
        items.append(item.model_copy(update={"dedupe": note}))
        # A duplicate is not lost: persist merges it (corroboration + 1).
        reason = DuplicateConfirmed(tier=note.tier) if note.tier is not None else None
        result = SpanResult.TRANSFORM if reason else SpanResult.PASS
        latency_ms = (time.perf_counter() - started) * 1000
        judged = judgement.calls if judgement is not None else ()
        (replayed if note.already_applied else spans).append(
            item_span(
                payload,
                item,
                STAGE,
                result=result,
                reason=reason,
                latency_ms=latency_ms,
                llm=usage_summary(judged),
            )
        )
        calls.extend(judged)
        malformed += judgement.malformed if judgement is not None else 0
    _record(spans, replayed, calls, malformed, deps)
    return payload.model_copy(update={"items": items})


def _record(
    spans: Sequence[StageSpan],
    replayed: Sequence[StageSpan],
    calls: Sequence[LlmUsage],
    malformed: int,
    deps: DedupeDeps,
) -> None:
    """The decided candidates' spans and what their judge calls cost."""
    record_spans([*spans, *unrecorded(replayed, deps.spans)], deps.spans, deps.metrics)
    if malformed:
        deps.metrics.event(STAGE, "dedupe_json_fail", malformed)
    deps.metrics.llm_usage(STAGE, calls)
