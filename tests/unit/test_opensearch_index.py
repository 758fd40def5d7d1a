"""The OpenSearch adapter at the HTTP level: a local fake OpenSearch records every request, so
the tests check what goes on the wire (paths, bodies, SigV4 headers), with the real
opensearch-py client and signer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memwrite.adapters.aws.opensearch_index import OpenSearchIndex, signed_client
from memwrite.claims.candidate import MemoryType, Tier
from memwrite.embedder import HashingEmbedder
from memwrite.errors import IndexUnavailable
from memwrite.index import (
    BM25_STOPWORDS,
    DocKind,
    DocRemoval,
    Fusion,
    FusionMethod,
    IndexFilter,
    IndexHit,
    MatchSource,
    MemoryDoc,
    fuse_hybrid,
)
from memwrite.wiring import build_index_setup
from tests.fake_opensearch import FakeOpenSearch, serving

EMBEDDER = HashingEmbedder()


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenSearch]:
    with serving(monkeypatch) as server:
        yield server


def index_on(fake: FakeOpenSearch, service: str = "es") -> OpenSearchIndex:
    client = signed_client(fake.url, "eu-west-1", service)
    return OpenSearchIndex(
        client, "memories", dimension=EMBEDDER.dimension, serverless=service == "aoss"
    )


def doc(memory_id: str = "m1", text: str = "The user lives in Lisbon.") -> MemoryDoc:
    vectors = EMBEDDER.embed([text, "Where does the user live?"])
    return MemoryDoc(
        memory_id=memory_id,
        tenant="t1",
        user_id="dana",
        text=text,
        type=MemoryType.FACT,
        topic="location",
        tier=Tier.FACT,
        confidence=0.9,
        vector=vectors[0],
        question_vectors=(vectors[1],),
    )


@pytest.mark.parametrize("service", ["es", "aoss"])
def test_every_request_is_signed_with_sigv4_for_the_configured_service(
    fake: FakeOpenSearch, service: str
) -> None:
    index_on(fake, service).upsert(doc())
    request = fake.requests[-1]
    authorization = request.headers["Authorization"]
    assert authorization.startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert f"/eu-west-1/{service}/aws4_request" in authorization
    assert "SignedHeaders=" in authorization and "Signature=" in authorization
    assert request.headers["X-Amz-Date"]
    assert request.headers["X-Amz-Content-SHA256"]


def test_creation_puts_the_pipeline_and_creates_the_index_with_its_mapping(
    fake: FakeOpenSearch,
) -> None:
    fake.replies[("HEAD", "/memories")] = (404, {})
    index_on(fake).ensure_index(Fusion(FusionMethod.MIN_MAX, bm25_weight=0.3))

    pipeline, _, create = fake.requests
    assert (pipeline.method, pipeline.path) == ("PUT", "/_search/pipeline/memories-hybrid")
    processor = json.loads(pipeline.body)["phase_results_processors"][0]
    normalisation = processor["normalization-processor"]
    assert normalisation["normalization"] == {"technique": "min_max"}
    assert normalisation["combination"]["parameters"]["weights"] == [0.3, 0.7]
    assert (create.method, create.path.split("?")[0]) == ("PUT", "/memories")
    body = json.loads(create.body)
    fields = body["mappings"]["properties"]
    for keyword in ("tenant", "user_id", "type", "topic", "tier", "memory_id"):
        assert fields[keyword] == {"type": "keyword"}
    assert fields["text"]["analyzer"] == "memwrite_text"
    assert fields["content_vector"]["type"] == "knn_vector"
    assert fields["content_vector"]["dimension"] == EMBEDDER.dimension
    assert fields["questions"]["type"] == "nested"
    assert fields["questions"]["properties"]["vector"]["method"]["space_type"] == "cosinesimil"
    stop = body["settings"]["analysis"]["filter"]["memwrite_stop"]["stopwords"]
    assert set(stop) == BM25_STOPWORDS


def test_creation_twice_does_not_recreate_an_existing_index_but_adds_new_fields(
    fake: FakeOpenSearch,
) -> None:
    index = index_on(fake)
    index.ensure_index()
    index.ensure_index()
    # Each time: the pipeline, the existence check, the mapping of every field (additive)
    assert [r.method for r in fake.requests] == ["PUT", "HEAD", "PUT"] * 2
    mapping = fake.requests[-1]
    assert mapping.path.split("?")[0] == "/memories/_mapping"
    assert json.loads(mapping.body)["properties"]["expires_at"] == {"type": "double"}


def test_a_live_query_leaves_out_documents_past_their_expiry(fake: FakeOpenSearch) -> None:
    # Given an episode document with an expiry
    index = index_on(fake)
    episode = replace(doc("episode:t1"), kind=DocKind.EPISODE, expires_at=1_800_000_000.0)
    index.upsert(episode)
    source = json.loads(fake.requests[-1].body.strip().split("\n")[1])
    assert source["expires_at"] == 1_800_000_000.0

    # When a query asks for what is live at a time
    fake.replies[("POST", "/memories/_search")] = (200, {"hits": {"hits": []}})
    index.bm25("t1", "dana", "Lisbon", 5, filter=IndexFilter(kinds=None, live_at=1_700_000_000.0))

    # Then it keeps documents expiring later, or never
    filters = json.loads(fake.requests[-1].body)["query"]["bool"]["filter"]
    live = {"range": {"expires_at": {"gt": 1_700_000_000.0}}}
    never = {"bool": {"must_not": {"exists": {"field": "expires_at"}}}}
    assert {"bool": {"should": [live, never], "minimum_should_match": 1}} in filters


def test_a_batch_of_writes_is_one_bulk_call_of_whole_documents_and_deletes_by_id(
    fake: FakeOpenSearch,
) -> None:
    refused = index_on(fake).write(
        [doc("m1"), DocRemoval("t1", "dana", "m0"), doc("m2", "The user works at SAP.")]
    )

    (request,) = fake.requests
    assert refused == {}
    assert request.method == "POST" and request.path.startswith("/_bulk")
    assert "refresh=wait_for" in request.path
    lines = [json.loads(line) for line in request.body.strip().split("\n")]
    assert lines[0] == {"index": {"_index": "memories", "_id": "t1|dana|m1"}}
    source = lines[1]
    assert (source["tenant"], source["user_id"], source["tier"]) == ("t1", "dana", "fact")
    assert len(source["content_vector"]) == EMBEDDER.dimension
    assert len(source["questions"]) == 1
    assert lines[2] == {"delete": {"_index": "memories", "_id": "t1|dana|m0"}}
    assert lines[3]["index"]["_id"] == "t1|dana|m2"


def test_a_write_refused_in_a_bulk_is_reported_by_position_and_the_others_are_done(
    fake: FakeOpenSearch,
) -> None:
    # Given a cluster that refuses the second document and finds nothing to delete for the third
    fake.replies[("POST", "/_bulk")] = (
        200,
        {
            "errors": True,
            "items": [
                {"index": {"_id": "t1|dana|m1", "status": 201}},
                {"index": {"status": 400, "error": {"type": "mapper_parsing_exception"}}},
                {"delete": {"_id": "t1|dana|m0", "status": 404, "result": "not_found"}},
            ],
        },
    )
    # When the three are written together
    refused = index_on(fake).write([doc("m1"), doc("m2"), DocRemoval("t1", "dana", "m0")])
    # Then only the refused one is reported, with why (a delete of nothing is done)
    assert list(refused) == [1]
    assert "mapper_parsing_exception" in refused[1]


def test_serverless_writes_do_not_ask_for_a_refresh(fake: FakeOpenSearch) -> None:
    index_on(fake, "aoss").upsert(doc())
    assert "refresh" not in fake.requests[-1].path


def test_deletes_by_memory_and_by_user(fake: FakeOpenSearch) -> None:
    index = index_on(fake)
    index.delete("t1", "dana", "m1")
    delete = json.loads(fake.requests[-1].body.strip())
    assert delete == {"delete": {"_index": "memories", "_id": "t1|dana|m1"}}

    # A user's documents are found by a scoped search, then deleted in bulk, page by page
    # (the fake answers the same page again, so the second page is the real client's too)
    fake.replies[("POST", "/memories/_search")] = (
        200,
        {"hits": {"hits": [{"_id": "t1|dana|m1"}, {"_id": "t1|dana|m2"}]}},
    )
    pages = 0
    real_search = index._client.search

    def first_page_then_none(**kwargs: Any) -> Any:
        nonlocal pages
        pages += 1
        return real_search(**kwargs) if pages == 1 else {"hits": {"hits": []}}

    index._client.search = first_page_then_none
    assert index.delete_user("t1", "dana") == 2
    search = next(r for r in fake.requests if r.path.startswith("/memories/_search"))
    scope = json.loads(search.body)["query"]["bool"]["filter"]
    assert scope == [{"term": {"tenant": "t1"}}, {"term": {"user_id": "dana"}}]
    bulk = fake.requests[-1]
    assert [json.loads(line)["delete"]["_id"] for line in bulk.body.strip().split("\n")] == [
        "t1|dana|m1",
        "t1|dana|m2",
    ]


def test_hybrid_sends_bm25_and_knn_through_the_pipeline_and_reads_why_each_hit_matched(
    fake: FakeOpenSearch,
) -> None:
    fake.replies[("POST", "/memories/_search")] = (
        200,
        {
            "hits": {
                "hits": [
                    {
                        "_id": "t1|dana|m1",
                        "_score": 0.9,
                        "_source": {"memory_id": "m1"},
                        "matched_queries": {"bm25": 1.2, "content": 0.8, "question": 0.95},
                    },
                    {
                        "_id": "t1|dana|m2",
                        "_score": 0.4,
                        "_source": {"memory_id": "m2"},
                        "matched_queries": {"content": 0.7},
                    },
                ]
            }
        },
    )
    vector = EMBEDDER.embed(["Where is she based?"])[0]
    wanted = IndexFilter(tiers=frozenset({Tier.FACT}), min_confidence=0.4)

    hits = index_on(fake).hybrid("t1", "dana", "Where is she based?", vector, 5, filter=wanted)

    request = fake.requests[-1]
    assert "search_pipeline=memories-hybrid" in request.path
    assert "include_named_queries_score=true" in request.path
    lexical, semantic = json.loads(request.body)["query"]["hybrid"]["queries"]
    for part in (lexical, semantic):
        filters = part["bool"]["filter"]
        assert {"term": {"tenant": "t1"}} in filters and {"term": {"user_id": "dana"}} in filters
        assert {"terms": {"tier": ["fact"]}} in filters
        assert {"range": {"confidence": {"gte": 0.4}}} in filters
    assert lexical["bool"]["must"][0]["match"]["text"]["query"] == "Where is she based?"
    content, question = semantic["bool"]["must"][0]["dis_max"]["queries"]
    assert content["knn"]["content_vector"]["k"] >= 5
    assert question["nested"]["path"] == "questions"
    assert [(h.memory_id, h.matched) for h in hits] == [
        ("m1", frozenset({MatchSource.BM25, MatchSource.QUESTION})),
        ("m2", frozenset({MatchSource.CONTENT})),
    ]


def test_rrf_is_the_score_ranker_pipeline_and_scores_as_the_embedded_fusion(
    fake: FakeOpenSearch,
) -> None:
    # Given the default fusion (RRF, BM25 weight 0.3), and OpenSearch's answer to it: for m1
    # first in both lists, 0.3/61 + 0.7/61; for m2 second by kNN only, 0.7/62
    fusion = Fusion()
    fake.replies[("POST", "/memories/_search")] = (
        200,
        {
            "hits": {
                "hits": [
                    {"_score": 1 / 61, "_source": {"memory_id": "m1"}},
                    {"_score": 0.7 / 62, "_source": {"memory_id": "m2"}},
                ]
            }
        },
    )
    # When the index sets up its pipeline and queries with it, then with another fusion
    index = index_on(fake)
    index.ensure_index(fusion)
    vector = EMBEDDER.embed(["Where is she based?"])[0]
    hits = index.hybrid("t1", "dana", "based", vector, 5, fusion=fusion)
    stored_query = fake.requests[-1]
    index.hybrid("t1", "dana", "based", vector, 5, fusion=Fusion(bm25_weight=1.0))
    # Then the stored pipeline is the score-ranker's RRF with the weights, BM25's first
    stored = json.loads(fake.requests[0].body)["phase_results_processors"][0]
    assert stored["score-ranker-processor"]["combination"] == {
        "technique": "rrf",
        "rank_constant": 60,
        "parameters": {"weights": [0.3, 0.7]},
    }
    assert "search_pipeline=memories-hybrid" in stored_query.path
    # And the other fusion's pipeline goes in its request, not the stored one
    other = fake.requests[-1]
    assert "search_pipeline=" not in other.path
    inline = json.loads(other.body)["search_pipeline"]["phase_results_processors"][0]
    assert inline["score-ranker-processor"]["combination"]["parameters"]["weights"] == [1.0, 0.0]
    # And the scores are those the embedded index's fusion gives the same ranks
    expected = fuse_hybrid(
        [IndexHit("m1", 9.0)], [IndexHit("m1", 0.9), IndexHit("m2", 0.8)], 5, fusion
    )
    assert [(h.memory_id, h.score) for h in hits] == [
        (h.memory_id, pytest.approx(h.score)) for h in expected
    ]


def test_knn_scores_are_cosines(fake: FakeOpenSearch) -> None:
    fake.replies[("POST", "/memories/_search")] = (
        200,
        {"hits": {"hits": [{"_score": 0.75, "_source": {"memory_id": "m1"}}]}},
    )
    (hit,) = index_on(fake).knn("t1", "dana", EMBEDDER.embed(["x y"])[0], 1)
    assert hit.score == pytest.approx(0.5)  # Lucene's (1 + cos) / 2 = 0.75


def test_a_cluster_fault_is_a_transient_index_error(fake: FakeOpenSearch) -> None:
    fake.replies[("POST", "/_bulk")] = (503, {"error": "unavailable"})
    with pytest.raises(IndexUnavailable):
        index_on(fake).upsert(doc())


def test_a_refused_document_is_not_silently_dropped(fake: FakeOpenSearch) -> None:
    fake.replies[("POST", "/_bulk")] = (
        200,
        {"errors": True, "items": [{"index": {"error": {"type": "mapper_parsing_exception"}}}]},
    )
    with pytest.raises(IndexUnavailable, match="refused"):
        index_on(fake).upsert(doc())


def test_wrong_dimension_vectors_are_refused_before_any_request(fake: FakeOpenSearch) -> None:
    bad = doc()
    bad = MemoryDoc(**{**bad.__dict__, "vector": np.ones(3, dtype=np.float32)})
    with pytest.raises(ValueError, match="dimension"):
        index_on(fake).upsert(bad)
    assert fake.requests == []


def test_the_expiry_sweep_searches_every_tenant_for_expired_documents_and_deletes_them(
    fake: FakeOpenSearch,
) -> None:
    # Given two documents past their expiry
    fake.replies[("POST", "/memories/_search")] = (
        200,
        {"hits": {"hits": [{"_id": "t1|dana|episode:1"}, {"_id": "t2|li|episode:2"}]}},
    )

    # When the sweep removes up to 100
    removed = index_on(fake).delete_expired(1_800_000_000.0, 100)

    # Then one search of documents expiring by then, whatever the tenant, then one bulk delete
    search, bulk = fake.requests
    body = json.loads(search.body)
    assert body["size"] == 100
    assert body["query"] == {
        "bool": {"filter": [{"range": {"expires_at": {"lte": 1_800_000_000.0}}}]}
    }
    deleted = [json.loads(line)["delete"]["_id"] for line in bulk.body.strip().split("\n")]
    assert (removed, deleted) == (2, ["t1|dana|episode:1", "t2|li|episode:2"])


@pytest.mark.parametrize("dimension", [256, 512, 1024])
def test_the_index_is_made_at_the_configured_titan_dimension(
    fake: FakeOpenSearch, tmp_path: Path, dimension: int
) -> None:
    # Given settings that ask Titan v2 for `dimension`
    settings = tmp_path / "settings.json"
    search = {"embedder": "bedrock", "embedding_dimension": dimension}
    settings.write_text(json.dumps({"pipeline": {"search": search}}), encoding="utf-8")
    tables = ("TURNS", "SPANS", "MEMORIES", "ENTITY_FACTS", "ENTITIES", "OUTBOX")
    environ = {
        **{f"{name}_TABLE": name.lower() for name in tables},
        "OPENSEARCH_ENDPOINT": fake.url,
        "MEMWRITE_CONFIG": str(settings),
        "AWS_REGION": "eu-west-1",
    }
    # When the deploy-time step makes the index
    setup = build_index_setup(environ)
    setup.index.ensure_index(setup.fusion)
    # Then the content and question vectors are mapped at that dimension
    # (the fake answers that the index exists: the step puts its mapping)
    put = fake.requests[-1]
    assert (put.method, put.path) == ("PUT", "/memwrite-memories/_mapping")
    fields = json.loads(put.body)["properties"]
    assert fields["content_vector"]["dimension"] == dimension
    assert fields["questions"]["properties"]["vector"]["dimension"] == dimension
