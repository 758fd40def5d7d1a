"""`EmbeddedIndex`: the search index of the local runner and the tests, in-process.

BM25 ranks as SQLite FTS5's `bm25()` (stdlib `sqlite3`, Porter stemming) but is scored from
in-memory postings; kNN is faiss: an exact scan of a user's vectors while they are few, an
HNSW graph past `EXACT_MAX_VECTORS`. Each (tenant, user) is its own partition, so a query
never reads another user's rows and its cost does not grow with other users' data:

- SQLite: `docs` holds each document's filter fields, its terms as FTS5's tokenizer makes
  them (a JSON object of term -> count, from `Fts5Terms`) and, in a file, its vectors
  (float32 blobs), so that restarts and other processes can reload them; the partition is
  the user's slot (the `partitions` table). No table per user: creating one (FTS5 makes six)
  scanned the whole schema, and a connection parsed every user's tables on open, so both
  grew with the users (2 to 4 ms a new user in the load test's busiest hours, 14 ms an open).
- faiss: one in-memory `VectorPartition` per user (`vector_partition.py`, the kNN half; this
  module holds the SQLite half and the index). In a file it is loaded from `docs` on the
  user's first kNN query; in memory (nothing else can read the database) it is the only copy
  of the vectors. Graphs are never persisted: they are rebuilt when loaded.
- postings: one in-memory `LexicalPartition` per user (`lexical_partition.py`, the BM25
  half), kept in step with every write and, in a file, loaded from the user's `docs` rows'
  terms on the user's first BM25 query, held and bounded as the vector partitions are
  (below).

Query cost: kNN over a graph grows roughly with log(n). BM25 reads the postings of the
query's terms only and scores them with numpy (FTS5's `bm25()` computed its function for
every row holding a query word, then joined each to its filter fields: 5 to 12 ms of CPU per
query for a user with 11k documents, under 1 ms now, docs/search.md "Measured"); it still
grows with how many of the user's documents contain the query's terms, and `BM25_STOPWORDS`
keeps the commonest out.

Thread safety: every public method takes one lock, so an instance may be shared between
threads (calls are serialised; the local runner is single-threaded anyway). Several processes
may open one file: a commit by another connection (`PRAGMA data_version`) drops the cached
partitions, which are then reloaded from SQLite.

Memory per user: the SQLite connection holds no per-user state (one schema, the same
statements for every user). The vector partitions (~6.4 KB for a user with one memory, more
with more) and the postings are bounded: in a file at most `max_resident_partitions` of each
stay in memory, the least recently searched is dropped first and reloaded from SQLite on its
user's next query. Below `EXACT_MAX_VECTORS` a reloaded vector partition returns the same hits
and scores (reloaded postings always do); a graph is rebuilt in doc-id order and its
approximate hits may differ, as after any reload (another connection's commit). In memory the
partitions are the only copy of the vectors (and the postings) and all stay.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import numpy.typing as npt

from memwrite.adapters.sqlite.database import use_wal
from memwrite.adapters.sqlite.lexical_partition import (
    Fts5Terms,
    LexicalPartition,
    Terms,
    stored_terms,
)
from memwrite.adapters.sqlite.vector_partition import DocMeta, VectorPartition, unit_rows
from memwrite.claims.candidate import MemoryType, Tier
from memwrite.embedder import DEFAULT_DIMENSION
from memwrite.index import (
    BM25_STOPWORDS,
    DEFAULT_FUSION,
    DocKind,
    DocRemoval,
    Fusion,
    IndexFilter,
    IndexHit,
    IndexWrite,
    MemoryDoc,
    Vector,
    fuse_hybrid,
)

__all__ = ["EmbeddedIndex"]

# Users' vector partitions a file index keeps in memory (see "Memory per user"): ~1.6 MB of
# users with one memory each (README "Measured"); a search of another user reloads from SQLite.
DEFAULT_MAX_RESIDENT_PARTITIONS = 256

_WORD_RE = re.compile(r"[^\W_]+")
# The `docs` columns of a `DocMeta` (`_meta_of_row`), in its order.
_META_COLUMNS = "memory_id, type, topic, tier, confidence, kind, expires_at"

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
    terms TEXT NOT NULL DEFAULT '{}',  -- JSON: term -> count, FTS5's tokenizer (Fts5Terms)
    UNIQUE (slot, memory_id)
);
"""


def _query_words(query: str) -> list[str]:
    """The distinct words of `query` that are neither stop words nor single letters (the "s"
    of "user's"): each is one phrase of the BM25 query, as an FTS5 OR query of them was."""
    words = _WORD_RE.findall(unicodedata.normalize("NFKC", query).casefold())
    return list(
        dict.fromkeys(w for w in words if w not in BM25_STOPWORDS and (len(w) > 1 or w.isdigit()))
    )


class EmbeddedIndex:
    """`MemoryIndex` on SQLite FTS5 (BM25) and faiss (kNN), in one process."""

    def __init__(
        self,
        path: str = ":memory:",
        dimension: int = DEFAULT_DIMENSION,
        *,
        max_resident_partitions: int = DEFAULT_MAX_RESIDENT_PARTITIONS,
    ) -> None:
        if dimension < 1:
            raise ValueError(f"dimension must be positive, got {dimension}")
        if max_resident_partitions < 1:
            raise ValueError(
                f"max_resident_partitions must be positive, got {max_resident_partitions}"
            )
        self._path = path
        self._dimension = dimension
        self._max_resident_partitions = max_resident_partitions
        self._lock = threading.Lock()
        self._db = self._connect()
        self._db.executescript(_SCHEMA)
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(docs)")}
        if "kind" not in columns:  # a file written before documents had kinds
            self._db.execute("ALTER TABLE docs ADD COLUMN kind TEXT NOT NULL DEFAULT 'memory'")
        if "expires_at" not in columns:  # ... or expiries
            self._db.execute("ALTER TABLE docs ADD COLUMN expires_at REAL")
        if "terms" not in columns:  # ... or terms (they were in a FTS5 table per user)
            self._move_terms_to_docs()
        self._check_dimension()
        # In a file the vectors are stored too, so other processes and restarts can rebuild
        # partitions; in memory nothing else can read them, so the partition alone holds them.
        self._vectors_in_db = path != ":memory:"
        # Least recently searched first. An OrderedDict rather than an LRU cache class: writes
        # update a resident partition without making it recent, and in memory nothing is evicted.
        self._partitions: OrderedDict[int, VectorPartition] = OrderedDict()
        # The users' BM25 postings, held and bounded as the vector partitions are (same cap,
        # least recently searched dropped first, dropped with them on another commit).
        self._lexical: OrderedDict[int, LexicalPartition] = OrderedDict()
        self._terms = Fts5Terms()
        self._data_version = self._current_data_version()

    def _connect(self) -> sqlite3.Connection:
        # Autocommit mode; writes group their statements in explicit transactions.
        db = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        if self._path != ":memory:":
            # A derived index (the outbox can rebuild it): WAL and relaxed syncs are enough.
            use_wal(db)
            db.execute("PRAGMA synchronous=NORMAL")
        return db

    def upsert(self, doc: MemoryDoc) -> None:
        self.write([doc])

    def delete(self, tenant: str, user_id: str, memory_id: str) -> None:
        self.write([DocRemoval(tenant, user_id, memory_id)])

    def write(self, writes: Sequence[IndexWrite]) -> dict[int, str]:
        """Every write in one transaction (a COMMIT costs more than a document's rows), then
        the in-memory partitions in the same order; nothing is refused one by one: a failure
        rolls the whole back and raises."""
        if not writes:
            return {}
        matrices = [self._matrix(w) if isinstance(w, MemoryDoc) else None for w in writes]
        with self._lock:
            # Every document's terms in one round of the tokenizer (a removal has none).
            texts = [w.text for w in writes if isinstance(w, MemoryDoc)]
            found = iter(self._terms.of(texts) if texts else ())
            terms = [next(found) if isinstance(w, MemoryDoc) else {} for w in writes]
            self._drop_stale_partitions()
            with self._transaction():
                applied = [
                    self._write_doc(w, matrix, doc_terms)
                    if isinstance(w, MemoryDoc)
                    else self._remove_doc(w.tenant, w.user_id, w.memory_id)
                    for w, matrix, doc_terms in zip(writes, matrices, terms, strict=True)
                ]
            for w, matrix, doc_terms, done in zip(writes, matrices, terms, applied, strict=True):
                if done is None:
                    continue  # a removal of what was never there
                slot, doc_id = done
                if isinstance(w, MemoryDoc):
                    self._partitions_add(slot, doc_id, w, matrix, doc_terms)
                else:
                    if slot in self._partitions:
                        self._partitions[slot].remove(doc_id)
                    if slot in self._lexical:
                        self._lexical[slot].remove(doc_id)
        return {}

    def _matrix(self, doc: MemoryDoc) -> npt.NDArray[np.float32] | None:
        vectors = [] if doc.vector is None else [doc.vector]
        vectors.extend(doc.question_vectors)
        return unit_rows(vectors, self._dimension) if vectors else None

    def _partitions_add(
        self,
        slot: int,
        doc_id: int,
        doc: MemoryDoc,
        matrix: npt.NDArray[np.float32] | None,
        terms: Terms,
    ) -> None:
        """A written document into the user's resident partitions (in memory: made on first
        write, being the only copy)."""
        partition = self._partitions.get(slot)
        if partition is None and not self._vectors_in_db:
            partition = self._partitions[slot] = VectorPartition(self._dimension)
        if partition is not None:
            if matrix is None:
                partition.remove(doc_id)
            else:
                partition.add(doc_id, _meta_of(doc), matrix)
        lexical = self._lexical.get(slot)
        if lexical is None and not self._vectors_in_db:
            lexical = self._lexical[slot] = LexicalPartition()
        if lexical is not None:
            lexical.add(doc_id, _meta_of(doc), terms)

    def _remove_doc(self, tenant: str, user_id: str, memory_id: str) -> tuple[int, int] | None:
        """(slot, doc id) of the removed document; None when it was not there."""
        slot = self._slot(tenant, user_id)
        if slot is None:
            return None
        row = self._db.execute(
            "DELETE FROM docs WHERE slot = ? AND memory_id = ? RETURNING id", (slot, memory_id)
        ).fetchone()
        return None if row is None else (slot, int(row[0]))

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
                self._db.execute("DELETE FROM partitions WHERE slot = ?", (slot,))
            self._partitions.pop(slot, None)
            self._lexical.pop(slot, None)
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
        words = _query_words(query)
        if not words:
            return []
        with self._lock:
            self._drop_stale_partitions()
            slot = self._slot(tenant, user_id)
            if slot is None:
                return []
            partition = self._lexical_partition(slot)
            if partition is None:
                return []
            return partition.search(self._terms.phrases(words), k, filter)

    def hybrid(
        self,
        tenant: str,
        user_id: str,
        query: str,
        vector: Vector,
        k: int,
        *,
        filter: IndexFilter | None = None,
        fusion: Fusion = DEFAULT_FUSION,
    ) -> list[IndexHit]:
        lexical = self.bm25(tenant, user_id, query, k, filter=filter)
        semantic = self.knn(tenant, user_id, vector, k, filter=filter)
        return fuse_hybrid(lexical, semantic, k, fusion)

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
            self._terms.close()
            self._partitions.clear()
            self._lexical.clear()

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
            self._lexical.clear()
            self._data_version = version

    def _move_terms_to_docs(self) -> None:
        """A file written with a FTS5 table per user: each document's terms into `docs`, then
        those tables dropped, in one transaction (an interrupted move is redone whole)."""
        with self._transaction():
            columns = {row[1] for row in self._db.execute("PRAGMA table_info(docs)")}
            if "terms" in columns:
                return  # another process moved them meanwhile
            self._db.execute("ALTER TABLE docs ADD COLUMN terms TEXT NOT NULL DEFAULT '{}'")
            slots = [slot for (slot,) in self._db.execute("SELECT slot FROM partitions")]
            for slot in slots:
                table = f"fts_{int(slot)}"  # an integer of our own table, no caller text
                found = self._db.execute(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
                ).fetchone()
                if found is None:
                    continue
                self._db.executemany(
                    "UPDATE docs SET terms = ? WHERE id = ?",
                    [
                        (json.dumps(terms), doc_id)
                        for doc_id, terms in stored_terms(self._db, table).items()
                    ],
                )
                self._db.execute(f"DROP TABLE {table}")

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
        return int(slot)

    def _write_doc(
        self, doc: MemoryDoc, vectors: npt.NDArray[np.float32] | None, terms: Terms
    ) -> tuple[int, int]:
        """(slot, doc id) of the document written, its user's partition made if new."""
        slot = self._slot(doc.tenant, doc.user_id)
        if slot is None:
            slot = self._new_slot(doc.tenant, doc.user_id)
        doc_id = self._db.execute(
            "INSERT INTO docs (slot, memory_id, type, topic, tier, confidence, vectors, "
            "has_content, kind, expires_at, terms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (slot, memory_id) "
            "DO UPDATE SET type = excluded.type, topic = excluded.topic, tier = excluded.tier, "
            "confidence = excluded.confidence, vectors = excluded.vectors, "
            "has_content = excluded.has_content, kind = excluded.kind, "
            "expires_at = excluded.expires_at, terms = excluded.terms RETURNING id",
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
                json.dumps(terms),
            ),
        ).fetchone()[0]
        return slot, int(doc_id)

    def _partition(self, tenant: str, user_id: str) -> VectorPartition | None:
        slot = self._slot(tenant, user_id)
        if slot is None:
            return None
        partition = self._partitions.get(slot)
        if partition is not None:
            self._partitions.move_to_end(slot)
        elif self._vectors_in_db:
            partition = VectorPartition(self._dimension)
            rows = self._db.execute(
                f"SELECT id, vectors, has_content, {_META_COLUMNS} FROM docs "
                "WHERE slot = ? AND vectors IS NOT NULL ORDER BY id",
                (slot,),
            )
            for doc_id, blob, has_content, *fields in rows:
                meta = _meta_of_row(fields, has_content=bool(has_content))
                vectors = np.frombuffer(blob, dtype=np.float32).reshape(-1, self._dimension)
                partition.add(doc_id, meta, vectors)
            self._partitions[slot] = partition
            while len(self._partitions) > self._max_resident_partitions:
                self._partitions.popitem(last=False)  # reloaded from `docs` when searched again
        return partition

    def _lexical_partition(self, slot: int) -> LexicalPartition | None:
        """The BM25 postings of `slot`: resident, or (in a file) loaded from its documents'
        stored terms, the least recently searched evicted past `max_resident_partitions`."""
        partition = self._lexical.get(slot)
        if partition is not None:
            self._lexical.move_to_end(slot)
        elif self._vectors_in_db:
            partition = LexicalPartition()
            rows = self._db.execute(
                f"SELECT id, terms, {_META_COLUMNS} FROM docs WHERE slot = ? ORDER BY id", (slot,)
            )
            for doc_id, terms, *fields in rows:
                partition.add(doc_id, _meta_of_row(fields), json.loads(terms))
            self._lexical[slot] = partition
            while len(self._lexical) > self._max_resident_partitions:
                self._lexical.popitem(last=False)  # reloaded from SQLite when searched again
        return partition


def _meta_of(doc: MemoryDoc) -> DocMeta:
    return DocMeta.of(
        doc.memory_id,
        doc.type,
        doc.tier,
        doc.topic,
        doc.confidence,
        has_content=doc.vector is not None,
        kind=doc.kind,
        expires_at=doc.expires_at,
    )


def _meta_of_row(fields: Sequence[Any], *, has_content: bool = True) -> DocMeta:
    """`DocMeta` of the `_META_COLUMNS` of a `docs` row."""
    memory_id, type_, topic, tier, confidence, kind, expires_at = fields
    return DocMeta.of(
        memory_id,
        MemoryType(type_),
        Tier(tier),
        topic,
        confidence,
        has_content=has_content,
        kind=DocKind(kind),
        expires_at=expires_at,
    )


def _check_k(k: int) -> None:
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
