"""One user's vectors for the embedded index's kNN (`EmbeddedIndex.knn`), in faiss.

An exact scan (`IndexFlatIP`) while the user has at most `EXACT_MAX_VECTORS` distinct vectors,
an HNSW graph past that. A partition is memory only: in a file, `EmbeddedIndex` stores the
vectors in SQLite too and rebuilds a partition from there (graphs are never persisted). Filters
(type, tier, topic, kind, confidence, expiry) are applied per row with numpy: a filtered search
widens its fetch until enough memories pass, and ends with an exact scan of the rows that pass.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import faiss
import numpy as np
import numpy.typing as npt

from memwrite.claims.candidate import MemoryType, Tier
from memwrite.index import DocKind, IndexFilter, IndexHit, MatchSource, Vector

__all__ = [
    "EXACT_MAX_VECTORS",
    "DocMeta",
    "VectorPartition",
    "field_mask",
    "grown",
    "unit_rows",
]

# Below this many vectors a user's kNN is an exact scan (cheaper than building a graph).
EXACT_MAX_VECTORS = 2_048
# HNSW graph quality. Memory texts cluster tightly (one template, many values), which takes a
# denser graph than the usual M=16/efConstruction=40: measured on the benchmark's memories,
# recall@10 against an exact scan went from 0.90 to 0.99 for about 2x build time.
_HNSW_NEIGHBOURS = 32  # faiss's M: links per vector
_HNSW_EF_CONSTRUCTION = 80  # candidate list while inserting
_HNSW_EF_SEARCH = 128  # candidate list of a graph search, raised to the number fetched
_FETCH_PER_HIT = 8  # vectors fetched per wanted memory: content + HyPE questions, and slack
_FETCH_GROWTH = 4  # when too few fetched vectors pass the filter, fetch this many times more
_INITIAL_CAPACITY = 64
_ADD_BATCH = 16_384  # vectors per faiss add: parallel graph inserts, bounded extra memory
_ROW_ARRAYS = (
    *("_vector", "_owner", "_live", "_question", "_type", "_tier", "_topic", "_confidence"),
    "_kind",
    "_expires",
)
_MEMORY_TYPES = tuple(MemoryType)
_TIERS = tuple(Tier)
_KINDS = tuple(DocKind)


def unit_rows(vectors: Sequence[Vector], dimension: int) -> npt.NDArray[np.float32]:
    """Stack and L2-normalise vectors so inner product is cosine; refuse what cannot be."""
    matrix = np.asarray(vectors, dtype=np.float32).reshape(len(vectors), -1)
    if matrix.shape[1] != dimension:
        raise ValueError(f"vectors must have dimension {dimension}, got {matrix.shape[1]}")
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    if not np.all(np.isfinite(norms)) or np.any(norms == 0.0):
        raise ValueError("vectors must be finite and non-zero")
    return np.asarray(matrix / norms, dtype=np.float32)


@dataclass(frozen=True)
class DocMeta:
    """What kNN filtering needs of one document, as codes that numpy can compare."""

    memory_id: str
    type_code: int
    tier_code: int
    topic: str
    confidence: float
    has_content: bool  # the first vector is the content's; the others are HyPE questions
    kind_code: int = 0
    expires_at: float = math.inf

    @classmethod
    def of(
        cls,
        memory_id: str,
        type: MemoryType,
        tier: Tier,
        topic: str,
        confidence: float,
        *,
        has_content: bool,
        kind: DocKind,
        expires_at: float | None,
    ) -> DocMeta:
        """A document's fields as codes (`expires_at` None: never expires)."""
        return cls(
            memory_id=memory_id,
            type_code=_MEMORY_TYPES.index(type),
            tier_code=_TIERS.index(tier),
            topic=topic,
            confidence=confidence,
            has_content=has_content,
            kind_code=_KINDS.index(kind),
            expires_at=math.inf if expires_at is None else expires_at,
        )


class VectorPartition:
    """The vectors of one user: distinct vectors in a faiss index, rows tying them to memories.

    A row is one (memory, vector) pair with the memory's filter fields. Identical vectors are
    indexed once: HyPE questions such as "Where does the user live?" recur across memories,
    and an HNSW graph cannot route through thousands of equidistant copies (measured: recall
    near 0 for such queries). faiss ids are distinct-vector ids; `_rows_of[v]` lists v's rows.

    A few vectors are scanned exactly (`IndexFlatIP`); past `EXACT_MAX_VECTORS` they move to
    an HNSW graph, whose storage then serves exact scans when a filter leaves too few graph
    hits. New vectors wait in `_pending` and join the index in batches at the next search, so
    bulk upserts build the graph in parallel. Deletes only mark rows dead (HNSW cannot remove):
    a vector without live rows is never returned, and the partition is rebuilt without dead
    rows once they outnumber the live ones.
    """

    def __init__(self, dimension: int) -> None:
        self._dimension = dimension
        self._reset()

    def _reset(self) -> None:
        self._graph: faiss.IndexHNSWFlat | None = None
        self._flat: faiss.Index = faiss.IndexFlatIP(self._dimension)  # or the graph's storage
        self._pending: list[npt.NDArray[np.float32]] = []
        self._vector_ids: dict[bytes, int] = {}  # digest of a vector -> its faiss id
        self._rows_of: list[list[int]] = []  # faiss id -> rows
        self._live_rows = np.zeros(_INITIAL_CAPACITY, dtype=np.int32)  # faiss id -> live rows
        self._size = 0  # rows
        self._dead = 0  # dead rows
        self._vector = np.zeros(_INITIAL_CAPACITY, dtype=np.int64)  # row -> faiss id
        self._owner = np.zeros(_INITIAL_CAPACITY, dtype=np.int64)  # row -> doc id
        self._live = np.zeros(_INITIAL_CAPACITY, dtype=bool)
        self._question = np.zeros(_INITIAL_CAPACITY, dtype=bool)  # row -> a HyPE question?
        self._type = np.zeros(_INITIAL_CAPACITY, dtype=np.int8)
        self._tier = np.zeros(_INITIAL_CAPACITY, dtype=np.int8)
        self._topic = np.zeros(_INITIAL_CAPACITY, dtype=np.int32)
        self._confidence = np.zeros(_INITIAL_CAPACITY, dtype=np.float32)
        self._kind = np.zeros(_INITIAL_CAPACITY, dtype=np.int8)
        self._expires = np.full(_INITIAL_CAPACITY, np.inf, dtype=np.float64)
        self._topics: dict[str, int] = {}
        self._docs: dict[int, tuple[str, npt.NDArray[np.int64]]] = {}  # doc id -> (memory, rows)

    @property
    def live_count(self) -> int:
        return self._size - self._dead

    def add(self, doc_id: int, meta: DocMeta, vectors: npt.NDArray[np.float32]) -> None:
        self.remove(doc_id)
        count = len(vectors)
        rows = np.arange(self._size, self._size + count, dtype=np.int64)
        self._size += count
        if self._size > len(self._owner):
            for name in _ROW_ARRAYS:
                setattr(self, name, grown(getattr(self, name), self._size))
        for row, vector in zip(rows.tolist(), vectors, strict=True):
            self._vector[row] = self._vector_id(vector)
            self._rows_of[self._vector[row]].append(row)
        np.add.at(self._live_rows, self._vector[rows], 1)
        self._owner[rows] = doc_id
        self._live[rows] = True
        self._question[rows] = True
        if meta.has_content:
            self._question[rows[0]] = False
        self._type[rows] = meta.type_code
        self._tier[rows] = meta.tier_code
        self._topic[rows] = self._topics.setdefault(meta.topic, len(self._topics))
        self._confidence[rows] = meta.confidence
        self._kind[rows] = meta.kind_code
        self._expires[rows] = meta.expires_at
        self._docs[doc_id] = (meta.memory_id, rows)

    def remove(self, doc_id: int) -> None:
        entry = self._docs.pop(doc_id, None)
        if entry is not None:
            rows = entry[1]
            self._live[rows] = False
            np.subtract.at(self._live_rows, self._vector[rows], 1)
            self._dead += len(rows)

    def search(
        self, query: npt.NDArray[np.float32], k: int, filter: IndexFilter | None
    ) -> list[IndexHit]:
        if self._dead > self.live_count:
            self._compact()
        if self.live_count == 0:
            return []
        self._index_up_to_date()
        vectors = len(self._rows_of)
        fetch = k * _FETCH_PER_HIT
        if self._graph is not None:
            alive = None
            if self._dead:
                alive = self._bitmap(self._live_rows[:vectors] > 0)
            while fetch < vectors:
                self._graph.hnsw.efSearch = max(_HNSW_EF_SEARCH, fetch)
                hits = self._hits(self._graph, query, fetch, alive, k=k, filter=filter, limit=fetch)
                if len(hits) == k:
                    return hits
                fetch *= _FETCH_GROWTH  # too few passed the filter: widen, then scan
        # Exact scan of the vectors with a row that passes, until k memories are covered.
        accepted = np.zeros(vectors, dtype=bool)
        rows = np.arange(self._size, dtype=np.int64)
        accepted[self._vector[rows[self._passes(rows, filter)]]] = True
        selected = int(np.count_nonzero(accepted))
        bitmap = self._bitmap(accepted)
        while True:
            fetch = min(fetch, selected)
            limit = None if fetch == selected else fetch
            hits = self._hits(self._flat, query, fetch, bitmap, k=k, filter=filter, limit=limit)
            if len(hits) == k or fetch == selected:
                return hits
            fetch *= _FETCH_GROWTH

    def _hits(
        self,
        index: faiss.Index,
        query: npt.NDArray[np.float32],
        fetch: int,
        bitmap: npt.NDArray[np.uint8] | None,
        *,
        k: int,
        filter: IndexFilter | None,
        limit: int | None,
    ) -> list[IndexHit]:
        """The best `k` memories among the rows of the `fetch` vectors nearest to `query`.

        Only the first `limit` rows of each vector are read: a generic HyPE question can be
        shared by thousands of memories, and their rows tie, so a few dozen suffice unless a
        filter rejects them (then the caller fetches more, and finally reads every row).
        """
        if fetch == 0:
            return []
        params = faiss.SearchParameters()
        if bitmap is not None:
            # faiss reads the bitmap through a raw pointer: `bitmap` outlives the search.
            params.sel = faiss.IDSelectorBitmap(len(self._rows_of), faiss.swig_ptr(bitmap))
        scores, ids = index.search(query.reshape(1, -1), fetch, params=params)
        found = ids[0] >= 0  # faiss pads with -1 when fewer vectors are allowed or reachable
        ids, scores = ids[0][found], scores[0][found]
        groups = [self._rows_of[i][:limit] for i in ids.tolist()]
        rows = np.fromiter(itertools.chain.from_iterable(groups), dtype=np.int64)
        row_scores = np.repeat(scores, [len(group) for group in groups])
        passed = self._passes(rows, filter)
        return self._best_per_memory(rows[passed], row_scores[passed], k)

    def _vector_id(self, vector: npt.NDArray[np.float32]) -> int:
        digest = hashlib.blake2b(vector.tobytes(), digest_size=16).digest()
        vector_id = self._vector_ids.get(digest)
        if vector_id is None:
            vector_id = self._vector_ids[digest] = len(self._rows_of)
            self._rows_of.append([])
            self._pending.append(vector)
            if vector_id >= len(self._live_rows):
                self._live_rows = grown(self._live_rows, vector_id + 1)
        return vector_id

    def _index_up_to_date(self) -> None:
        if self._graph is None and len(self._rows_of) > EXACT_MAX_VECTORS:
            self._graph = faiss.IndexHNSWFlat(
                self._dimension, _HNSW_NEIGHBOURS, faiss.METRIC_INNER_PRODUCT
            )
            self._graph.hnsw.efConstruction = _HNSW_EF_CONSTRUCTION
            if self._flat.ntotal:
                self._graph.add(self._flat.reconstruct_n(0, self._flat.ntotal))
            self._flat = self._graph.storage  # exact scans read the graph's own copy
        target = self._flat if self._graph is None else self._graph
        for start in range(0, len(self._pending), _ADD_BATCH):
            target.add(np.vstack(self._pending[start : start + _ADD_BATCH]))
        self._pending = []

    @staticmethod
    def _bitmap(mask: npt.NDArray[np.bool_]) -> npt.NDArray[np.uint8]:
        return np.packbits(mask, bitorder="little")  # faiss's IDSelectorBitmap bit order

    def _passes(
        self, rows: npt.NDArray[np.int64], filter: IndexFilter | None
    ) -> npt.NDArray[np.bool_]:
        """Which of `rows` are live and pass `filter` (cost grows with len(rows) only)."""
        return field_mask(
            rows,
            filter,
            live=self._live,
            type_=self._type,
            tier=self._tier,
            topic=self._topic,
            topics=self._topics,
            confidence=self._confidence,
            kind=self._kind,
            expires=self._expires,
        )

    def _best_per_memory(
        self,
        rows: npt.NDArray[np.int64],
        scores: npt.NDArray[np.float32],
        k: int,
    ) -> list[IndexHit]:
        """Each memory's best vector among `rows`; the top `k` memories, best first."""
        order = np.lexsort((self._owner[rows], -scores))  # by score, ties by doc id
        owners = self._owner[rows[order]]
        _, first = np.unique(owners, return_index=True)
        best = np.sort(first)[:k]  # first occurrence in score order = the memory's best
        sources = np.where(self._question[rows[order[best]]], 1, 0).tolist()
        kinds = (frozenset({MatchSource.CONTENT}), frozenset({MatchSource.QUESTION}))
        return [
            IndexHit(self._docs[int(owners[i])][0], float(scores[order[i]]), kinds[source])
            for i, source in zip(best, sources, strict=True)
        ]

    def _compact(self) -> None:
        """Rebuild the partition from its live rows only."""
        self._index_up_to_date()
        docs = [(doc_id, memory_id, rows) for doc_id, (memory_id, rows) in self._docs.items()]
        topics = {code: topic for topic, code in self._topics.items()}
        fields = [
            (
                DocMeta(
                    memory_id,
                    int(self._type[rows[0]]),
                    int(self._tier[rows[0]]),
                    topics[int(self._topic[rows[0]])],
                    float(self._confidence[rows[0]]),
                    not bool(self._question[rows[0]]),
                    int(self._kind[rows[0]]),
                    float(self._expires[rows[0]]),
                ),
                self._flat.reconstruct_batch(self._vector[rows]),
            )
            for _, memory_id, rows in docs
        ]
        self._reset()
        for (doc_id, _, _), (meta, vectors) in zip(docs, fields, strict=True):
            self.add(doc_id, meta, vectors)


def field_mask(
    rows: npt.NDArray[np.int64],
    filter: IndexFilter | None,
    *,
    live: npt.NDArray[np.bool_],
    type_: npt.NDArray[np.int8],
    tier: npt.NDArray[np.int8],
    topic: npt.NDArray[np.int32],
    topics: dict[str, int],
    confidence: npt.NDArray[np.float32],
    kind: npt.NDArray[np.int8],
    expires: npt.NDArray[np.float64],
) -> npt.NDArray[np.bool_]:
    """Which of `rows` are live and pass `filter`, given per-row columns of `DocMeta` codes
    (`topics`: topic -> its code); shared by the kNN and BM25 partitions."""
    mask = live[rows]
    if filter is None:
        return mask
    if filter.types is not None:
        mask &= np.isin(type_[rows], [_MEMORY_TYPES.index(t) for t in filter.types])
    if filter.tiers is not None:
        mask &= np.isin(tier[rows], [_TIERS.index(t) for t in filter.tiers])
    if filter.topics is not None:
        mask &= np.isin(topic[rows], [topics[t] for t in filter.topics if t in topics])
    if filter.kinds is not None:
        mask &= np.isin(kind[rows], [_KINDS.index(k) for k in filter.kinds])
    if filter.min_confidence is not None:
        # float32 storage: compare in float32 so a doc at exactly the floor passes.
        mask &= confidence[rows] >= np.float32(filter.min_confidence)
    if filter.live_at is not None:
        mask &= expires[rows] > filter.live_at
    return mask


def grown(array: npt.NDArray[Any], size: int) -> npt.NDArray[Any]:
    """`array` with room for at least `size` items (capacity doubles: amortised O(1) appends)."""
    capacity = len(array)
    while capacity < size:
        capacity *= 2
    return np.resize(array, capacity)
