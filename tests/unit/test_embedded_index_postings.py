"""The embedded index's BM25 from in-memory postings (`LexicalPartition`): FTS5's ranking, and
every write seen by the next search, in memory and in a file, resident or reloaded."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memwrite.adapters.sqlite.embedded_index import EmbeddedIndex
from memwrite.adapters.sqlite.lexical_partition import FTS5_TOKENIZE
from memwrite.claims.candidate import MemoryType, Tier
from memwrite.index import BM25_STOPWORDS as STOP
from memwrite.index import DocKind, IndexFilter, IndexHit, MemoryDoc

DIMENSION = 8
TEXTS = [
    "The user lives in Berlin with two cats",
    "The user moved to Berlin from Lisbon last spring",
    "Caroline went running in the park running again",
    "Melanie paints landscapes and runs a pottery class",
    "The user works at a café in Lisbon",
    "Went to the LGBTQ support group, it was powerful",
    "We camped by the lake and the kids loved the stars",
    "The user prefers tea over coffee in the morning",
    "Berlin Berlin Berlin: the user keeps talking about Berlin",
    "Adoption agencies and the user's plan to adopt children",
    "The cats knocked over the paints again",
    "Lisbon trip planned for the summer with friends",
]
QUERIES = [
    "Where does the user live? Berlin?",
    "running paints",
    "Lisbon café trip",
    "What did the kids love at the lake",
    "adopting children agency",
    "tea coffee cats",
]


def doc(memory_id: str, text: str, **fields: object) -> MemoryDoc:
    values: dict[str, object] = {
        "type": MemoryType.FACT,
        "topic": "t",
        "tier": Tier.WORKING,
        "confidence": 0.9,
    }
    values.update(fields)
    return MemoryDoc(
        memory_id,
        "t",
        "u",
        text,
        values.pop("type"),  # type: ignore[arg-type]
        values.pop("topic"),  # type: ignore[arg-type]
        values.pop("tier"),  # type: ignore[arg-type]
        values.pop("confidence"),  # type: ignore[arg-type]
        **values,  # type: ignore[arg-type]
    )


def fts5_ranking(
    texts: list[str], query: str, k: int, *, skip_empty: bool = False
) -> list[tuple[str, float]]:
    """SQLite FTS5's own bm25() ranking of `texts` (ids m0, m1, ...) for the words of `query`
    less the stop words the index drops, ties by insertion (`skip_empty`: "" is no row)."""
    db = sqlite3.connect(":memory:")
    db.execute(f"CREATE VIRTUAL TABLE f USING fts5(text, tokenize = '{FTS5_TOKENIZE}')")
    rows = [(i, text) for i, text in enumerate(texts) if text or not skip_empty]
    db.executemany("INSERT INTO f (rowid, text) VALUES (?, ?)", rows)
    words = [w for w in dict.fromkeys(re.findall(r"\w+", query.casefold())) if w not in STOP]
    expression = " OR ".join(f'"{w}"' for w in words)
    ranked = db.execute(
        "SELECT rowid, -bm25(f) AS s FROM f WHERE f MATCH ? ORDER BY s DESC, rowid LIMIT ?",
        (expression, k),
    ).fetchall()
    return [(f"m{rowid}", float(score)) for rowid, score in ranked]


def ranking(hits: list[IndexHit]) -> list[tuple[str, float]]:
    return [(hit.memory_id, hit.score) for hit in hits]


def ids(hits: list[IndexHit]) -> list[str]:
    return [hit.memory_id for hit in hits]


@pytest.fixture(params=["memory", "file"])
def index(request: pytest.FixtureRequest, tmp_path: Path) -> EmbeddedIndex:
    path = ":memory:" if request.param == "memory" else str(tmp_path / "index.sqlite")
    return EmbeddedIndex(path, dimension=DIMENSION)


@pytest.mark.parametrize("query", QUERIES)
def test_bm25_ranks_and_scores_as_sqlite_fts5_does(index: EmbeddedIndex, query: str) -> None:
    for i, text in enumerate(TEXTS):
        index.upsert(doc(f"m{i}", text))
    expected = fts5_ranking(TEXTS, query, 5)
    found = ranking(index.bm25("t", "u", query, 5))
    assert [memory_id for memory_id, _ in found] == [memory_id for memory_id, _ in expected]
    assert [score for _, score in found] == pytest.approx([score for _, score in expected])


def test_writes_updates_deletes_and_expiry_reach_the_next_search(index: EmbeddedIndex) -> None:
    for i, text in enumerate(TEXTS):
        index.upsert(doc(f"m{i}", text))
    assert ids(index.bm25("t", "u", "pottery", 5)) == ["m3"]  # the postings are resident now

    index.upsert(doc("new", "A pottery wheel for her birthday"))
    assert ids(index.bm25("t", "u", "pottery wheel", 5)) == ["new", "m3"]

    index.upsert(doc("new", "A sailing course for her birthday"))  # an update
    assert ids(index.bm25("t", "u", "pottery wheel", 5)) == ["m3"]
    assert ids(index.bm25("t", "u", "sailing", 5)) == ["new"]

    index.delete("t", "u", "m3")
    assert index.bm25("t", "u", "pottery", 5) == []
    # Statistics follow the deletes: the scores are those of the ten documents left.
    for memory_id in ("m0", "m1"):
        index.delete("t", "u", memory_id)
    left = [text for i, text in enumerate(TEXTS) if i not in (0, 1, 3)]
    left.append("A sailing course for her birthday")
    expected = fts5_ranking(left, "Lisbon Berlin", 3)
    assert [score for _, score in ranking(index.bm25("t", "u", "Lisbon Berlin", 3))] == (
        pytest.approx([score for _, score in expected])
    )

    index.upsert(doc("episode:old", "A trip to Porto", kind=DocKind.EPISODE, expires_at=100.0))
    anytime = IndexFilter(kinds=None)
    assert ids(index.bm25("t", "u", "Porto", 5, filter=anytime)) == ["episode:old"]
    live = IndexFilter(kinds=None, live_at=150.0)
    assert index.bm25("t", "u", "Porto", 5, filter=live) == []
    assert index.delete_expired(now=150.0, limit=10) == 1
    assert index.bm25("t", "u", "Porto", 5, filter=anytime) == []


def test_filters_apply_to_the_postings(index: EmbeddedIndex) -> None:
    index.upsert(doc("fact", "Berlin flat", type=MemoryType.FACT))
    index.upsert(doc("pref", "Berlin food", type=MemoryType.PREFERENCE, confidence=0.3))
    index.upsert(doc("cand", "Berlin bars", tier=Tier.CANDIDATE, topic="nightlife"))
    index.upsert(doc("episode:1", "Berlin again", kind=DocKind.EPISODE))
    assert set(ids(index.bm25("t", "u", "Berlin", 10))) == {"fact", "pref", "cand", "episode:1"}
    assert set(ids(index.bm25("t", "u", "Berlin", 10, filter=IndexFilter()))) == {
        "fact",
        "pref",
        "cand",
    }
    only = IndexFilter(min_confidence=0.5, tiers=frozenset({Tier.WORKING}))
    assert ids(index.bm25("t", "u", "Berlin", 10, filter=only)) == ["fact"]
    topics = IndexFilter(topics=frozenset({"nightlife", "unknown"}))
    assert ids(index.bm25("t", "u", "Berlin", 10, filter=topics)) == ["cand"]
    episodes = IndexFilter(kinds=frozenset({DocKind.EPISODE}))
    assert ids(index.bm25("t", "u", "Berlin", 10, filter=episodes)) == ["episode:1"]


def test_an_evicted_users_postings_are_rebuilt_with_every_write_they_missed(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "index.sqlite")
    index = EmbeddedIndex(path, dimension=DIMENSION, max_resident_partitions=1)
    other = EmbeddedIndex(path, dimension=DIMENSION)
    for i, text in enumerate(TEXTS):
        index.upsert(doc(f"m{i}", text))
    index.upsert(MemoryDoc("x", "t", "v", "Berlin", MemoryType.FACT, "t", Tier.WORKING, 0.9))
    assert ids(index.bm25("t", "u", "Berlin", 1)) == ["m8"]  # u's postings loaded
    assert ids(index.bm25("t", "v", "Berlin", 1)) == ["x"]  # ... and evicted by v's

    index.upsert(doc("m12", "Berlin marathon training"))  # while u is not resident
    index.delete("t", "u", "m8")
    other.upsert(doc("m13", "Weekend in Berlin", kind=DocKind.EPISODE))  # another connection
    reference = EmbeddedIndex(dimension=DIMENSION)  # in memory: every write, never evicted
    for i, text in enumerate(TEXTS):
        if i != 8:
            reference.upsert(doc(f"m{i}", text))
    reference.upsert(doc("m12", "Berlin marathon training"))
    reference.upsert(doc("m13", "Weekend in Berlin", kind=DocKind.EPISODE))

    anytime = IndexFilter(kinds=None)
    for query in (*QUERIES, "Berlin marathon weekend"):
        found = ranking(index.bm25("t", "u", query, 10, filter=anytime))
        expected = ranking(reference.bm25("t", "u", query, 10, filter=anytime))
        assert [memory_id for memory_id, _ in found] == [memory_id for memory_id, _ in expected]
        assert [score for _, score in found] == pytest.approx([score for _, score in expected])


WORDS = ["berlin", "lisbon", "cats", "running", "runs", "paints", "café", "cafe", "tea", "lake"]


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    texts=st.lists(
        st.lists(st.sampled_from([*WORDS, "the", "user", "a"]), min_size=1, max_size=8).map(
            " ".join
        ),
        min_size=1,
        max_size=25,
    ),
    query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join),
    deleted=st.sets(st.integers(min_value=0, max_value=24), max_size=5),
)
def test_bm25_ranks_any_corpus_as_fts5_after_writes_and_deletes(
    texts: list[str], query: str, deleted: set[int]
) -> None:
    index = EmbeddedIndex(dimension=DIMENSION)
    for i, text in enumerate(texts):
        index.upsert(doc(f"m{i}", text))
    for i in deleted:
        index.delete("t", "u", f"m{i}")
    left = [text if i not in deleted else "" for i, text in enumerate(texts)]
    expected = fts5_ranking(left, query, 10, skip_empty=True)
    found = ranking(index.bm25("t", "u", query, 10))
    assert [memory_id for memory_id, _ in found] == [memory_id for memory_id, _ in expected]
    assert [score for _, score in found] == pytest.approx([score for _, score in expected])
