"""`EmbeddedIndex`: the search index of the local runner and the tests, in-process.

BM25 is SQLite FTS5 (stdlib `sqlite3`, `bm25()` ranking, Porter stemming); kNN is faiss:
an exact scan of a user's vectors while they are few, an HNSW graph past
`_EXACT_MAX_VECTORS`. Each (tenant, user) is its own partition, so a query never reads
another user's rows and its cost does not grow with other users' data:

- SQLite: one FTS5 table per partition (`fts_<slot>`, the slot from the `partitions` table),
  so BM25 statistics and postings are the user's own; `docs` holds the filter fields and, in
  a file, the vectors (float32 blobs), so that restarts and other processes can reload them.
- faiss: one in-memory `_VectorPartition` per user. In a file it is loaded from `docs` on
  the user's first kNN query; in memory (nothing else can read the database) it is the only
  copy of the vectors. Graphs are never persisted: they are rebuilt when loaded.

Query cost: kNN over a graph grows roughly with log(n). BM25 in FTS5 scores every posting of
the query's words (no top-k pruning as in Lucene's block-max WAND), so it grows with how many
of the user's memories contain them; `BM25_STOPWORDS` keeps the commonest words out.

Thread safety: every public method takes one lock, so an instance may be shared between
threads (calls are serialised; the local runner is single-threaded anyway). Several processes
may open one file: a commit by another connection (`PRAGMA data_version`) drops the cached
partitions, which are then reloaded from SQLite.

Memory per user: a connection keeps every FTS5 table it has opened (its parsed configuration
and prepared statements: measured ~6 KB per table read, ~22 KB per table written) until it
closes, so a long-running process serving many users grew with each new one (README
"Measured", embedded mode). In a file, the connection is reopened once it has opened
`max_open_partitions` tables; the vector partitions are dropped with it and reloaded on demand.
The parsed schema itself (~2.5 KB per user per connection) stays: it is the price of one FTS5
table per user. The vector partitions (~6.4 KB for a user with one memory, more with more)
are bounded on their own, since kNN opens no FTS5 table: in a file at most
`max_resident_partitions` stay in memory, the least recently searched is dropped first and
reloaded from `docs` on its user's next kNN query. Below `_EXACT_MAX_VECTORS` a reloaded
partition returns the same hits and scores; a graph is rebuilt in doc-id order and its
approximate hits may differ, as after any reload (another connection's commit, a reopened
connection). In memory the partitions are the only copy of the vectors and all stay.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
import sqlite3
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import faiss
import numpy as np
import numpy.typing as npt

from memwrite.candidate import MemoryType
from memwrite.embedder import DEFAULT_DIMENSION
from memwrite.index import (
    BM25_STOPWORDS,
    DEFAULT_BM25_WEIGHT,
    DocKind,
    IndexFilter,
    IndexHit,
    MatchSource,
    MemoryDoc,
    Vector,
    fuse_hybrid,
)
from memwrite.memory import Tier

__all__ = ["EmbeddedIndex"]

# Below this many vectors a user's kNN is an exact scan (cheaper than building a graph).
_EXACT_MAX_VECTORS = 2_048
# HNSW graph quality. Memory texts cluster tightly (one template, many values), which takes a
# denser graph than the usual M=16/efConstruction=40: measured on the benchmark's memories,
# recall@10 against an exact scan went from 0.90 to 0.99 for about 2x build time.
_HNSW_NEIGHBOURS = 32  # faiss's M: links per vector
_HNSW_EF_CONSTRUCTION = 80  # candidate list while inserting
_HNSW_EF_SEARCH = 128  # candidate list of a graph search, raised to the number fetched
_FETCH_PER_HIT = 8  # vectors fetched per wanted memory: content + HyPE questions, and slack
_FETCH_GROWTH = 4  # when too few fetched vectors pass the filter, fetch this many times more
_INITIAL_CAPACITY = 64
# FTS5 tables a file connection may have opened before it is reopened (see "Memory per user").
DEFAULT_MAX_OPEN_PARTITIONS = 256
# Users' vector partitions a file index keeps in memory (see "Memory per user"): ~1.6 MB of
# users with one memory each (README "Measured"); a search of another user reloads from SQLite.
DEFAULT_MAX_RESIDENT_PARTITIONS = 256
_ADD_BATCH = 16_384  # vectors per faiss add: parallel graph inserts, bounded extra memory
_ROW_ARRAYS = (
    *("_vector", "_owner", "_live", "_question", "_type", "_tier", "_topic", "_confidence"),
    "_kind",
    "_expires",
)

_BM25_MATCH = frozenset({MatchSource.BM25})
_MEMORY_TYPES = tuple(MemoryType)
_TIERS = tuple(Tier)
_KINDS = tuple(DocKind)
_WORD_RE = re.compile(r"[^\W_]+")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS settings (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS partitions (
    slot INTEGER PRIMARY KEY,
    tenant TEXT NOT NULL,
    user_id TEXT NOT NULL,
    UNIQUE (tenant, user_id)
);
CREATE TABLE IF NOT EXISTS docs (
    id INTEGER PRIMARY KEY,
    slot INTEGER NOT NULL,
    memory_id TEXT NOT NULL,
    type TEXT NOT NULL,
    topic TEXT NOT NULL,
    tier TEXT NOT NULL,
    confidence REAL NOT NULL,
    vectors BLOB,  -- float32 rows, content vector first; NULL in memory or for BM25-only
    has_content INTEGER NOT NULL DEFAULT 1,  -- 0: every row of `vectors` is a HyPE question
    kind TEXT NOT NULL DEFAULT 'memory',  -- memwrite.index.DocKind
    expires_at REAL,  -- epoch seconds (MemoryDoc.expires_at); NULL: never
    UNIQUE (slot, memory_id)
);
"""


def _fts_table(slot: int) -> str:
    # Only ever an integer from our own table: no caller text reaches an identifier.
    return f"fts_{int(slot)}"


def _match_expression(query: str) -> str | None:
    """An FTS5 OR query of the words of `query` that are neither stop words nor single letters
    (the "s" of "user's"), each quoted so that no caller text is read as FTS5 syntax."""
    words = _WORD_RE.findall(unicodedata.normalize("NFKC", query).casefold())
    kept = dict.fromkeys(
        w for w in words if w not in BM25_STOPWORDS and (len(w) > 1 or w.isdigit())
    )
    return " OR ".join(f'"{word}"' for word in kept) or None


def _filter_sql(filter: IndexFilter | None) -> tuple[str, list[object]]:
    """SQL conditions on `docs d` for a filter; an empty set matches nothing, as `IN ()` does."""
    if filter is None:
        return "", []
    clauses: list[str] = []
    params: list[object] = []
    for column, values in (
        ("type", filter.types),
        ("topic", filter.topics),
        ("tier", filter.tiers),
        ("kind", filter.kinds),
    ):
        if values is not None:
            clauses.append(f"d.{column} IN ({', '.join('?' * len(values))})")
            params.extend(str(value) for value in sorted(values))
    if filter.min_confidence is not None:
        clauses.append("d.confidence >= ?")
        params.append(filter.min_confidence)
    if filter.live_at is not None:
        clauses.append("(d.expires_at IS NULL OR d.expires_at > ?)")
        params.append(filter.live_at)
    return "".join(f" AND {clause}" for clause in clauses), params


def _unit_rows(vectors: Sequence[Vector], dimension: int) -> npt.NDArray[np.float32]:
    """Stack and L2-normalise vectors so inner product is cosine; refuse what cannot be."""
    matrix = np.asarray(vectors, dtype=np.float32).reshape(len(vectors), -1)
    if matrix.shape[1] != dimension:
        raise ValueError(f"vectors must have dimension {dimension}, got {matrix.shape[1]}")
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    if not np.all(np.isfinite(norms)) or np.any(norms == 0.0):
        raise ValueError("vectors must be finite and non-zero")
    return np.asarray(matrix / norms, dtype=np.float32)


@dataclass(frozen=True)
class _DocMeta:
    """What kNN filtering needs of one document, as codes that numpy can compare."""

    memory_id: str
    type_code: int
    tier_code: int
    topic: str
    confidence: float
    has_content: bool  # the first vector is the content's; the others are HyPE questions
    kind_code: int = 0
    expires_at: float = math.inf


class _VectorPartition:
    """The vectors of one user: distinct vectors in a faiss index, rows tying them to memories.

    A row is one (memory, vector) pair with the memory's filter fields. Identical vectors are
    indexed once: HyPE questions such as "Where does the user live?" recur across memories,
    and an HNSW graph cannot route through thousands of equidistant copies (measured: recall
    near 0 for such queries). faiss ids are distinct-vector ids; `_rows_of[v]` lists v's rows.

    A few vectors are scanned exactly (`IndexFlatIP`); past `_EXACT_MAX_VECTORS` they move to
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

    def add(self, doc_id: int, meta: _DocMeta, vectors: npt.NDArray[np.float32]) -> None:
        self.remove(doc_id)
        count = len(vectors)
        rows = np.arange(self._size, self._size + count, dtype=np.int64)
        self._size += count
        if self._size > len(self._owner):
            for name in _ROW_ARRAYS:
                setattr(self, name, _grown(getattr(self, name), self._size))
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
                self._live_rows = _grown(self._live_rows, vector_id + 1)
        return vector_id

    def _index_up_to_date(self) -> None:
        if self._graph is None and len(self._rows_of) > _EXACT_MAX_VECTORS:
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
        mask = self._live[rows]
        if filter is None:
            return mask
        if filter.types is not None:
            codes = [_MEMORY_TYPES.index(t) for t in filter.types]
            mask &= np.isin(self._type[rows], codes)
        if filter.tiers is not None:
            codes = [_TIERS.index(t) for t in filter.tiers]
            mask &= np.isin(self._tier[rows], codes)
        if filter.topics is not None:
            codes = [self._topics[t] for t in filter.topics if t in self._topics]
            mask &= np.isin(self._topic[rows], codes)
        if filter.kinds is not None:
            mask &= np.isin(self._kind[rows], [_KINDS.index(k) for k in filter.kinds])
        if filter.min_confidence is not None:
            # float32 storage: compare in float32 so a doc at exactly the floor passes.
            mask &= self._confidence[rows] >= np.float32(filter.min_confidence)
        if filter.live_at is not None:
            mask &= self._expires[rows] > filter.live_at
        return mask

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
                _DocMeta(
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


def _grown(array: npt.NDArray[Any], size: int) -> npt.NDArray[Any]:
    """`array` with room for at least `size` items (capacity doubles: amortised O(1) appends)."""
    capacity = len(array)
    while capacity < size:
        capacity *= 2
    return np.resize(array, capacity)


class EmbeddedIndex:
    """`MemoryIndex` on SQLite FTS5 (BM25) and faiss (kNN), in one process."""

    def __init__(
        self,
        path: str = ":memory:",
        dimension: int = DEFAULT_DIMENSION,
        *,
        max_open_partitions: int = DEFAULT_MAX_OPEN_PARTITIONS,
        max_resident_partitions: int = DEFAULT_MAX_RESIDENT_PARTITIONS,
    ) -> None:
        if dimension < 1:
            raise ValueError(f"dimension must be positive, got {dimension}")
        if max_open_partitions < 1:
            raise ValueError(f"max_open_partitions must be positive, got {max_open_partitions}")
        if max_resident_partitions < 1:
            raise ValueError(
                f"max_resident_partitions must be positive, got {max_resident_partitions}"
            )
        self._path = path
        self._dimension = dimension
        self._max_open_partitions = max_open_partitions
        self._max_resident_partitions = max_resident_partitions
        self._lock = threading.Lock()
        self._db = self._connect()
        self._db.executescript(_SCHEMA)
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(docs)")}
        if "kind" not in columns:  # a file written before documents had kinds
            self._db.execute("ALTER TABLE docs ADD COLUMN kind TEXT NOT NULL DEFAULT 'memory'")
        if "expires_at" not in columns:  # ... or expiries
            self._db.execute("ALTER TABLE docs ADD COLUMN expires_at REAL")
        self._check_dimension()
        # In a file the vectors are stored too, so other processes and restarts can rebuild
        # partitions; in memory nothing else can read them, so the partition alone holds them.
        self._vectors_in_db = path != ":memory:"
        # Least recently searched first. An OrderedDict rather than an LRU cache class: writes
        # update a resident partition without making it recent, and in memory nothing is evicted.
        self._partitions: OrderedDict[int, _VectorPartition] = OrderedDict()
        self._open_slots: set[int] = set()  # FTS5 tables this connection has opened
        self._data_version = self._current_data_version()

    def _connect(self) -> sqlite3.Connection:
        # Autocommit mode; writes group their statements in explicit transactions.
        db = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        if self._path != ":memory:":
            # A derived index (the outbox can rebuild it): WAL and relaxed syncs are enough.
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
        return db

    def upsert(self, doc: MemoryDoc) -> None:
        vectors = [] if doc.vector is None else [doc.vector]
        vectors.extend(doc.question_vectors)
        matrix = _unit_rows(vectors, self._dimension) if vectors else None
        with self._lock:
            self._drop_stale_partitions()
            with self._transaction():
                slot = self._slot(doc.tenant, doc.user_id)
                if slot is None:
                    slot = self._new_slot(doc.tenant, doc.user_id)
                doc_id = self._write_doc(slot, doc, matrix)
            partition = self._partitions.get(slot)
            if partition is None and not self._vectors_in_db:
                partition = self._partitions[slot] = _VectorPartition(self._dimension)
            if partition is not None:
                if matrix is None:
                    partition.remove(doc_id)
                else:
                    partition.add(doc_id, _meta_of(doc), matrix)
            self._opened(slot)

    def delete(self, tenant: str, user_id: str, memory_id: str) -> None:
        with self._lock:
            self._drop_stale_partitions()
            slot = self._slot(tenant, user_id)
            if slot is None:
                return
            with self._transaction():
                row = self._db.execute(
                    "DELETE FROM docs WHERE slot = ? AND memory_id = ? RETURNING id",
                    (slot, memory_id),
                ).fetchone()
                if row is None:
                    return
                self._db.execute(f"DELETE FROM {_fts_table(slot)} WHERE rowid = ?", (row[0],))
            if slot in self._partitions:
                self._partitions[slot].remove(row[0])
            self._opened(slot)

    def delete_expired(self, now: float, limit: int) -> int:
        with self._lock:
            expired = self._db.execute(
                "SELECT p.tenant, p.user_id, d.memory_id FROM docs d "
                "JOIN partitions p ON p.slot = d.slot WHERE d.expires_at <= ? LIMIT ?",
                (now, limit),
            ).fetchall()
        for tenant, user_id, memory_id in expired:
            self.delete(tenant, user_id, memory_id)
        return len(expired)

    def delete_user(self, tenant: str, user_id: str) -> int:
        with self._lock:
            self._drop_stale_partitions()
            slot = self._slot(tenant, user_id)
            if slot is None:
                return 0
            with self._transaction():
                removed = self._db.execute("DELETE FROM docs WHERE slot = ?", (slot,)).rowcount
                self._db.execute(f"DROP TABLE IF EXISTS {_fts_table(slot)}")
                self._db.execute("DELETE FROM partitions WHERE slot = ?", (slot,))
            self._partitions.pop(slot, None)
            self._open_slots.discard(slot)
            return removed

    def knn(
        self,
        tenant: str,
        user_id: str,
        vector: Vector,
        k: int,
        *,
        filter: IndexFilter | None = None,
    ) -> list[IndexHit]:
        _check_k(k)
        query = np.asarray(vector, dtype=np.float32).reshape(-1)
        if query.shape[0] != self._dimension:
            raise ValueError(f"vector must have dimension {self._dimension}")
        norm = float(np.linalg.norm(query))
        if norm == 0.0:
            return []  # a zero vector is similar to nothing
        with self._lock:
            self._drop_stale_partitions()
            partition = self._partition(tenant, user_id)
            return [] if partition is None else partition.search(query / norm, k, filter)

    def bm25(
        self,
        tenant: str,
        user_id: str,
        query: str,
        k: int,
        *,
        filter: IndexFilter | None = None,
    ) -> list[IndexHit]:
        _check_k(k)
        expression = _match_expression(query)
        if expression is None:
            return []
        with self._lock:
            slot = self._slot(tenant, user_id)
            if slot is None:
                return []
            fts = _fts_table(slot)
            # bm25() is lower-is-better; negate it so every method ranks higher-is-better.
            # Ties go by doc id. Without a filter, `docs` is read for the k hits only: joining
            # it per matching row doubles the cost of a query with common words.
            if filter is None:
                ranked = self._db.execute(
                    f"SELECT rowid, -bm25({fts}) AS score FROM {fts} WHERE {fts} MATCH ? "
                    "ORDER BY score DESC, rowid LIMIT ?",
                    (expression, k),
                ).fetchall()
                marks = ", ".join("?" * len(ranked))
                names = dict(
                    self._db.execute(
                        f"SELECT id, memory_id FROM docs WHERE id IN ({marks})",
                        [doc_id for doc_id, _ in ranked],
                    ).fetchall()
                )
                rows = [(names[doc_id], score) for doc_id, score in ranked]
            else:
                conditions, params = _filter_sql(filter)
                rows = self._db.execute(
                    f"SELECT d.memory_id, -bm25({fts}) AS score FROM {fts} "
                    f"JOIN docs d ON d.id = {fts}.rowid WHERE {fts} MATCH ?{conditions} "
                    "ORDER BY score DESC, d.id LIMIT ?",
                    [expression, *params, k],
                ).fetchall()
            self._opened(slot)
        return [IndexHit(memory_id, float(score), _BM25_MATCH) for memory_id, score in rows]

    def hybrid(
        self,
        tenant: str,
        user_id: str,
        query: str,
        vector: Vector,
        k: int,
        *,
        filter: IndexFilter | None = None,
        bm25_weight: float = DEFAULT_BM25_WEIGHT,
    ) -> list[IndexHit]:
        lexical = self.bm25(tenant, user_id, query, k, filter=filter)
        semantic = self.knn(tenant, user_id, vector, k, filter=filter)
        return fuse_hybrid(lexical, semantic, k, bm25_weight)

    @property
    def resident_partitions(self) -> int:
        """How many users' vector partitions are in memory: in a file, at most
        `max_resident_partitions`."""
        with self._lock:
            return len(self._partitions)

    def count(self, tenant: str, user_id: str) -> int:
        with self._lock:
            slot = self._slot(tenant, user_id)
            if slot is None:
                return 0
            row = self._db.execute("SELECT count(*) FROM docs WHERE slot = ?", (slot,)).fetchone()
            return int(row[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()
            self._partitions.clear()

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def _check_dimension(self) -> None:
        self._db.execute(
            "INSERT OR IGNORE INTO settings (name, value) VALUES ('dimension', ?)",
            (str(self._dimension),),
        )
        stored = self._db.execute("SELECT value FROM settings WHERE name = 'dimension'").fetchone()
        if int(stored[0]) != self._dimension:
            raise ValueError(f"index at this path has dimension {stored[0]}, not {self._dimension}")

    def _current_data_version(self) -> int:
        return int(self._db.execute("PRAGMA data_version").fetchone()[0])

    def _drop_stale_partitions(self) -> None:
        """Another connection committed: our cached vectors may be stale, reload lazily."""
        if not self._vectors_in_db:
            return  # no other connection can reach an in-memory database
        version = self._current_data_version()
        if version != self._data_version:
            self._partitions.clear()
            self._data_version = version

    def _opened(self, slot: int) -> None:
        """Count the FTS5 table of `slot` as opened; past the cap, reopen the connection, which
        frees them all. Its partitions go too: commits of other connections made while
        reopening would escape `PRAGMA data_version`, so they are reloaded from SQLite."""
        if not self._vectors_in_db:
            return  # reopening an in-memory database would lose it
        self._open_slots.add(slot)
        if len(self._open_slots) <= self._max_open_partitions:
            return
        self._db.close()
        self._db = self._connect()
        self._open_slots.clear()
        self._partitions.clear()
        self._data_version = self._current_data_version()

    def _slot(self, tenant: str, user_id: str) -> int | None:
        row = self._db.execute(
            "SELECT slot FROM partitions WHERE tenant = ? AND user_id = ?", (tenant, user_id)
        ).fetchone()
        return None if row is None else int(row[0])

    def _new_slot(self, tenant: str, user_id: str) -> int:
        slot = self._db.execute(
            "INSERT INTO partitions (tenant, user_id) VALUES (?, ?) RETURNING slot",
            (tenant, user_id),
        ).fetchone()[0]
        self._db.execute(
            f"CREATE VIRTUAL TABLE {_fts_table(slot)} USING fts5("
            "text, tokenize = 'porter unicode61 remove_diacritics 2')"
        )
        return int(slot)

    def _write_doc(self, slot: int, doc: MemoryDoc, vectors: npt.NDArray[np.float32] | None) -> int:
        doc_id = self._db.execute(
            "INSERT INTO docs (slot, memory_id, type, topic, tier, confidence, vectors, "
            "has_content, kind, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (slot, memory_id) "
            "DO UPDATE SET type = excluded.type, topic = excluded.topic, tier = excluded.tier, "
            "confidence = excluded.confidence, vectors = excluded.vectors, "
            "has_content = excluded.has_content, kind = excluded.kind, "
            "expires_at = excluded.expires_at RETURNING id",
            (
                slot,
                doc.memory_id,
                doc.type.value,
                doc.topic,
                doc.tier.value,
                doc.confidence,
                None if vectors is None or not self._vectors_in_db else vectors.tobytes(),
                doc.vector is not None,
                doc.kind.value,
                doc.expires_at,
            ),
        ).fetchone()[0]
        fts = _fts_table(slot)
        self._db.execute(f"DELETE FROM {fts} WHERE rowid = ?", (doc_id,))
        self._db.execute(f"INSERT INTO {fts} (rowid, text) VALUES (?, ?)", (doc_id, doc.text))
        return int(doc_id)

    def _partition(self, tenant: str, user_id: str) -> _VectorPartition | None:
        slot = self._slot(tenant, user_id)
        if slot is None:
            return None
        partition = self._partitions.get(slot)
        if partition is not None:
            self._partitions.move_to_end(slot)
        elif self._vectors_in_db:
            partition = _VectorPartition(self._dimension)
            rows = self._db.execute(
                "SELECT id, memory_id, type, topic, tier, confidence, vectors, has_content, kind, "
                "expires_at FROM docs "
                "WHERE slot = ? AND vectors IS NOT NULL ORDER BY id",
                (slot,),
            )
            for (
                doc_id,
                memory_id,
                type_,
                topic,
                tier,
                confidence,
                blob,
                has_content,
                kind,
                expires_at,
            ) in rows:
                meta = _DocMeta(
                    memory_id=memory_id,
                    type_code=_MEMORY_TYPES.index(MemoryType(type_)),
                    tier_code=_TIERS.index(Tier(tier)),
                    topic=topic,
                    confidence=confidence,
                    has_content=bool(has_content),
                    kind_code=_KINDS.index(DocKind(kind)),
                    expires_at=math.inf if expires_at is None else expires_at,
                )
                vectors = np.frombuffer(blob, dtype=np.float32).reshape(-1, self._dimension)
                partition.add(doc_id, meta, vectors)
            self._partitions[slot] = partition
            while len(self._partitions) > self._max_resident_partitions:
                self._partitions.popitem(last=False)  # reloaded from `docs` when searched again
        return partition


def _meta_of(doc: MemoryDoc) -> _DocMeta:
    return _DocMeta(
        memory_id=doc.memory_id,
        type_code=_MEMORY_TYPES.index(doc.type),
        tier_code=_TIERS.index(doc.tier),
        topic=doc.topic,
        confidence=doc.confidence,
        has_content=doc.vector is not None,
        kind_code=_KINDS.index(doc.kind),
        expires_at=math.inf if doc.expires_at is None else doc.expires_at,
    )


def _check_k(k: int) -> None:
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
