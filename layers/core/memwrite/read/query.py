"""The read API's logic: hybrid search, one memory with its supersession chain, a user's
memories page by page, and erasing a user everywhere.

Everything is scoped by the tenant of the credential (the caller passes it) and the user id of
the request; another tenant's memories are invisible even under the same user id, because
every key of the store and every index document starts with the tenant.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from memwrite.candidate import MemoryType
from memwrite.config import PipelineConfig
from memwrite.errors import InvalidQuery, UnknownMemory
from memwrite.index import BM25_STOPWORDS, IndexFilter, IndexHit, MatchSource, fuse_hybrid
from memwrite.memory import MemoryLink, MemoryUnit, Tier
from memwrite.models import Identifier
from memwrite.ports import Embedder, MemoryIndex, MemoryReader, MemoryStore, UserEraser

__all__ = [
    "MAX_PAGE_SIZE",
    "SEARCHABLE_TIERS",
    "ErasureReport",
    "ListedMemory",
    "MemoryDetail",
    "MemoryDetailView",
    "MemoryPage",
    "MemoryView",
    "QueryDeps",
    "SearchHit",
    "SearchRequest",
    "SearchResponse",
    "SearchResultView",
    "SearchResults",
    "erase_user",
    "list_memories",
    "memory_detail",
    "memory_json",
    "search",
]

# Searched when the request names no tiers; CANDIDATE only when asked, QUARANTINE never.
SEARCHABLE_TIERS = frozenset({Tier.WORKING, Tier.FACT, Tier.CHALLENGED})
MAX_PAGE_SIZE = 100
_SLACK = 2  # fetch k * _SLACK hits: some may be stale (superseded since they were indexed)
_WORD_RE = re.compile(r"[^\W_]+")


class MemoryView(BaseModel):
    """A memory as the API returns it; `source_turn_id` is the turn it was extracted from."""

    memory_id: str
    user_id: str
    type: MemoryType
    text: str
    topic: str
    entity: str
    attribute: str
    value: str
    tier: Tier
    confidence: float
    observed_at: datetime
    valid_until: datetime | None
    superseded_by: str | None
    links: list[MemoryLink]
    negated: bool
    corroboration: int
    source_turn_id: str


_MEMORY_FIELDS = frozenset(MemoryView.model_fields) - {"source_turn_id"}


def memory_json(memory: MemoryUnit) -> dict[str, Any]:
    """A memory as the API returns it (`MemoryView`'s fields, in JSON)."""
    view = memory.model_dump(mode="json", include=set(_MEMORY_FIELDS))
    view["source_turn_id"] = memory.turn_id
    return view


class SearchResultView(MemoryView):
    """One hit of `POST /v1/search`: the memory, its fused score and what matched."""

    score: float
    matched: list[MatchSource]


class SearchResults(BaseModel):
    """`POST /v1/search`: best first."""

    results: list[SearchResultView]


class MemoryDetailView(MemoryView):
    """`GET /v1/memories/{memory_id}`: the memory, its retrievals and its supersession chain
    (oldest first, itself included)."""

    access_count: int
    last_accessed: datetime | None
    chain: list[MemoryView]


class ListedMemory(MemoryView):
    access_count: int


class MemoryPage(BaseModel):
    """`GET /v1/users/{user_id}/memories`: one page; `next_cursor` is null on the last."""

    user_id: str
    memories: list[ListedMemory]
    next_cursor: str | None


class ErasureReport(BaseModel):
    """`DELETE /v1/users/{user_id}/memories`: how many items of each kind were removed."""

    user_id: str
    erased: bool
    removed: dict[str, int]


class SearchRequest(BaseModel):
    """`POST /v1/search`."""

    model_config = ConfigDict(extra="forbid")

    user_id: Identifier
    query: Annotated[str, Field(min_length=1, max_length=2_000)]
    k: int = Field(default=10, ge=1, le=100)
    types: list[MemoryType] | None = None
    topics: list[Annotated[str, Field(min_length=1, max_length=128)]] | None = None
    tiers: list[Tier] | None = None
    min_confidence: float | None = Field(default=None, ge=0, le=1)
    as_of: datetime | None = Field(
        default=None, description="The belief state at this time (superseded memories too)."
    )

    @field_validator("tiers")
    @classmethod
    def _never_quarantine(cls, tiers: list[Tier] | None) -> list[Tier] | None:
        if tiers is not None and Tier.QUARANTINE in tiers:
            raise ValueError("quarantined memories are never searchable")
        return tiers

    @field_validator("as_of")
    @classmethod
    def _as_utc(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value


class SearchHit(BaseModel):
    memory: MemoryUnit
    score: float
    matched: list[MatchSource]


class SearchResponse(BaseModel):
    results: list[SearchHit]

    def as_json(self) -> dict[str, Any]:
        return {
            "results": [
                {**memory_json(hit.memory), "score": hit.score, "matched": hit.matched}
                for hit in self.results
            ]
        }


@dataclass
class QueryDeps:
    store: MemoryStore
    reader: MemoryReader
    index: MemoryIndex
    embedder: Embedder
    eraser: UserEraser


def _filter_of(request: SearchRequest, config: PipelineConfig) -> IndexFilter:
    tiers = frozenset(request.tiers) if request.tiers is not None else SEARCHABLE_TIERS
    floor = request.min_confidence
    if floor is None and Tier.CANDIDATE not in tiers:
        floor = config.search.min_confidence  # asking for candidates is asking below the floor
    return IndexFilter(
        types=frozenset(request.types) if request.types is not None else None,
        topics=frozenset(request.topics) if request.topics is not None else None,
        tiers=tiers,
        min_confidence=floor,
    )


def _passes(memory: MemoryUnit, filter: IndexFilter) -> bool:
    return (
        (filter.types is None or memory.type in filter.types)
        and (filter.topics is None or memory.topic in filter.topics)
        and (filter.tiers is None or memory.tier in filter.tiers)
        and (filter.min_confidence is None or memory.confidence >= filter.min_confidence)
    )


def search(
    tenant: str, request: SearchRequest, config: PipelineConfig, deps: QueryDeps
) -> SearchResponse:
    """Hybrid search of one user's memories: BM25 on the text, kNN on content and question
    vectors, fused; the store has the last word on what is current (the index may lag it)."""
    filter = _filter_of(request, config)
    vector = deps.embedder.embed([request.query])[0]
    if request.as_of is not None:
        memories = [
            memory
            for memory in deps.store.memories_of(tenant, request.user_id)
            if _believed_at(memory, request.as_of) and _passes(memory, filter)
        ]
        hits = _rank_in_process(request.query, vector, memories, request.k, deps.embedder)
        by_id = {memory.memory_id: memory for memory in memories}
    else:
        hits = deps.index.hybrid(
            tenant,
            request.user_id,
            request.query,
            vector,
            request.k * _SLACK,
            filter=filter,
            bm25_weight=config.search.bm25_weight,
        )
        stored = deps.store.get_memories(tenant, request.user_id, [hit.memory_id for hit in hits])
        by_id = {
            memory_id: found.memory
            for memory_id, found in stored.items()
            if found.memory.active and _passes(found.memory, filter)
        }
    results = [
        SearchHit(memory=by_id[hit.memory_id], score=hit.score, matched=sorted(hit.matched))
        for hit in hits
        if hit.memory_id in by_id
    ]
    return SearchResponse(results=results[: request.k])


def _believed_at(memory: MemoryUnit, at: datetime) -> bool:
    """Held to be true at `at`: observed by then and not yet superseded (nor a retraction)."""
    if memory.negated or memory.observed_at > at:
        return False
    return memory.valid_until is None or memory.valid_until > at


def _words(text: str) -> set[str]:
    return {
        word
        for word in _WORD_RE.findall(text.casefold())
        if word not in BM25_STOPWORDS and len(word) > 1
    }


def _rank_in_process(
    query: str,
    vector: Any,
    memories: Sequence[MemoryUnit],
    k: int,
    embedder: Embedder,
) -> list[IndexHit]:
    """`as_of` reads past states, which the index no longer holds: rank the user's memories
    of that time here, with word overlap for the lexical side and the embedder for kNN."""
    if not memories:
        return []
    wanted = _words(query)
    lexical = [
        IndexHit(m.memory_id, float(len(wanted & _words(m.text))), frozenset({MatchSource.BM25}))
        for m in memories
    ]
    vectors = embedder.embed([memory.text for memory in memories])
    semantic = [
        IndexHit(m.memory_id, float(vectors[i] @ vector), frozenset({MatchSource.CONTENT}))
        for i, m in enumerate(memories)
    ]
    return fuse_hybrid(
        [hit for hit in lexical if hit.score > 0],
        sorted((hit for hit in semantic if hit.score > 0), key=lambda h: -h.score)[:k],
        k,
    )


class MemoryDetail(BaseModel):
    memory: MemoryUnit
    chain: list[MemoryUnit]  # its supersession chain, oldest first, itself included

    def as_json(self) -> dict[str, Any]:
        return {
            **memory_json(self.memory),
            "access_count": self.memory.access_count,
            "last_accessed": self.memory.last_accessed.isoformat()
            if self.memory.last_accessed
            else None,
            "chain": [memory_json(memory) for memory in self.chain],
        }


def memory_detail(tenant: str, memory_id: str, deps: QueryDeps) -> MemoryDetail:
    """One memory with the memories it superseded and those that superseded it."""
    memory = deps.reader.memory_by_id(tenant, memory_id)
    if memory is None:
        raise UnknownMemory(memory_id)
    others = {m.memory_id: m for m in deps.store.memories_of(tenant, memory.user_id)}
    older_of = {m.superseded_by: m for m in others.values() if m.superseded_by}
    chain = [memory]
    while chain[0].memory_id in older_of and older_of[chain[0].memory_id] not in chain:
        chain.insert(0, older_of[chain[0].memory_id])
    while chain[-1].superseded_by in others and others[chain[-1].superseded_by] not in chain:
        chain.append(others[chain[-1].superseded_by])
    return MemoryDetail(memory=memory, chain=chain)


def list_memories(
    tenant: str, user_id: str, limit: int, cursor: str | None, deps: QueryDeps
) -> dict[str, Any]:
    if not 1 <= limit <= MAX_PAGE_SIZE:
        raise InvalidQuery("limit", f"must be between 1 and {MAX_PAGE_SIZE}")
    page = deps.reader.page_of(tenant, user_id, limit, cursor)
    return {
        "user_id": user_id,
        "memories": [{**memory_json(m), "access_count": m.access_count} for m in page.memories],
        "next_cursor": page.next_cursor,
    }


def erase_user(tenant: str, user_id: str, deps: QueryDeps) -> dict[str, Any]:
    """Remove every trace of the user: the store's items, then the index (last, so that a
    HyPE job racing the erasure cannot leave a document behind once this returns)."""
    erasure = deps.eraser.erase_user(tenant, user_id)
    removed = {**erasure.removed, "index_documents": deps.index.delete_user(tenant, user_id)}
    return {"user_id": user_id, "erased": True, "removed": removed}
