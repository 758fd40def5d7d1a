"""The `MemoryIndex` contract: what every search index adapter must do, whatever its backend.

Each test runs once per entry of `IMPLEMENTATIONS`; an adapter joins the contract by adding a
factory there (the OpenSearch adapter will, against a real cluster). Tests use a fresh tenant
each, so they may share one backend, and assert ranks and membership, never raw BM25 values
(their scale is the backend's own).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import sqlite3
import tempfile
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memwrite.adapters.sqlite.embedded_index import EmbeddedIndex
from memwrite.adapters.sqlite.lexical_partition import FTS5_TOKENIZE as TOKENIZE
from memwrite.claims.candidate import MemoryType, Tier
from memwrite.config.environment import LambdaEnvironment
from memwrite.embedder import HashingEmbedder
from memwrite.index import DocKind, IndexFilter, IndexHit, MemoryDoc, Vector
from memwrite.ports import MemoryIndex
from memwrite.wiring import build_index

EMBEDDER = HashingEmbedder()
USER = "user-1"

IMPLEMENTATIONS: dict[str, Callable[[], MemoryIndex]] = {
    "embedded": lambda: EmbeddedIndex(dimension=EMBEDDER.dimension),
}


def _opensearch() -> MemoryIndex:
    """A real cluster (OPENSEARCH_URL, signed with OPENSEARCH_SERVICE, default `es`): a fresh
    index per run; tenants keep the tests apart inside it."""
    from memwrite.adapters.aws.opensearch_index import OpenSearchIndex, signed_client

    service = os.environ.get("OPENSEARCH_SERVICE", "es")
    client = signed_client(
        os.environ["OPENSEARCH_URL"], os.environ.get("AWS_REGION", "us-east-1"), service
    )
    index = OpenSearchIndex(
        client,
        f"memwrite-contract-{_RUN}",
        dimension=EMBEDDER.dimension,
        serverless=service == "aoss",
    )
    index.ensure_index()
    return index


_RUN = uuid.uuid4().hex[:8]
if os.environ.get("OPENSEARCH_URL"):
    IMPLEMENTATIONS["opensearch"] = _opensearch


@pytest.fixture(params=sorted(IMPLEMENTATIONS))
def index(request: pytest.FixtureRequest) -> MemoryIndex:
    return IMPLEMENTATIONS[request.param]()


@pytest.fixture
def tenant() -> str:
    return f"tenant-{uuid.uuid4().hex[:12]}"


def vector(text: str) -> Vector:
    return EMBEDDER.embed([text])[0]


def memory(
    memory_id: str,
    text: str,
    *,
    tenant: str,
    user_id: str = USER,
    type: MemoryType = MemoryType.FACT,
    topic: str = "general",
    tier: Tier = Tier.FACT,
    confidence: float = 0.95,
    questions: Sequence[str] = (),
) -> MemoryDoc:
    """A document as the HyPE stage writes it: tasks get no vectors (docs/design.md §9)."""
    embedded = type is not MemoryType.TASK
    return MemoryDoc(
        memory_id=memory_id,
        tenant=tenant,
        user_id=user_id,
        text=text,
        type=type,
        topic=topic,
        tier=tier,
        confidence=confidence,
        vector=vector(text) if embedded else None,
        question_vectors=tuple(EMBEDDER.embed(list(questions))) if embedded and questions else (),
    )


def ids(hits: Sequence[IndexHit]) -> list[str]:
    return [hit.memory_id for hit in hits]


def all_queries(index: MemoryIndex, tenant: str, user_id: str, text: str) -> set[str]:
    """Every memory any query method returns for `text` (k large enough for these tests)."""
    found = ids(index.knn(tenant, user_id, vector(text), 50))
    found += ids(index.bm25(tenant, user_id, text, 50))
    found += ids(index.hybrid(tenant, user_id, text, vector(text), 50))
    return set(found)


def test_an_empty_index_returns_nothing(index: MemoryIndex, tenant: str) -> None:
    # Given an index that holds nothing for this tenant
    # When every query method is asked
    # Then each answers with an empty list and the count is zero
    assert index.knn(tenant, USER, vector("Where does the user live?"), 5) == []
    assert index.bm25(tenant, USER, "Berlin", 5) == []
    assert index.hybrid(tenant, USER, "Berlin", vector("Berlin"), 5) == []
    assert index.count(tenant, USER) == 0
    assert index.delete_user(tenant, USER) == 0


def test_an_upserted_memory_is_found_by_knn_and_bm25(index: MemoryIndex, tenant: str) -> None:
    # Given one memory
    index.upsert(memory("m-berlin", "The user lives in Berlin.", tenant=tenant))
    # When it is searched by its meaning and by its words
    knn = index.knn(tenant, USER, vector("The user lives in Berlin."), 5)
    bm25 = index.bm25(tenant, USER, "Berlin", 5)
    # Then both find it, kNN with a cosine of 1 for its own text
    assert ids(knn) == ["m-berlin"]
    assert knn[0].score == pytest.approx(1.0, abs=1e-5)
    assert ids(bm25) == ["m-berlin"]
    assert bm25[0].score > 0
    assert index.count(tenant, USER) == 1


def test_bm25_matches_word_forms_and_ignores_stop_words(index: MemoryIndex, tenant: str) -> None:
    # Given memories that all say "the user"
    index.upsert(memory("m-home", "The user lives in Berlin.", tenant=tenant))
    index.upsert(memory("m-job", "The user is working at Spotify.", tenant=tenant))
    # When BM25 is asked with other forms of their words, and with only stop words
    # Then word forms match (English stemming), and stop words alone match nothing
    assert ids(index.bm25(tenant, USER, "Who lived here?", 5)) == ["m-home"]
    assert ids(index.bm25(tenant, USER, "works", 5)) == ["m-job"]
    assert index.bm25(tenant, USER, "Where is the user?", 5) == []


def test_queries_never_cross_tenants_or_users(index: MemoryIndex, tenant: str) -> None:
    # Given the same memory id under two users of one tenant and under another tenant,
    # and a memory only the second user has
    other_tenant = f"{tenant}-other"
    owners = [
        (tenant, USER, "Berlin"),
        (tenant, "user-2", "Lisbon"),
        (other_tenant, USER, "Madrid"),
    ]
    for owner_tenant, user_id, city in owners:
        text = f"The user lives in {city}."
        index.upsert(memory("m1", text, tenant=owner_tenant, user_id=user_id))
    index.upsert(memory("m2", "The user's cat is called Lisbon.", tenant=tenant, user_id="user-2"))
    for owner_tenant, user_id, city in owners:
        own = {"m1", "m2"} if user_id == "user-2" else {"m1"}
        for _, _, other_city in (owner for owner in owners if owner[2] != city):
            other_text = f"The user lives in {other_city}."
            # When an owner searches for another owner's memory, by words and by meaning
            # Then BM25 finds nothing, kNN and hybrid only the owner's own memories, and
            # none of them scores as the exact copy would
            assert index.bm25(owner_tenant, user_id, other_city, 5) == []
            knn = index.knn(owner_tenant, user_id, vector(other_text), 5)
            assert set(ids(knn)) == own
            assert max(hit.score for hit in knn) < 0.99
            hybrid = index.hybrid(owner_tenant, user_id, other_city, vector(other_text), 5)
            assert set(ids(hybrid)) == own
        assert index.count(owner_tenant, user_id) == len(own)
    # And deleting one of them leaves the others whole
    index.delete(tenant, USER, "m1")
    assert index.count(tenant, USER) == 0
    assert ids(index.bm25(tenant, "user-2", "Lisbon", 5)) == ["m1", "m2"]
    assert ids(index.bm25(other_tenant, USER, "Madrid", 5)) == ["m1"]


def test_re_upserting_a_memory_replaces_it(index: MemoryIndex, tenant: str) -> None:
    # Given a memory that is upserted again with a new text
    index.upsert(memory("m1", "The user lives in Berlin.", tenant=tenant))
    index.upsert(memory("m1", "The user lives in Lisbon.", tenant=tenant))
    # When it is searched
    # Then only the new text and vector are indexed, once
    assert index.count(tenant, USER) == 1
    assert index.bm25(tenant, USER, "Berlin", 5) == []
    assert ids(index.bm25(tenant, USER, "Lisbon", 5)) == ["m1"]
    knn = index.knn(tenant, USER, vector("The user lives in Lisbon."), 5)
    assert ids(knn) == ["m1"]
    assert knn[0].score == pytest.approx(1.0, abs=1e-5)


def test_re_upserting_without_vectors_makes_a_memory_bm25_only(
    index: MemoryIndex, tenant: str
) -> None:
    # Given a memory with vectors that is re-upserted as a task (no vectors)
    index.upsert(memory("m1", "Book flights to Lisbon.", tenant=tenant))
    index.upsert(memory("m1", "Book flights to Lisbon.", tenant=tenant, type=MemoryType.TASK))
    # When it is searched both ways
    # Then kNN no longer finds it and BM25 still does
    assert index.knn(tenant, USER, vector("Book flights to Lisbon."), 5) == []
    assert ids(index.bm25(tenant, USER, "flights", 5)) == ["m1"]


def test_delete_removes_a_memory_from_every_query(index: MemoryIndex, tenant: str) -> None:
    # Given two memories, one of them deleted (and a delete of an unknown id, ignored)
    index.upsert(
        memory(
            "m-berlin",
            "The user lives in Berlin.",
            tenant=tenant,
            questions=["Where does the user live?"],
        )
    )
    index.upsert(memory("m-job", "The user works in Berlin as a nurse.", tenant=tenant))
    index.delete(tenant, USER, "m-berlin")
    index.delete(tenant, USER, "m-unknown")
    # When anything is searched
    # Then the deleted memory is gone from kNN (content and questions), BM25 and hybrid
    assert "m-berlin" not in all_queries(index, tenant, USER, "The user lives in Berlin.")
    assert "m-berlin" not in all_queries(index, tenant, USER, "Where does the user live?")
    assert ids(index.bm25(tenant, USER, "Berlin", 5)) == ["m-job"]
    assert index.count(tenant, USER) == 1


def test_delete_user_removes_all_of_a_users_memories(index: MemoryIndex, tenant: str) -> None:
    # Given three memories of one user and one of another
    for number, city in enumerate(["Berlin", "Lisbon", "Madrid"]):
        index.upsert(memory(f"m{number}", f"The user flew to {city}.", tenant=tenant))
    index.upsert(memory("m0", "The user flew to Berlin.", tenant=tenant, user_id="user-2"))
    # When the first user is erased
    removed = index.delete_user(tenant, USER)
    # Then all three are gone from every query, and the other user keeps theirs
    assert removed == 3
    assert index.count(tenant, USER) == 0
    assert all_queries(index, tenant, USER, "The user flew to Berlin Lisbon Madrid.") == set()
    assert ids(index.bm25(tenant, "user-2", "Berlin", 5)) == ["m0"]
    # And the erased user can start over
    index.upsert(memory("m9", "The user flew to Oslo.", tenant=tenant))
    assert ids(index.bm25(tenant, USER, "Oslo", 5)) == ["m9"]


FILTER_CASES = {
    "types": (IndexFilter(types=frozenset({MemoryType.PREFERENCE})), {"m-coffee"}),
    "topics": (IndexFilter(topics=frozenset({"location"})), {"m-home", "m-old-home"}),
    "tiers": (IndexFilter(tiers=frozenset({Tier.WORKING})), {"m-old-home"}),
    "min_confidence": (IndexFilter(min_confidence=0.5), {"m-home", "m-coffee"}),
    "combined": (
        IndexFilter(
            types=frozenset({MemoryType.FACT}),
            tiers=frozenset({Tier.FACT, Tier.WORKING}),
            min_confidence=0.9,
        ),
        {"m-home"},
    ),
    "empty set": (IndexFilter(types=frozenset()), set()),
}


@pytest.mark.parametrize("case", sorted(FILTER_CASES))
def test_filters_restrict_every_query(index: MemoryIndex, tenant: str, case: str) -> None:
    # Given memories that differ in type, topic, tier and confidence, all about "Berlin"
    docs = [
        memory("m-home", "The user lives in Berlin.", tenant=tenant, topic="location"),
        memory(
            "m-old-home",
            "The user used to live near Berlin.",
            tenant=tenant,
            topic="location",
            tier=Tier.WORKING,
            confidence=0.45,
        ),
        memory(
            "m-coffee",
            "The user prefers the coffee in Berlin.",
            tenant=tenant,
            type=MemoryType.PREFERENCE,
            topic="food",
            confidence=0.5,
        ),
        memory(
            "m-quarantined",
            "The user might own a castle in Berlin.",
            tenant=tenant,
            tier=Tier.QUARANTINE,
            confidence=0.2,
        ),
    ]
    for doc in docs:
        index.upsert(doc)
    only, expected = FILTER_CASES[case]
    query = "The user lives in Berlin."
    # When each method searches with the filter
    knn = index.knn(tenant, USER, vector(query), 10, filter=only)
    bm25 = index.bm25(tenant, USER, "Berlin", 10, filter=only)
    hybrid = index.hybrid(tenant, USER, "Berlin", vector(query), 10, filter=only)
    # Then exactly the memories that pass come back
    assert set(ids(knn)) == expected
    assert set(ids(bm25)) == expected
    assert set(ids(hybrid)) == expected


def test_a_document_past_its_expiry_is_out_of_every_live_query(
    index: MemoryIndex, tenant: str
) -> None:
    # Given two episodes about Lisbon, one past its retention, one not, and a memory
    now = 1_800_000_000.0
    episodes = [
        replace(memory(f"episode:{name}", text, tenant=tenant), kind=DocKind.EPISODE, expires_at=at)
        for name, text, at in (
            ("old", "We spent a week in Lisbon.", now - 1),
            ("new", "Lisbon was sunny all week.", now + 3600),
        )
    ]
    for doc in (*episodes, memory("m1", "The user lives in Lisbon.", tenant=tenant)):
        index.upsert(doc)

    # When every query asks for what is live now
    live = IndexFilter(kinds=None, live_at=now)
    found = set()
    for text in ("Lisbon week", "sunny Lisbon"):
        found |= set(ids(index.knn(tenant, USER, vector(text), 50, filter=live)))
        found |= set(ids(index.bm25(tenant, USER, text, 50, filter=live)))
        found |= set(ids(index.hybrid(tenant, USER, text, vector(text), 50, filter=live)))

    # Then the expired episode is in none of them, the others are; without the bound it is
    assert found == {"episode:new", "m1"}
    anytime = IndexFilter(kinds=None)
    assert "episode:old" in ids(index.bm25(tenant, USER, "Lisbon week", 50, filter=anytime))


def test_delete_expired_removes_only_documents_past_their_expiry_up_to_a_limit(
    index: MemoryIndex, tenant: str
) -> None:
    # Given three episodes past their expiry (two users), one not, and a memory without one
    now = 1_800_000_000.0
    docs = [
        replace(
            memory(f"episode:{n}", f"Lisbon trip {n}", tenant=tenant, user_id=user),
            kind=DocKind.EPISODE,
            expires_at=at,
        )
        for n, user, at in (
            ("a", USER, now - 10),
            ("b", USER, now),
            ("c", "user-2", now - 5),
            ("d", USER, now + 1),
        )
    ]
    for doc in (*docs, memory("m1", "The user lives in Lisbon.", tenant=tenant)):
        index.upsert(doc)

    # When the sweep removes at most two, then the rest
    first = index.delete_expired(now, 2)
    second = index.delete_expired(now, 2)

    # Then the three expired ones are gone from every query, the others stay
    assert (first, second, index.delete_expired(now, 2)) == (2, 1, 0)
    anytime = IndexFilter(kinds=None)
    left = set(ids(index.bm25(tenant, USER, "Lisbon trip", 50, filter=anytime)))
    left |= set(ids(index.bm25(tenant, "user-2", "Lisbon trip", 50, filter=anytime)))
    assert left == {"episode:d", "m1"}


def test_question_vectors_make_a_memory_findable_by_a_question(
    index: MemoryIndex, tenant: str
) -> None:
    # Given a memory whose HyPE questions ask what it answers, among memories without them
    index.upsert(
        memory(
            "m-home",
            "The user lives in Berlin.",
            tenant=tenant,
            questions=["Where does the user live?", "Which city is the user based in?"],
        )
    )
    index.upsert(memory("m-trip", "The user visited Lisbon where a friend lives.", tenant=tenant))
    index.upsert(memory("m-cat", "The user's cat sleeps on the sofa.", tenant=tenant))
    question = "Where does the user live?"
    # When the question is searched by meaning
    hits = index.knn(tenant, USER, vector(question), 3)
    # Then the memory comes first, scored by its best vector (the matching question)
    assert hits[0].memory_id == "m-home"
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)
    # And its content alone would not have been as close to the question
    assert float(vector("The user lives in Berlin.") @ vector(question)) < 0.5


def test_tasks_without_vectors_are_bm25_only(index: MemoryIndex, tenant: str) -> None:
    # Given a task (no vectors) next to a fact
    task = "Remind the user to renew the passport before Friday."
    index.upsert(memory("m-task", task, tenant=tenant, type=MemoryType.TASK, topic="todo"))
    index.upsert(memory("m-fact", "The user's passport is German.", tenant=tenant))
    # When its own text is searched by meaning, by words, and both
    knn = index.knn(tenant, USER, vector(task), 5)
    bm25 = index.bm25(tenant, USER, "renew passport", 5)
    hybrid = index.hybrid(tenant, USER, "renew passport", vector(task), 5)
    # Then kNN never returns it, BM25 and hybrid do
    assert ids(knn) == ["m-fact"]
    assert ids(bm25)[0] == "m-task"
    assert "m-task" in ids(hybrid)
    assert index.count(tenant, USER) == 2


def test_hybrid_ranks_an_exact_lexical_and_semantic_match_first(
    index: MemoryIndex, tenant: str
) -> None:
    # Given memories that share words or meaning with the query, and one that matches both
    texts = {
        "m-exact": "The user's sister Anna lives in Porto.",
        "m-words": "Anna from Porto sent the user a sister postcard.",
        "m-meaning": "The user's brother lives in Lisbon.",
        "m-other": "The user prefers green tea in the afternoon.",
    }
    for memory_id, text in texts.items():
        index.upsert(memory(memory_id, text, tenant=tenant))
    query = "The user's sister Anna lives in Porto."
    # When it is searched with hybrid
    hits = index.hybrid(tenant, USER, query, vector(query), 4)
    # Then the exact match is first with the top fused score of 1, best first after it
    assert hits[0].memory_id == "m-exact"
    assert hits[0].score == pytest.approx(1.0)
    assert [hit.score for hit in hits] == sorted((hit.score for hit in hits), reverse=True)


def test_k_caps_every_query_best_first(index: MemoryIndex, tenant: str) -> None:
    # Given twelve memories that all match the query
    for number in range(12):
        index.upsert(
            memory(f"m{number:02d}", f"The user met Priya at cafe {number}.", tenant=tenant)
        )
    query = "The user met Priya at cafe 7."
    # When each method is asked for five
    results = [
        index.knn(tenant, USER, vector(query), 5),
        index.bm25(tenant, USER, "Priya cafe 7", 5),
        index.hybrid(tenant, USER, "Priya cafe 7", vector(query), 5),
    ]
    # Then each returns five distinct memories, best first, the exact one on top
    for hits in results:
        assert len(hits) == 5
        assert len(set(ids(hits))) == 5
        assert [hit.score for hit in hits] == sorted((hit.score for hit in hits), reverse=True)
        assert hits[0].memory_id == "m07"
    # And k must be positive
    with pytest.raises(ValueError, match="k"):
        index.knn(tenant, USER, vector(query), 0)


def test_a_large_partition_keeps_exact_matches_and_selective_filters(
    index: MemoryIndex, tenant: str
) -> None:
    # Given a user with enough memories that an index goes approximate (thousands of vectors)
    cities = ["Berlin", "Lisbon", "Madrid", "Oslo", "Rome", "Vienna", "Prague", "Dublin"]
    for number in range(700):
        city = cities[number % len(cities)]
        index.upsert(
            memory(
                f"m{number:03d}",
                f"On day {number} the user met contact {number} in {city}.",
                tenant=tenant,
                tier=Tier.FACT if number % 100 else Tier.CANDIDATE,
                questions=[
                    f"Who did the user meet on day {number}?",
                    f"When did the user meet contact {number}?",
                    f"What happened in {city} on day {number}?",
                ],
            )
        )
    query = "When did the user meet contact 123?"
    # When one memory's own question is searched, unfiltered and with a filter few pass
    best = index.knn(tenant, USER, vector(query), 3)
    rare = IndexFilter(tiers=frozenset({Tier.CANDIDATE}))
    filtered = index.knn(tenant, USER, vector(query), 10, filter=rare)
    # Then the memory is found, and the filter still yields every memory that passes it
    assert best[0].memory_id == "m123"
    assert best[0].score == pytest.approx(1.0, abs=1e-5)
    assert sorted(ids(filtered)) == [f"m{n:03d}" for n in range(0, 700, 100)]
    # And after most memories are deleted, the rest are still found and the deleted are not
    for number in range(700):
        if number % 10:
            index.delete(tenant, USER, f"m{number:03d}")
    assert index.count(tenant, USER) == 70
    assert ids(index.knn(tenant, USER, vector("When did the user meet contact 120?"), 1)) == [
        "m120"
    ]
    assert "m123" not in ids(index.knn(tenant, USER, vector(query), 70))


# EmbeddedIndex beyond the contract: a file survives a restart and other processes' writes.


def test_an_embedded_index_file_survives_reopening(tmp_path: Path) -> None:
    # Given an index in a file with one memory, then closed
    path = str(tmp_path / "index.sqlite")
    first = EmbeddedIndex(path, dimension=EMBEDDER.dimension)
    first.upsert(memory("m1", "The user lives in Berlin.", tenant="t"))
    first.close()
    # When it is reopened
    reopened = EmbeddedIndex(path, dimension=EMBEDDER.dimension)
    # Then BM25 and kNN (its vectors reloaded from the file) still find the memory
    assert ids(reopened.bm25("t", USER, "Berlin", 5)) == ["m1"]
    assert ids(reopened.knn("t", USER, vector("The user lives in Berlin."), 5)) == ["m1"]
    # And a different dimension is refused rather than mixed in
    with pytest.raises(ValueError, match="dimension"):
        EmbeddedIndex(path, dimension=8)


def test_an_embedded_index_sees_writes_of_another_connection(tmp_path: Path) -> None:
    # Given two connections to one file, the reader having cached its vectors already
    path = str(tmp_path / "index.sqlite")
    reader = EmbeddedIndex(path, dimension=EMBEDDER.dimension)
    writer = EmbeddedIndex(path, dimension=EMBEDDER.dimension)
    writer.upsert(memory("m1", "The user lives in Berlin.", tenant="t"))
    assert ids(reader.knn("t", USER, vector("The user lives in Berlin."), 5)) == ["m1"]
    # When the other connection deletes the memory and adds another
    writer.delete("t", USER, "m1")
    writer.upsert(memory("m2", "The user lives in Lisbon.", tenant="t"))
    # Then the reader's kNN reflects both writes
    hits = reader.knn("t", USER, vector("The user lives in Berlin."), 5)
    assert ids(hits) == ["m2"]


CITIES = ("Berlin", "Lisbon", "Oslo", "Quito", "Hanoi", "Lagos", "Perth")


def _every_result(index: EmbeddedIndex, user_id: str) -> list[list[IndexHit]]:
    """Every query method's hits for a user, filtered or not, scores included."""
    facts = IndexFilter(types=frozenset({MemoryType.FACT}))
    text = "Where does the user live, and what does the user like?"
    return [
        index.bm25("t", user_id, text, 5),
        index.bm25("t", user_id, text, 5, filter=facts),
        index.knn("t", user_id, vector(text), 5),
        index.hybrid("t", user_id, text, vector(text), 5, filter=facts),
    ]


def _write_cities(index: EmbeddedIndex) -> None:
    """Two memories per user, user after user (one of them deleted for every other user)."""
    for number, city in enumerate(CITIES):
        user_id = f"user-{number}"
        index.upsert(memory("home", f"The user lives in {city}.", tenant="t", user_id=user_id))
        index.upsert(
            memory(
                "taste",
                f"The user likes the food of {city}.",
                tenant="t",
                user_id=user_id,
                type=MemoryType.PREFERENCE,
            )
        )
        if number % 2:
            index.delete("t", user_id, "taste")


def test_an_embedded_index_file_with_a_fts5_table_per_user_opens_with_the_same_results(
    tmp_path: Path,
) -> None:
    # Given an index file as written before the terms moved into `docs`: each user's texts in
    # a FTS5 table of its own (`fts_<slot>`), beside an index written as now
    path = tmp_path / "old.sqlite"
    current = EmbeddedIndex(str(tmp_path / "current.sqlite"), dimension=EMBEDDER.dimension)
    _write_cities(current)
    old = EmbeddedIndex(str(path), dimension=EMBEDDER.dimension)
    _write_cities(old)
    old.close()
    db = sqlite3.connect(path, isolation_level=None)
    for slot, city, docs in db.execute(
        "SELECT p.slot, p.user_id, group_concat(d.memory_id) FROM partitions p "
        "JOIN docs d USING (slot) GROUP BY p.slot"
    ).fetchall():
        texts = {
            "home": f"The user lives in {CITIES[int(city.removeprefix('user-'))]}.",
            "taste": f"The user likes the food of {CITIES[int(city.removeprefix('user-'))]}.",
        }
        db.execute(f"CREATE VIRTUAL TABLE fts_{slot} USING fts5(text, tokenize = '{TOKENIZE}')")
        for memory_id in docs.split(","):
            db.execute(
                f"INSERT INTO fts_{slot} (rowid, text) SELECT id, ? FROM docs "
                "WHERE slot = ? AND memory_id = ?",
                (texts[memory_id], slot, memory_id),
            )
    db.execute("ALTER TABLE docs DROP COLUMN terms")
    db.close()
    # When it is opened
    reopened = EmbeddedIndex(str(path), dimension=EMBEDDER.dimension)
    # Then every user's results are those of the index written as now, and the tables are gone
    for number in range(len(CITIES)):
        user_id = f"user-{number}"
        assert _every_result(reopened, user_id) == _every_result(current, user_id)
    tables = sqlite3.connect(path).execute("SELECT name FROM sqlite_master").fetchall()
    assert not [name for (name,) in tables if name.startswith("fts_")]


def _sqlite_bytes_for_users(path: Path, users: int) -> int:
    """SQLite's own heap (all connections of the process) grown by writing and reading
    `users` users, each with one memory, in a fresh index file."""
    sqlite = ctypes.CDLL(ctypes.util.find_library("sqlite3"))
    sqlite.sqlite3_memory_used.restype = ctypes.c_int64
    before = sqlite.sqlite3_memory_used()
    index = EmbeddedIndex(str(path), dimension=EMBEDDER.dimension)
    for number in range(users):
        user_id = f"user-{number}"
        index.upsert(memory("home", "The user lives in Berlin.", tenant="t", user_id=user_id))
        assert ids(index.bm25("t", user_id, "Berlin", 5)) == ["home"]
    grown = int(sqlite.sqlite3_memory_used()) - before
    index.close()
    return grown


def test_an_embedded_index_in_a_file_holds_no_sqlite_memory_per_user(tmp_path: Path) -> None:
    # Given 300 users written and searched through an index file, and 30 through another
    many = _sqlite_bytes_for_users(tmp_path / "many.sqlite", 300)
    few = _sqlite_bytes_for_users(tmp_path / "few.sqlite", 30)
    # Then the ten times more users cost SQLite no more than its page cache (2 MB by default;
    # measured: 0.86 against 0.25 MB): no table and no schema per user (with a FTS5 table per
    # user the 300 held 10 MB)
    assert many < few + 2 * 1024 * 1024, (many, few)


# An operation on the index: ("upsert", user, memory, city), ("delete", user, memory, _) or
# ("search", user, _, city).
_Operation = tuple[str, int, int, str]
_OPERATIONS = st.lists(
    st.tuples(
        st.sampled_from(("upsert", "delete", "search")),
        st.integers(0, 4),
        st.integers(0, 3),
        st.sampled_from(CITIES),
    ),
    min_size=1,
    max_size=40,
)


def _apply(index: EmbeddedIndex, operation: _Operation) -> list[IndexHit]:
    """Apply one operation; a search returns its kNN and hybrid hits, scores included."""
    kind, user, memory_number, city = operation
    user_id, memory_id = f"user-{user}", f"m{memory_number}"
    if kind == "upsert":
        # Memories 0-2 have HyPE questions (one shared by every user), 2 without its content
        # vector (a preference); 3 is a task (no vectors).
        text = f"The user lives in {city} and memory {memory_number} says so."
        kind_of = {2: MemoryType.PREFERENCE, 3: MemoryType.TASK}.get(memory_number, MemoryType.FACT)
        questions = ("Where does the user live?", f"Is {city} home?") if memory_number < 3 else ()
        doc = memory(
            memory_id, text, tenant="t", user_id=user_id, type=kind_of, questions=questions
        )
        if memory_number == 2:
            doc = replace(doc, vector=None)
        index.upsert(doc)
        return []
    if kind == "delete":
        index.delete("t", user_id, memory_id)
        return []
    text = f"Where does the user live? In {city}?"
    facts = IndexFilter(types=frozenset({MemoryType.FACT}))
    return [
        *index.knn("t", user_id, vector(text), 3),
        *index.knn("t", user_id, vector(text), 2, filter=facts),
        *index.hybrid("t", user_id, text, vector(text), 3),
    ]


@settings(max_examples=40, deadline=None)
@given(cap=st.integers(1, 2), operations=_OPERATIONS)
def test_an_embedded_index_keeping_few_users_in_memory_returns_identical_results(
    cap: int, operations: list[_Operation]
) -> None:
    # Given an index in a file keeping at most `cap` users' vectors in memory, beside one in a
    # file keeping them all and one in memory (never reloading them from SQLite)
    with tempfile.TemporaryDirectory() as directory:
        capped = EmbeddedIndex(
            f"{directory}/capped.sqlite",
            dimension=EMBEDDER.dimension,
            max_resident_partitions=cap,
        )
        references = [
            EmbeddedIndex(f"{directory}/all.sqlite", dimension=EMBEDDER.dimension),
            EmbeddedIndex(dimension=EMBEDDER.dimension),
        ]
        # When all see the same interleaved upserts, deletes and searches of five users, each
        # with a memory to begin with (so that every search loads the user's vectors)
        prelude: list[_Operation] = [("upsert", user, 0, CITIES[user]) for user in range(5)]
        final_searches: list[_Operation] = [("search", user, 0, "Berlin") for user in range(5)]
        for operation in [*prelude, *operations, *final_searches]:
            # Then every search returns the same hits with the same scores
            hits = _apply(capped, operation)
            assert all(hits == _apply(reference, operation) for reference in references)
            # And the capped index never holds more than `cap` users' vectors
            assert capped.resident_partitions <= cap
        for index in (capped, *references):
            index.close()


def test_an_embedded_index_reloads_an_evicted_user_with_the_writes_it_missed(
    tmp_path: Path,
) -> None:
    # Given an index in a file keeping one user's vectors in memory, and two users searched
    index = EmbeddedIndex(
        str(tmp_path / "index.sqlite"), dimension=EMBEDDER.dimension, max_resident_partitions=1
    )
    index.upsert(memory("m1", "The user lives in Berlin.", tenant="t", user_id="a"))
    index.upsert(memory("m1", "The user lives in Lisbon.", tenant="t", user_id="b"))
    berlin = vector("The user lives in Berlin.")
    assert ids(index.knn("t", "a", berlin, 5)) == ["m1"]
    assert ids(index.knn("t", "b", berlin, 5)) == ["m1"]  # evicts a's vectors
    assert index.resident_partitions == 1
    # When the evicted user's memory is deleted and another is upserted
    index.delete("t", "a", "m1")
    index.upsert(memory("m2", "The user lives in Berlin now.", tenant="t", user_id="a"))
    # Then the user's next kNN, reloaded from SQLite, sees both writes
    assert ids(index.knn("t", "a", berlin, 5)) == ["m2"]
    assert index.resident_partitions == 1


def test_an_embedded_index_in_memory_keeps_every_user_whatever_the_cap() -> None:
    # Given an in-memory index (its vectors have no other copy) capped at one user
    index = EmbeddedIndex(dimension=EMBEDDER.dimension, max_resident_partitions=1)
    for user_id in ("a", "b", "c"):
        index.upsert(memory("m1", "The user lives in Berlin.", tenant="t", user_id=user_id))
    # When each user is searched
    # Then each one's memory is found: nothing was dropped
    for user_id in ("a", "b", "c"):
        assert ids(index.knn("t", user_id, vector("The user lives in Berlin."), 5)) == ["m1"]
    assert index.resident_partitions == 3


def test_an_embedded_index_refuses_a_cap_below_one() -> None:
    with pytest.raises(ValueError, match="max_resident_partitions"):
        EmbeddedIndex(dimension=EMBEDDER.dimension, max_resident_partitions=0)


def test_the_configured_cap_reaches_the_embedded_index_of_the_sqlite_backend(
    tmp_path: Path,
) -> None:
    # Given the embedded mode configured to keep two users' vectors in memory
    config = tmp_path / "config.json"
    search = {"embedded_max_resident_partitions": 2}
    config.write_text(json.dumps({"pipeline": {"search": search}}), encoding="utf-8")
    env = LambdaEnvironment.load(
        {
            "MEMWRITE_BACKEND": "sqlite",
            "MEMWRITE_DATA_DIR": str(tmp_path),
            "MEMWRITE_CONFIG": str(config),
        }
    )
    index = build_index(env, EMBEDDER.dimension)
    assert isinstance(index, EmbeddedIndex)
    # When five users are written and searched
    for number in range(5):
        user_id = f"user-{number}"
        index.upsert(memory("m1", "The user lives in Berlin.", tenant="t", user_id=user_id))
        assert ids(index.knn("t", user_id, vector("The user lives in Berlin."), 5)) == ["m1"]
        # Then it never holds more than two of them
        assert index.resident_partitions <= 2
    index.close()


def test_embedded_index_refuses_vectors_it_cannot_compare() -> None:
    # Given an index and documents whose vectors have the wrong size or no direction
    index = EmbeddedIndex(dimension=EMBEDDER.dimension)
    doc = memory("m1", "The user lives in Berlin.", tenant="t")
    # When they are upserted
    # Then they are refused, and nothing is indexed
    with pytest.raises(ValueError, match="dimension"):
        index.upsert(replace(doc, vector=np.ones(3, dtype=np.float32)))
    with pytest.raises(ValueError, match="non-zero"):
        index.upsert(replace(doc, vector=np.zeros(EMBEDDER.dimension, dtype=np.float32)))
    assert index.count("t", USER) == 0
