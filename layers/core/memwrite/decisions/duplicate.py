"""Is this candidate a memory we already hold? Dedupe's decision (stage 4), which persist
makes again on a fresh read when its transaction is refused (`decide_on_read`).

1. Content hash: the candidate's content-addressed memory id already exists.
2. Cosine similarity to the user's nearest memories of the same kind: at or above
   `dedupe_merge_threshold` it is the same memory (merge), below `dedupe_distinct_threshold` it
   is a new one.
3. An LLM judge only for the band in between; without one (offline) the band stays distinct,
   because a wrong merge loses a fact while a missed merge only costs a duplicate.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from memwrite.claims.candidate import MemoryType
from memwrite.config.settings import DedupeConfig
from memwrite.decisions.candidate_reads import CandidateReads
from memwrite.index import IndexFilter
from memwrite.model_ports import DedupeJudge, DedupeJudgement, Embedder
from memwrite.payloads import DedupeNote
from memwrite.ports import MemoryIndex, MemoryStore
from memwrite.records.entity_facts import canonical_predicate
from memwrite.records.memory import KEYED_TYPES, MemoryUnit, normalise
from memwrite.records.store import StoreItem, VersionedMemory

__all__ = [
    "INDEXED_NEIGHBOURS",
    "PENDING_NEIGHBOURS",
    "DedupeDecision",
    "Known",
    "Neighbour",
    "decide_candidate",
    "decide_duplicate",
    "decide_on_read",
    "known_in_row",
    "known_pending",
    "known_unkeyed",
    "own_memory",
    "polarity",
]

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
class Known:
    """A memory a candidate may duplicate: stored, or written earlier in the same batch."""

    memory_id: str
    text: str
    type: MemoryType
    value: str  # normalised
    negated: bool  # canonical polarity for keyed types
    turns: frozenset[str]  # the turns that already corroborate it


def polarity(item: StoreItem) -> bool:
    """The candidate's polarity as its row keeps it (canonical for keyed types)."""
    candidate = item.candidate
    if candidate.type in KEYED_TYPES:
        return canonical_predicate(candidate.attribute, candidate.negated)[1]
    return candidate.negated


def _known(memory: MemoryUnit, value: str, negated: bool) -> Known:
    turns = frozenset(memory.corroborated_by)
    return Known(memory.memory_id, memory.text, memory.type, value, negated, turns)


def known_in_row(reads: CandidateReads) -> list[Known]:
    """The stored memories of a keyed candidate's entity_facts row."""
    return [
        _known(reads.memories[mid].memory, fact.value, fact.negated)
        for mid, fact in reads.row.facts.items()
        if mid in reads.memories
    ]


def known_pending(pending: Sequence[MemoryUnit]) -> list[Known]:
    """Memories written and not yet indexed (the store's pending list)."""
    return [_known(m, normalise(m.value), m.negated) for m in pending]


def _known_indexed(
    item: StoreItem, store: MemoryStore, index: MemoryIndex | None, exclude: set[str]
) -> list[Known]:
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
    return known_pending([v.memory for v in found.values() if v.memory.active])


def known_unkeyed(
    item: StoreItem, pending: list[Known], store: MemoryStore, index: MemoryIndex | None
) -> list[Known]:
    """Pending (written, not yet indexed) memories, then indexed ones."""
    return [*pending, *_known_indexed(item, store, index, {k.memory_id for k in pending})]


def _words(text: str) -> set[str]:
    return set(_WORD_RE.findall(normalise(text)))


def _share_a_word(a: str, b: str) -> bool:
    # Word tokens, not space-split: "berlin, germany" shares "berlin" with "berlin".
    return bool(_words(a) & _words(b))


def _neighbours(item: StoreItem, known: Sequence[Known]) -> list[Known]:
    candidate = item.candidate
    negated = polarity(item)
    if candidate.type in KEYED_TYPES:
        # Same row, same polarity, and a value in common: "Berlin" vs "Berlin, Germany".
        value = candidate.value
        return [k for k in known if k.negated == negated and _share_a_word(k.value, value)]
    return [k for k in known if k.type is candidate.type and k.negated == negated]


def decide_candidate(
    item: StoreItem,
    existing: Known | None,
    known: Sequence[Known],
    *,
    embedder: Embedder,
    config: DedupeConfig,
    judge: DedupeJudge | None,
) -> tuple[DedupeNote, DedupeJudgement | None]:
    """Tier 1 on `existing` (the candidate's own id, stored), then tiers 2 and 3 on the
    neighbours among `known`; the judge's answer, when it was asked, comes along."""
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


def own_memory(reads: CandidateReads, memory_id: str) -> Known | None:
    """The candidate's own content-addressed memory, when the read found it stored."""
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
        known = known_in_row(reads)
    else:
        pending = store.pending_memories(item.tenant, item.user_id, PENDING_NEIGHBOURS)
        known = known_unkeyed(item, known_pending(pending), store, index)
    existing = own_memory(reads, item.memory_id)
    return decide_candidate(item, existing, known, embedder=embedder, config=config, judge=judge)
