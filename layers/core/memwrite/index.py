"""What the search index holds and answers: documents, filters, hits and hybrid score fusion.

The port itself is `memwrite.ports.MemoryIndex`. `memwrite.adapters.sqlite.embedded_index`
implements it locally and in tests (SQLite FTS5 + faiss), `memwrite.adapters.aws.opensearch_index`
on AWS; both pass `tests/unit/test_index_contract.py` (OpenSearch against a real cluster, when
`OPENSEARCH_URL` is set). Every call is scoped by tenant and user, and nothing ever crosses users.

Scores: `knn` returns cosine similarity (higher is closer), `bm25` a BM25 score whose scale is
the backend's own (compare ranks, not values, across backends), `hybrid` the fused score in
[0, 1] computed by `fuse_hybrid` (docs/design.md §12), one of OpenSearch's two hybrid
processors by `Fusion.method`:

- `rrf`, the score-ranker-processor: each list adds weight / (rank_constant + rank), ranks
  from 1; only the order of a list counts, not its scores' scale. Divided by the best possible
  sum, 1 / (rank_constant + 1), so that first in both lists is 1.0.
- `min_max`, the normalization-processor with `min_max` normalisation and a weighted
  `arithmetic_mean` combination.

The weights are `bm25_weight` and `1 - bm25_weight` either way (OpenSearch requires weights
that sum to 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import numpy.typing as npt

from memwrite.claims.candidate import MemoryType, Tier

__all__ = [
    "BM25_STOPWORDS",
    "DEFAULT_BM25_WEIGHT",
    "DEFAULT_FUSION",
    "DEFAULT_RANK_CONSTANT",
    "DocKind",
    "DocRemoval",
    "Fusion",
    "FusionMethod",
    "IndexFilter",
    "IndexHit",
    "IndexWrite",
    "MatchSource",
    "MemoryDoc",
    "Vector",
    "fuse_hybrid",
]

Vector = npt.NDArray[np.float32]
"""One embedding: shape (dimension,), float32."""

DEFAULT_BM25_WEIGHT = 0.3
DEFAULT_RANK_CONSTANT = 60  # RRF's k, as in Cormack et al. (2009) and OpenSearch's default
# Words `bm25` leaves out of queries (with single letters, such as the "s" of "user's"):
# Lucene's English stop words, question words, and "user", which memory texts use in nearly
# every sentence. They add almost nothing to a BM25 score but make it read most postings.
# An OpenSearch adapter gives its query analyzer this list, so both backends match alike.
BM25_STOPWORDS = frozenset(
    {
        *("a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into"),
        *("is", "it", "no", "not", "of", "on", "or", "such", "that", "the", "their", "then"),
        *("there", "these", "they", "this", "to", "was", "will", "with"),
        *("what", "where", "when", "who", "whom", "which", "why", "how", "do", "does", "did"),
        *("has", "have", "had", "i", "me", "my", "you", "your", "user", "users"),
    }
)
# What OpenSearch's min_max gives a score equal to the minimum, so that being found at all
# still counts for more than being absent (MinMaxScoreNormalizationTechnique.MIN_SCORE).
_MIN_NORMALISED = 0.001


class DocKind(StrEnum):
    """What a document is: a distilled memory, or an episode (a kept turn's own words)."""

    MEMORY = "memory"
    EPISODE = "episode"


_MEMORIES_ONLY = frozenset({DocKind.MEMORY})


# eq=False: numpy arrays do not compare to a single bool, so identity is the only sane equality.
@dataclass(frozen=True, eq=False)
class MemoryDoc:
    """One memory as the search index holds it (docs/design.md §12)."""

    memory_id: str
    tenant: str
    user_id: str
    text: str
    type: MemoryType
    topic: str
    tier: Tier
    confidence: float
    vector: Vector | None = None
    """The content embedding; None for memories that are BM25-only (tasks)."""
    question_vectors: tuple[Vector, ...] = ()
    """HyPE: embeddings of the questions this memory answers."""
    kind: DocKind = DocKind.MEMORY
    """Episodes (`memory_id` = `episode:<turn id>`) carry text and a content vector only."""
    expires_at: float | None = None
    """Epoch seconds after which the document is out of every `IndexFilter.live_at` query (an
    episode's retention: on AWS its item is deleted by TTL, later and without an outbox row)."""


@dataclass(frozen=True)
class DocRemoval:
    """A document to take out of every query (absent: nothing to do)."""

    tenant: str
    user_id: str
    memory_id: str


IndexWrite = MemoryDoc | DocRemoval
"""One write of `MemoryIndex.write`: a document put (replacing its id's), or one removed."""


class MatchSource(StrEnum):
    """Why a hit matched: its text (BM25), its content vector or one of its HyPE questions."""

    BM25 = "bm25"
    CONTENT = "content"
    QUESTION = "question"


@dataclass(frozen=True)
class IndexHit:
    memory_id: str
    score: float
    matched: frozenset[MatchSource] = frozenset()
    """Which queries found it: `bm25` hits say BM25, `knn` hits the vector that scored best,
    `hybrid` hits every list they were in."""


@dataclass(frozen=True)
class IndexFilter:
    """Constraints on the documents a query may return; None means "any"."""

    types: frozenset[MemoryType] | None = None
    topics: frozenset[str] | None = None
    tiers: frozenset[Tier] | None = None
    min_confidence: float | None = None
    kinds: frozenset[DocKind] | None = _MEMORIES_ONLY
    """A filter matches memories only unless it names kinds (None: any); no filter at all
    matches every document."""
    live_at: float | None = None
    """Epoch seconds: only documents without `expires_at`, or expiring after it."""


class FusionMethod(StrEnum):
    """How `hybrid` combines its BM25 and kNN lists (see the module docstring)."""

    RRF = "rrf"
    MIN_MAX = "min_max"


@dataclass(frozen=True)
class Fusion:
    """One way of fusing BM25 and kNN hits: `pipeline.search` for memories, `pipeline.episodes`
    for episodes."""

    method: FusionMethod = FusionMethod.RRF
    bm25_weight: float = DEFAULT_BM25_WEIGHT  # the vectors get the rest
    rank_constant: int = DEFAULT_RANK_CONSTANT  # rrf only

    def __post_init__(self) -> None:
        if not 0.0 <= self.bm25_weight <= 1.0:
            raise ValueError(f"bm25_weight must be within [0, 1], got {self.bm25_weight}")
        if self.rank_constant < 1:
            raise ValueError(f"rank_constant must be at least 1, got {self.rank_constant}")


DEFAULT_FUSION = Fusion()


def _reciprocal_ranks(hits: Sequence[IndexHit], rank_constant: int) -> dict[str, float]:
    """Each hit's share of RRF, scaled so that rank 1 gives 1.0."""
    return {
        hit.memory_id: (rank_constant + 1) / (rank_constant + rank)
        for rank, hit in enumerate(hits, start=1)
    }


def _min_max(hits: Sequence[IndexHit]) -> dict[str, float]:
    if not hits:
        return {}
    low = min(hit.score for hit in hits)
    high = max(hit.score for hit in hits)
    if high == low:
        return {hit.memory_id: 1.0 for hit in hits}
    return {hit.memory_id: ((hit.score - low) / (high - low)) or _MIN_NORMALISED for hit in hits}


def fuse_hybrid(
    bm25_hits: Sequence[IndexHit],
    knn_hits: Sequence[IndexHit],
    k: int,
    fusion: Fusion = DEFAULT_FUSION,
) -> list[IndexHit]:
    """The top `k` of both lists (each best first), fused by `fusion`; absent from a list
    counts 0. Ties are broken by memory id so that every backend returns the same order."""
    if fusion.method is FusionMethod.RRF:
        lexical = _reciprocal_ranks(bm25_hits, fusion.rank_constant)
        semantic = _reciprocal_ranks(knn_hits, fusion.rank_constant)
    else:
        lexical, semantic = _min_max(bm25_hits), _min_max(knn_hits)
    weight = fusion.bm25_weight
    matched: dict[str, frozenset[MatchSource]] = {}
    for hit in (*bm25_hits, *knn_hits):
        matched[hit.memory_id] = matched.get(hit.memory_id, frozenset()) | hit.matched
    fused = [
        IndexHit(
            memory_id,
            weight * lexical.get(memory_id, 0.0) + (1.0 - weight) * semantic.get(memory_id, 0.0),
            matched[memory_id],
        )
        for memory_id in lexical.keys() | semantic.keys()
    ]
    fused.sort(key=lambda hit: (-hit.score, hit.memory_id))
    return fused[:k]
