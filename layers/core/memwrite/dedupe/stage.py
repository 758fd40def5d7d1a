"""Stage 4, dedupe: is this candidate a memory we already hold? Three tiers, cheapest first.

1. Content hash: the candidate's content-addressed memory id already exists.
2. Cosine similarity to the user's nearest memories of the same kind: at or above
   `dedupe_merge_threshold` it is the same memory (merge), below `dedupe_distinct_threshold` it
   is a new one.
3. An LLM judge only for the band in between; without one (offline) the band stays distinct,
   because a wrong merge loses a fact while a missed merge only costs a duplicate.

The stage decides each candidate of a batch once, in order, and records the decision in the
payload (`DedupeNote`); later candidates of the batch see the earlier ones as if they were
stored (two near-identical candidates in one batch give one memory). Persist commits the note
as recorded, and decides again (`decide_on_read`) only if its transaction is refused.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from memwrite.candidate import MemoryType
from memwrite.config import DedupeConfig, PipelineConfig
from memwrite.entity_facts import canonical_predicate
from memwrite.index import IndexFilter
from memwrite.memory import KEYED_TYPES, MemoryUnit, normalise
from memwrite.models import SpanResult, StageSpan
from memwrite.payloads import DedupeNote, ItemsPayload
from memwrite.ports import (
    DedupeJudge,
    DedupeJudgement,
    Embedder,
    MemoryIndex,
    MemoryStore,
    MetricsSink,
    SpanStore,
)
from memwrite.reads import CandidateReads, read_candidate
from memwrite.reasons import DuplicateConfirmed, JudgeError
from memwrite.spans import (
    failure_recorded,
    item_span,
    record_spans,
    unrecorded,
    usage_summary,
)
from memwrite.store import StoreItem, VersionedMemory
from memwrite.usage import LlmUsage

if TYPE_CHECKING:
    from memwrite.ports import StageAdapters

__all__ = [
    "INDEXED_NEIGHBOURS",
    "PENDING_NEIGHBOURS",
    "STAGE",
    "DedupeDecision",
    "DedupeDeps",
    "Neighbour",
    "build_deps",
    "decide_duplicate",
    "decide_on_read",
    "run",
]

STAGE = "dedupe"
INDEXED_NEIGHBOURS = 10  # indexed memories (BM25 on the text) compared for unkeyed types
_WORD_RE = re.compile(r"\w+")
PENDING_NEIGHBOURS = 50  # unindexed memories compared for unkeyed types (events, tasks)


@dataclass(frozen=True)
class Neighbour:
    """A stored memory close enough to compare with (same user, type and polarity)."""

    memory_id: str
    text: str


@dataclass(frozen=True)
class DedupeDecision:
    target: str | None  # the memory to merge into, or None for a new memory
    tier: int | None  # which tier decided a merge
    similarity: float | None = None
    judgement: DedupeJudgement | None = None  # tier 3's answer, when the judge was asked


def decide_duplicate(
    text: str,
    neighbours: Sequence[Neighbour],
    *,
    embedder: Embedder,
    config: DedupeConfig,
    judge: DedupeJudge | None,
) -> DedupeDecision:
    """Tiers 2 and 3 (tier 1, the id, is checked by the caller before any embedding)."""
    if not neighbours:
        return DedupeDecision(None, None)
    vectors = embedder.embed([text, *(n.text for n in neighbours)])
    similarities = vectors[1:] @ vectors[0]
    best = int(np.argmax(similarities))
    similarity = float(similarities[best])
    nearest = neighbours[best]
    if similarity >= config.dedupe_merge_threshold:
        return DedupeDecision(nearest.memory_id, 2, similarity)
    if similarity < config.dedupe_distinct_threshold or judge is None:
        return DedupeDecision(None, None, similarity)
    judgement = judge.same_memory(text, nearest.text)
    if judgement.same:
        return DedupeDecision(nearest.memory_id, 3, similarity, judgement)
    return DedupeDecision(None, None, similarity, judgement)


@dataclass(frozen=True)
class _Known:
    """A memory a candidate may duplicate: stored, or written earlier in the same batch."""

    memory_id: str
    text: str
    type: MemoryType
    value: str  # normalised
    negated: bool  # canonical polarity for keyed types
    turns: frozenset[str]  # the turns that already corroborate it


def _polarity(item: StoreItem) -> bool:
    candidate = item.candidate
    if candidate.type in KEYED_TYPES:
        return canonical_predicate(candidate.attribute, candidate.negated)[1]
    return candidate.negated


def _known(memory: MemoryUnit, value: str, negated: bool) -> _Known:
    turns = frozenset(memory.corroborated_by)
    return _Known(memory.memory_id, memory.text, memory.type, value, negated, turns)


def _known_in_row(reads: CandidateReads) -> list[_Known]:
    return [
        _known(reads.memories[mid].memory, fact.value, fact.negated)
        for mid, fact in reads.row.facts.items()
        if mid in reads.memories
    ]


def _known_pending(pending: Sequence[MemoryUnit]) -> list[_Known]:
    return [_known(m, normalise(m.value), m.negated) for m in pending]


def _known_indexed(
    item: StoreItem, store: MemoryStore, index: MemoryIndex | None, exclude: set[str]
) -> list[_Known]:
    """Events and tasks have no entity_facts row: their neighbours are the user's memories of
    the same type whose text shares words with the candidate (BM25 on the index: it finds
    them whatever the index's embedder), read back from the store."""
    if index is None:
        return []
    candidate = item.candidate
    hits = index.bm25(
        item.tenant,
        item.user_id,
        candidate.text,
        INDEXED_NEIGHBOURS,
        filter=IndexFilter(types=frozenset({candidate.type})),
    )
    ids = [hit.memory_id for hit in hits if hit.memory_id not in exclude]
    found = store.get_memories(item.tenant, item.user_id, ids) if ids else {}
    return _known_pending([v.memory for v in found.values() if v.memory.active])


def _known_unkeyed(
    item: StoreItem, pending: list[_Known], store: MemoryStore, index: MemoryIndex | None
) -> list[_Known]:
    """Pending (written, not yet indexed) memories, then indexed ones."""
    return [*pending, *_known_indexed(item, store, index, {k.memory_id for k in pending})]


def _words(text: str) -> set[str]:
    return set(_WORD_RE.findall(normalise(text)))


def _share_a_word(a: str, b: str) -> bool:
    # Word tokens, not space-split: "berlin, germany" shares "berlin" with "berlin".
    return bool(_words(a) & _words(b))


def _neighbours(item: StoreItem, known: Sequence[_Known]) -> list[_Known]:
    candidate = item.candidate
    negated = _polarity(item)
    if candidate.type in KEYED_TYPES:
        # Same row, same polarity, and a value in common: "Berlin" vs "Berlin, Germany".
        value = candidate.value
        return [k for k in known if k.negated == negated and _share_a_word(k.value, value)]
    return [k for k in known if k.type is candidate.type and k.negated == negated]


def _decide(
    item: StoreItem,
    existing: _Known | None,
    known: Sequence[_Known],
    *,
    embedder: Embedder,
    config: DedupeConfig,
    judge: DedupeJudge | None,
) -> tuple[DedupeNote, DedupeJudgement | None]:
    memory_id = item.memory_id
    if existing is not None:  # tier 1: the same content-addressed memory
        applied = item.turn_id in existing.turns
        note = DedupeNote(
            memory_id=memory_id, target=memory_id, tier=1, similarity=1.0, already_applied=applied
        )
        return note, None
    neighbours = _neighbours(item, known)
    decision = decide_duplicate(
        item.candidate.text,
        [Neighbour(k.memory_id, k.text) for k in neighbours],
        embedder=embedder,
        config=config,
        judge=judge,
    )
    applied = decision.target is not None and any(
        k.memory_id == decision.target and item.turn_id in k.turns for k in neighbours
    )
    note = DedupeNote(
        memory_id=memory_id,
        target=decision.target,
        tier=decision.tier,
        similarity=decision.similarity,
        already_applied=applied,
    )
    return note, decision.judgement


def _existing(reads: CandidateReads, memory_id: str) -> _Known | None:
    found: VersionedMemory | None = reads.memories.get(memory_id)
    if found is None:
        return None
    memory = found.memory
    return _known(memory, normalise(memory.value), memory.negated)


def decide_on_read(
    item: StoreItem,
    reads: CandidateReads,
    store: MemoryStore,
    *,
    index: MemoryIndex | None,
    embedder: Embedder,
    config: DedupeConfig,
    judge: DedupeJudge | None,
) -> tuple[DedupeNote, DedupeJudgement | None]:
    """Decide one candidate against a fresh read of the store (persist's lost-race path); the
    judge's answer, when it was asked, comes along for its cost."""
    if item.candidate.type in KEYED_TYPES:
        known = _known_in_row(reads)
    else:
        pending = store.pending_memories(item.tenant, item.user_id, PENDING_NEIGHBOURS)
        known = _known_unkeyed(item, _known_pending(pending), store, index)
    existing = _existing(reads, item.memory_id)
    return _decide(item, existing, known, embedder=embedder, config=config, judge=judge)


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

    by_row: dict[str | None, list[_Known]] = field(default_factory=dict)  # None: unkeyed
    by_id: dict[str, _Known] = field(default_factory=dict)

    def add(self, item: StoreItem, note: DedupeNote) -> None:
        if note.target is not None:
            return
        candidate = item.candidate
        known = _Known(
            note.memory_id,
            candidate.text,
            candidate.type,
            normalise(candidate.value),
            _polarity(item),
            frozenset({item.turn_id}),
        )
        self.by_row.setdefault(item.fact_key, []).append(known)
        self.by_id[note.memory_id] = known


def run(payload: ItemsPayload, config: PipelineConfig, deps: DedupeDeps) -> ItemsPayload:
    """Decide every candidate once, in order; the decision goes into the payload."""
    batch = _BatchSoFar()
    pending: list[_Known] | None = None  # read once per batch, only if an unkeyed type needs it
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
                stored = _known_in_row(reads)
            else:
                if pending is None:
                    memories = deps.store.pending_memories(
                        payload.tenant, payload.user_id, PENDING_NEIGHBOURS
                    )
                    pending = _known_pending(memories)
                stored = _known_unkeyed(store_item, pending, deps.store, deps.index)
            existing = _existing(reads, store_item.memory_id) or batch.by_id.get(
                store_item.memory_id
            )
            note, judgement = _decide(
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
