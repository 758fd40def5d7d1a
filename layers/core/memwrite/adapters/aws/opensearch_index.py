"""`MemoryIndex` on OpenSearch (a managed domain or a Serverless collection), via opensearch-py.

One index holds every tenant's memories; every query filters on `tenant` and `user_id`
(keyword fields), so nothing crosses users. Documents:

- `text` (BM25), analysed with the same stop words as the embedded index
  (`memwrite.index.BM25_STOPWORDS`) and Porter stemming, so both backends match alike;
- `memory_id`, `tenant`, `user_id`, `type`, `topic`, `tier` (keyword) and `confidence` (float)
  for filters;
- `content_vector` (`knn_vector`, HNSW, Lucene engine, cosine) and `questions` (nested, one
  `vector` per HyPE question): kNN scores a memory by the best of the two (`dis_max`).

Lucene's cosine score is (1 + cos) / 2; `knn` turns it back into the cosine the port
promises. `hybrid` runs OpenSearch's `hybrid` query through a search pipeline that fuses as
`memwrite.index.fuse_hybrid` does: the score-ranker-processor (rrf, OpenSearch 2.19+; its
scores are scaled by rank_constant + 1 here, as the embedded index scales them) or the
normalization-processor (min_max, weighted arithmetic_mean). Sub-queries are named (`bm25`,
`content`, `question`), and each hit's `matched_queries` says why it matched.

`ensure_index` creates the index and the pipeline of memories' fusion when absent (deploy
time, idempotent); a query with another fusion (episodes') defines its pipeline in the request.
Writes go in `_bulk` requests (`write`: a batch of documents and removals, each refused item
reported by its position) and use `refresh=wait_for` on a managed domain so that a memory is
searchable when the call returns (Serverless refreshes on its own schedule and refuses the
parameter).
Transport failures become `IndexUnavailable` (transient: the stream record is retried).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from memwrite.errors import IndexUnavailable
from memwrite.index import (
    BM25_STOPWORDS,
    DEFAULT_FUSION,
    DocKind,
    DocRemoval,
    Fusion,
    FusionMethod,
    IndexFilter,
    IndexHit,
    IndexWrite,
    MatchSource,
    MemoryDoc,
    Vector,
    fuse_hybrid,
)

__all__ = ["OpenSearchIndex", "index_body", "pipeline_body", "signed_client"]

_KNN_FETCH_PER_HIT = 4  # candidates per wanted memory: filters apply after the graph search
_DELETE_PAGE = 1_000
_NOT_FOUND = 404


def index_body(dimension: int) -> dict[str, Any]:
    """The index settings and mapping (`PUT /<index>`)."""
    vector = {
        "type": "knn_vector",
        "dimension": dimension,
        "method": {"name": "hnsw", "engine": "lucene", "space_type": "cosinesimil"},
    }
    return {
        "settings": {
            "index": {"knn": True},
            "analysis": {
                "filter": {
                    "memwrite_stop": {"type": "stop", "stopwords": sorted(BM25_STOPWORDS)},
                },
                "analyzer": {
                    "memwrite_text": {
                        "type": "custom",
                        "tokenizer": "standard",
                        "filter": ["lowercase", "asciifolding", "memwrite_stop", "porter_stem"],
                    }
                },
            },
        },
        "mappings": {
            "dynamic": "strict",
            "properties": {
                "memory_id": {"type": "keyword"},
                "tenant": {"type": "keyword"},
                "user_id": {"type": "keyword"},
                "type": {"type": "keyword"},
                "topic": {"type": "keyword"},
                "tier": {"type": "keyword"},
                "confidence": {"type": "float"},
                "kind": {"type": "keyword"},  # memory | episode; absent: a memory
                "expires_at": {"type": "double"},  # epoch seconds; absent: never
                "text": {"type": "text", "analyzer": "memwrite_text"},
                "content_vector": vector,
                "questions": {"type": "nested", "properties": {"vector": vector}},
            },
        },
    }


def pipeline_body(fusion: Fusion) -> dict[str, Any]:
    """The hybrid search pipeline of `fusion`: reciprocal-rank fusion, or min_max
    normalisation and a weighted arithmetic mean; BM25's weight first, as its query is."""
    weights = {"weights": [fusion.bm25_weight, 1.0 - fusion.bm25_weight]}
    processor: dict[str, Any]
    if fusion.method is FusionMethod.RRF:
        combination = {"technique": "rrf", "rank_constant": fusion.rank_constant}
        processor = {
            "score-ranker-processor": {"combination": {**combination, "parameters": weights}}
        }
    else:
        processor = {
            "normalization-processor": {
                "normalization": {"technique": "min_max"},
                "combination": {"technique": "arithmetic_mean", "parameters": weights},
            }
        }
    return {
        "description": "memwrite hybrid: BM25 + kNN (content and HyPE questions)",
        "phase_results_processors": [processor],
    }


def signed_client(endpoint: str, region: str, service: str) -> Any:
    """An OpenSearch client signing every request with SigV4 (`es` domain, `aoss` Serverless)
    with the credentials of the default AWS chain."""
    import boto3
    from opensearchpy import OpenSearch, Urllib3AWSV4SignerAuth, Urllib3HttpConnection

    parts = urlsplit(endpoint)
    secure = parts.scheme == "https"
    credentials = boto3.Session().get_credentials()
    return OpenSearch(
        hosts=[{"host": parts.hostname, "port": parts.port or (443 if secure else 80)}],
        http_auth=Urllib3AWSV4SignerAuth(credentials, region, service),
        use_ssl=secure,
        verify_certs=secure,
        connection_class=Urllib3HttpConnection,
        timeout=5,
        max_retries=2,
        retry_on_timeout=True,
    )


@contextmanager
def _translated(operation: str) -> Iterator[None]:
    from opensearchpy.exceptions import OpenSearchException

    try:
        yield
    except OpenSearchException as exc:
        raise IndexUnavailable(f"OpenSearch {operation} failed: {type(exc).__name__}") from exc


class OpenSearchIndex:
    def __init__(
        self,
        client: Any,
        index_name: str,
        *,
        dimension: int,
        pipeline_name: str | None = None,
        pipeline_fusion: Fusion = DEFAULT_FUSION,
        serverless: bool = False,
    ) -> None:
        self._client = client
        self._index = index_name
        self._dimension = dimension
        self._pipeline = pipeline_name or f"{index_name}-hybrid"
        self._pipeline_fusion = pipeline_fusion  # what `ensure_index` stores as the pipeline
        self._refresh: dict[str, str] = {} if serverless else {"refresh": "wait_for"}

    def ensure_index(self, fusion: Fusion = DEFAULT_FUSION) -> None:
        """Create the search pipeline of `fusion` (the `pipeline_fusion` the queries assume)
        and the index if absent (else add the fields it lacks); safe to run on every deploy."""
        with _translated("create"):
            self._client.transport.perform_request(
                "PUT", f"/_search/pipeline/{self._pipeline}", body=pipeline_body(fusion)
            )
            if not self._client.indices.exists(index=self._index):
                self._client.indices.create(
                    index=self._index, body=index_body(self._dimension), params={"ignore": 400}
                )
            else:
                # Fields added since the index was made (a strict mapping refuses them until
                # then); fields it has are unchanged.
                mapping = index_body(self._dimension)["mappings"]["properties"]
                self._client.indices.put_mapping(index=self._index, body={"properties": mapping})

    @staticmethod
    def _doc_id(tenant: str, user_id: str, memory_id: str) -> str:
        return f"{tenant}|{user_id}|{memory_id}"

    def _source(self, doc: MemoryDoc) -> dict[str, Any]:
        source: dict[str, Any] = {
            "memory_id": doc.memory_id,
            "tenant": doc.tenant,
            "user_id": doc.user_id,
            "type": doc.type.value,
            "topic": doc.topic,
            "tier": doc.tier.value,
            "confidence": doc.confidence,
            "kind": doc.kind.value,
            "text": doc.text,
            "questions": [{"vector": self._listed(v)} for v in doc.question_vectors],
        }
        if doc.vector is not None:
            source["content_vector"] = self._listed(doc.vector)
        if doc.expires_at is not None:
            source["expires_at"] = doc.expires_at
        return source

    def _listed(self, vector: Vector) -> list[float]:
        row = np.asarray(vector, dtype=np.float32).reshape(-1)
        if row.shape[0] != self._dimension:
            raise ValueError(f"vectors must have dimension {self._dimension}")
        norm = float(np.linalg.norm(row))
        if norm == 0.0 or not np.isfinite(norm):
            raise ValueError("vectors must be finite and non-zero")
        return [float(x) for x in row / norm]

    def upsert(self, doc: MemoryDoc) -> None:
        self._write_one(doc)

    def delete(self, tenant: str, user_id: str, memory_id: str) -> None:
        self._write_one(DocRemoval(tenant, user_id, memory_id))

    def _write_one(self, write: IndexWrite) -> None:
        if refused := self.write([write]):
            raise IndexUnavailable(f"OpenSearch bulk refused the document: {refused[0]}")

    def write(self, writes: Sequence[IndexWrite]) -> dict[int, str]:
        """One `_bulk` request (opensearch-py's `streaming_bulk`: chunks of 500 actions, one
        result per action, in order): whole-document replaces and deletes by id. A delete of
        an absent document (404 `not_found`) is not a refusal."""
        from opensearchpy.helpers import streaming_bulk

        if not writes:
            return {}
        actions = [self._action(write) for write in writes]  # bad vectors: before any request
        refused: dict[int, str] = {}
        answered = 0
        with _translated("bulk"):
            results = streaming_bulk(
                self._client, actions, raise_on_error=False, params=self._refresh
            )
            for position, (ok, item) in enumerate(results):
                answered += 1
                ((operation, info),) = item.items()
                if not ok and not (operation == "delete" and info.get("status") == _NOT_FOUND):
                    error = info.get("error")
                    why = error.get("type", "error") if isinstance(error, dict) else str(error)
                    refused[position] = f"{why} (status {info.get('status')})"
        # A reply without an item per action: the missing ones were not done.
        refused.update(dict.fromkeys(range(answered, len(writes)), "no result in the reply"))
        return refused

    def _action(self, write: IndexWrite) -> dict[str, Any]:
        doc_id = self._doc_id(write.tenant, write.user_id, write.memory_id)
        if isinstance(write, DocRemoval):
            return {"_op_type": "delete", "_index": self._index, "_id": doc_id}
        return {
            "_op_type": "index",
            "_index": self._index,
            "_id": doc_id,
            "_source": self._source(write),
        }

    def _delete_ids(self, ids: Sequence[str]) -> None:
        lines = [json.dumps({"delete": {"_index": self._index, "_id": i}}) for i in ids]
        with _translated("bulk"):
            # A delete of an absent document is a per-item "not_found", not an error.
            self._client.bulk(body="\n".join(lines) + "\n", params=self._refresh)

    def delete_user(self, tenant: str, user_id: str) -> int:
        """Search-then-bulk-delete, page by page (Serverless has no `_delete_by_query`)."""
        removed = 0
        while True:
            body = {"size": _DELETE_PAGE, "_source": False, "query": self._scope(tenant, user_id)}
            with _translated("search"):
                response = self._client.search(index=self._index, body=body)
            ids = [hit["_id"] for hit in response["hits"]["hits"]]
            if not ids:
                return removed
            self._delete_ids(ids)
            removed += len(ids)

    def delete_expired(self, now: float, limit: int) -> int:
        """Search-then-bulk-delete (as `delete_user`), at most `limit` documents."""
        body = {
            "size": limit,
            "_source": False,
            "query": {"bool": {"filter": [{"range": {"expires_at": {"lte": now}}}]}},
        }
        with _translated("search"):
            response = self._client.search(index=self._index, body=body)
        ids = [hit["_id"] for hit in response["hits"]["hits"]]
        if ids:
            self._delete_ids(ids)
        return len(ids)

    @staticmethod
    def _filters(tenant: str, user_id: str, filter: IndexFilter | None) -> list[dict[str, Any]]:
        clauses: list[dict[str, Any]] = [
            {"term": {"tenant": tenant}},
            {"term": {"user_id": user_id}},
        ]
        if filter is not None:
            for field, values in (
                ("type", filter.types),
                ("topic", filter.topics),
                ("tier", filter.tiers),
            ):
                if values is not None:
                    clauses.append({"terms": {field: sorted(str(v) for v in values)}})
            if filter.min_confidence is not None:
                clauses.append({"range": {"confidence": {"gte": filter.min_confidence}}})
            if filter.kinds is not None:
                kinds: dict[str, Any] = {"terms": {"kind": sorted(str(k) for k in filter.kinds)}}
                if DocKind.MEMORY in filter.kinds:
                    # Documents indexed before kinds existed have none: they are memories.
                    absent = {"bool": {"must_not": {"exists": {"field": "kind"}}}}
                    kinds = {"bool": {"should": [kinds, absent], "minimum_should_match": 1}}
                clauses.append(kinds)
            if filter.live_at is not None:
                live = {"range": {"expires_at": {"gt": filter.live_at}}}
                never = {"bool": {"must_not": {"exists": {"field": "expires_at"}}}}
                clauses.append({"bool": {"should": [live, never], "minimum_should_match": 1}})
        return clauses

    def _scope(self, tenant: str, user_id: str) -> dict[str, Any]:
        return {"bool": {"filter": self._filters(tenant, user_id, None)}}

    def _bm25_query(
        self, tenant: str, user_id: str, query: str, filter: IndexFilter | None
    ) -> dict[str, Any]:
        return {
            "bool": {
                "must": [{"match": {"text": {"query": query, "_name": MatchSource.BM25.value}}}],
                "filter": self._filters(tenant, user_id, filter),
            }
        }

    def _knn_query(
        self, tenant: str, user_id: str, vector: Vector, k: int, filter: IndexFilter | None
    ) -> dict[str, Any]:
        wanted = self._listed(vector)
        fetch = k * _KNN_FETCH_PER_HIT
        content = {
            "knn": {
                "content_vector": {"vector": wanted, "k": fetch},
                "_name": MatchSource.CONTENT.value,
            }
        }
        question = {
            "nested": {
                "path": "questions",
                "score_mode": "max",
                "query": {"knn": {"questions.vector": {"vector": wanted, "k": fetch}}},
                "_name": MatchSource.QUESTION.value,
            }
        }
        return {
            "bool": {
                "must": [{"dis_max": {"queries": [content, question], "tie_breaker": 0.0}}],
                "filter": self._filters(tenant, user_id, filter),
            }
        }

    def _search(
        self, body: dict[str, Any], **params: str
    ) -> list[tuple[str, float, frozenset[MatchSource]]]:
        body = {"_source": ["memory_id"], **body}
        with _translated("search"):
            response = self._client.search(
                index=self._index,
                body=body,
                params={"include_named_queries_score": "true", **params},
            )
        found = []
        for hit in response["hits"]["hits"]:
            named = hit.get("matched_queries") or {}
            scores = named if isinstance(named, dict) else dict.fromkeys(named, 0.0)
            sources = {MatchSource(n): float(s) for n, s in scores.items() if n in _SOURCES}
            vector_sources = {s: v for s, v in sources.items() if s is not MatchSource.BM25}
            matched = {MatchSource.BM25} & sources.keys()
            if vector_sources:  # the vector that scored best is why kNN found it
                matched.add(max(vector_sources, key=lambda s: vector_sources[s]))
            found.append((hit["_source"]["memory_id"], float(hit["_score"]), frozenset(matched)))
        return found

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
        if not np.any(np.asarray(vector)):
            return []
        body = {"size": k, "query": self._knn_query(tenant, user_id, vector, k, filter)}
        # Lucene's cosinesimil score is (1 + cos) / 2: back to the cosine the port promises.
        return [IndexHit(mid, 2.0 * s - 1.0, m) for mid, s, m in self._search(body)]

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
        body = {"size": k, "query": self._bm25_query(tenant, user_id, query, filter)}
        return [IndexHit(mid, s, m) for mid, s, m in self._search(body)]

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
        _check_k(k)
        if not np.any(np.asarray(vector)):
            lexical = self.bm25(tenant, user_id, query, k, filter=filter)
            return fuse_hybrid(lexical, [], k, fusion)  # scored as the fusion scores it
        body: dict[str, Any] = {
            "size": k,
            "query": {
                "hybrid": {
                    "queries": [
                        self._bm25_query(tenant, user_id, query, filter),
                        self._knn_query(tenant, user_id, vector, k, filter),
                    ]
                }
            },
        }
        if fusion == self._pipeline_fusion:
            hits = self._search(body, search_pipeline=self._pipeline)
        else:  # another fusion: its pipeline, defined in the request
            hits = self._search({**body, "search_pipeline": pipeline_body(fusion)})
        # RRF sums weight / (rank_constant + rank): scaled as `fuse_hybrid` scales it.
        scale = fusion.rank_constant + 1 if fusion.method is FusionMethod.RRF else 1
        return [IndexHit(mid, s * scale, m) for mid, s, m in hits]

    def count(self, tenant: str, user_id: str) -> int:
        with _translated("count"):
            response = self._client.count(
                index=self._index, body={"query": self._scope(tenant, user_id)}
            )
        return int(response["count"])


_SOURCES = {source.value for source in MatchSource}


def _check_k(k: int) -> None:
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
