"""One user's BM25 postings for the embedded index (`EmbeddedIndex.bm25`), in memory.

SQLite FTS5 stays the stored copy of the text, but its `bm25()` scores every row that holds a
query word (thousands for a conversational query), and joins each to its filter fields. A
`LexicalPartition` holds the user's postings (term -> documents and term counts) and the
filter fields as numpy columns, so a query reads the postings of its own terms only and scores
them in a few vector operations.

The ranking is FTS5's: the same terms (`Fts5Terms` runs FTS5's own tokenizer, or reads the
user's FTS5 table through `fts5vocab`), one phrase per query word, and FTS5's BM25
(k1 = 1.2, b = 0.75, idf = ln((N - n + 0.5) / (n + 0.5)) floored at 1e-6, N and the average
length over all of the user's documents whatever the filter), ties by doc id.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt

from memwrite.adapters.sqlite.vector_partition import DocMeta, field_mask, grown
from memwrite.index import IndexFilter, IndexHit, MatchSource

__all__ = ["FTS5_TOKENIZE", "Fts5Terms", "LexicalPartition"]

# The FTS5 tokenizer of every partition's table and of `Fts5Terms`: one definition, one ranking.
FTS5_TOKENIZE = "porter unicode61 remove_diacritics 2"
# FTS5's bm25() constants (sqlite ext/fts5/fts5_aux.c).
_K1 = 1.2
_B = 0.75
_MIN_IDF = 1e-6  # a word in over half the documents still counts, a little
_INITIAL_CAPACITY = 64
_CACHED_WORDS = 4_096  # query words whose terms `Fts5Terms.phrases` keeps (cleared when full)
_BM25_MATCH = frozenset({MatchSource.BM25})
_COLUMNS = (
    *("_doc", "_length", "_live", "_type", "_tier", "_topic", "_confidence", "_kind"),
    "_expires",
)

Terms = dict[str, int]  # term -> occurrences in one text


class Fts5Terms:
    """Texts' terms as FTS5's tokenizer makes them, from a scratch in-memory FTS5 table.

    The table is contentless (`content=''`): only its index is read, and emptying it is one
    'delete-all' where deleting rows of a table with content tokenizes each text again."""

    def __init__(self) -> None:
        self._db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        self._db.execute(
            f"CREATE VIRTUAL TABLE t USING fts5(text, content = '', tokenize = '{FTS5_TOKENIZE}')"
        )
        self._db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, instance)")
        self._word_terms: dict[str, tuple[str, ...]] = {}

    def phrases(self, words: Sequence[str]) -> list[str]:
        """The terms of query words, one per word as FTS5 counts phrases (a word FTS5 splits
        gives each part). Cached: a query's words recur (a search runs one query per kind),
        and the tokenizer's round trip costs about as much as scoring."""
        missing = [word for word in dict.fromkeys(words) if word not in self._word_terms]
        if missing:
            if len(self._word_terms) + len(missing) > _CACHED_WORDS:
                self._word_terms.clear()
            for word, terms in zip(missing, self.of(missing), strict=True):
                self._word_terms[word] = tuple(terms)
        return [term for word in words for term in self._word_terms[word]]

    def of(self, texts: Sequence[str]) -> list[Terms]:
        """Each text's terms with their counts (their sum is FTS5's length of the text)."""
        self._db.executemany("INSERT INTO t (rowid, text) VALUES (?, ?)", enumerate(texts))
        terms: list[Terms] = [{} for _ in texts]
        for doc, term, count in self._db.execute(
            "SELECT doc, term, count(*) FROM v GROUP BY doc, term"
        ):
            terms[doc][term] = count
        self._db.execute("INSERT INTO t (t) VALUES ('delete-all')")
        return terms

    def close(self) -> None:
        self._db.close()


def stored_terms(db: sqlite3.Connection, fts_table: str) -> dict[int, Terms]:
    """The terms FTS5 stored for each row of `fts_table` (a trusted identifier), by rowid."""
    vocab = f"temp.{fts_table}_vocab"
    db.execute(f"CREATE VIRTUAL TABLE {vocab} USING fts5vocab(main, {fts_table}, instance)")
    try:
        terms: dict[int, Terms] = {}
        for doc, term, count in db.execute(
            f"SELECT doc, term, count(*) FROM {vocab} GROUP BY doc, term"
        ):
            terms.setdefault(doc, {})[term] = count
        return terms
    finally:
        db.execute(f"DROP TABLE {vocab}")


class LexicalPartition:
    """The postings and filter fields of one user's documents.

    A document takes a slot (a row of the numpy columns); a removed document's slot is reused.
    Postings are dicts (cheap to change) turned into arrays on the first query that reads a
    term after it changed.
    """

    def __init__(self) -> None:
        self._slots: dict[int, int] = {}  # doc id -> slot
        self._free: list[int] = []
        self._memory_ids: list[str] = []  # slot -> memory id
        self._terms_of: list[Terms] = []  # slot -> its terms (to remove its postings)
        self._postings: dict[str, dict[int, int]] = {}  # term -> slot -> count
        self._arrays: dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]] = {}
        self._total_length = 0
        self._topics: dict[str, int] = {}
        self._doc = np.zeros(_INITIAL_CAPACITY, dtype=np.int64)
        self._length = np.zeros(_INITIAL_CAPACITY, dtype=np.float64)
        self._live = np.zeros(_INITIAL_CAPACITY, dtype=bool)
        self._type = np.zeros(_INITIAL_CAPACITY, dtype=np.int8)
        self._tier = np.zeros(_INITIAL_CAPACITY, dtype=np.int8)
        self._topic = np.zeros(_INITIAL_CAPACITY, dtype=np.int32)
        self._confidence = np.zeros(_INITIAL_CAPACITY, dtype=np.float32)
        self._kind = np.zeros(_INITIAL_CAPACITY, dtype=np.int8)
        self._expires = np.full(_INITIAL_CAPACITY, np.inf, dtype=np.float64)

    def __len__(self) -> int:
        return len(self._slots)

    def add(self, doc_id: int, meta: DocMeta, terms: Terms) -> None:
        self.remove(doc_id)
        if self._free:
            slot = self._free.pop()
            self._memory_ids[slot] = meta.memory_id
            self._terms_of[slot] = terms
        else:
            slot = len(self._memory_ids)
            self._memory_ids.append(meta.memory_id)
            self._terms_of.append(terms)
            if slot >= len(self._doc):
                for name in _COLUMNS:
                    setattr(self, name, grown(getattr(self, name), slot + 1))
        self._slots[doc_id] = slot
        length = sum(terms.values())
        self._total_length += length
        self._doc[slot] = doc_id
        self._length[slot] = length
        self._live[slot] = True
        self._type[slot] = meta.type_code
        self._tier[slot] = meta.tier_code
        self._topic[slot] = self._topics.setdefault(meta.topic, len(self._topics))
        self._confidence[slot] = meta.confidence
        self._kind[slot] = meta.kind_code
        self._expires[slot] = meta.expires_at
        for term, count in terms.items():
            self._postings.setdefault(term, {})[slot] = count
            self._arrays.pop(term, None)

    def remove(self, doc_id: int) -> None:
        slot = self._slots.pop(doc_id, None)
        if slot is None:
            return
        self._live[slot] = False
        self._total_length -= int(self._length[slot])
        for term in self._terms_of[slot]:
            postings = self._postings[term]
            del postings[slot]
            if not postings:
                del self._postings[term]
            self._arrays.pop(term, None)
        self._terms_of[slot] = {}
        self._free.append(slot)

    def search(self, phrases: Iterable[str], k: int, filter: IndexFilter | None) -> list[IndexHit]:
        """The top `k` documents for the query terms `phrases` (one per query word, repeats
        counted as FTS5 counts repeated phrases), best first."""
        count = len(self._slots)
        if count == 0:
            return []
        average_length = self._total_length / count
        scores = np.zeros(len(self._memory_ids), dtype=np.float64)
        matched = np.zeros(len(self._memory_ids), dtype=bool)
        for term in phrases:
            postings = self._posting_arrays(term)
            if postings is None:
                continue
            slots, counts = postings
            idf = math.log((count - len(slots) + 0.5) / (len(slots) + 0.5))
            norm = _K1 * (1 - _B + _B * self._length[slots] / average_length)
            scores[slots] += max(idf, _MIN_IDF) * ((counts * (_K1 + 1.0)) / (counts + norm))
            matched[slots] = True
        candidates = np.flatnonzero(matched)
        candidates = candidates[self._passes(candidates, filter)]
        if len(candidates) > k:
            # Keep every candidate scoring at least the k-th best, so ties go by doc id below.
            cutoff = np.partition(scores[candidates], len(candidates) - k)[len(candidates) - k]
            candidates = candidates[scores[candidates] >= cutoff]
        order = np.lexsort((self._doc[candidates], -scores[candidates]))[:k]
        best = candidates[order]
        return [
            IndexHit(self._memory_ids[slot], float(score), _BM25_MATCH)
            for slot, score in zip(best.tolist(), scores[best].tolist(), strict=True)
        ]

    def _posting_arrays(
        self, term: str
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]] | None:
        arrays = self._arrays.get(term)
        if arrays is None:
            postings = self._postings.get(term)
            if postings is None:
                return None
            slots = np.fromiter(postings.keys(), dtype=np.int64, count=len(postings))
            counts = np.fromiter(postings.values(), dtype=np.float64, count=len(postings))
            arrays = self._arrays[term] = (slots, counts)
        return arrays

    def _passes(
        self, slots: npt.NDArray[np.int64], filter: IndexFilter | None
    ) -> npt.NDArray[np.bool_]:
        return field_mask(
            slots,
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
