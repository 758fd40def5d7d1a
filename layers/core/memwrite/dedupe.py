"""Stage 4, dedupe: is this candidate a memory we already hold? Three tiers, cheapest first.

1. Content hash: the candidate's content-addressed memory id already exists.
2. Cosine similarity to the user's nearest memories of the same kind: at or above
   `dedupe_merge_threshold` it is the same memory (merge), below `dedupe_distinct_threshold` it
   is a new one.
3. An LLM judge only for the band in between; without one (offline) the band stays distinct,
   because a wrong merge loses a fact while a missed merge only costs a duplicate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from memwrite.config import DedupeConfig
from memwrite.embedder import Embedder

__all__ = ["DedupeDecision", "DedupeJudge", "Neighbour", "decide_duplicate"]


class DedupeJudge(Protocol):
    def same_memory(self, candidate: str, existing: str) -> bool:
        """True when both sentences state the same memory."""


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
    if judge.same_memory(text, nearest.text):
        return DedupeDecision(nearest.memory_id, 3, similarity)
    return DedupeDecision(None, None, similarity)
