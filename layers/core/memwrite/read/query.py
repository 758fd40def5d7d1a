"""The read API's logic: hybrid search, one memory with its supersession chain, a user's
memories (and episodes) page by page.

Search returns two kinds of results (docs/episodes.md): memories, filtered by tier, confidence,
type and topic, and episodes (kept turns that wait for a model), ranked by the same hybrid
fusion within their kind and weighted by `episodes.search_weight`; an episode never appears
beside a memory that was distilled from it.

Everything is scoped by the tenant of the credential (the caller passes it) and the user id of
the request; another tenant's memories are invisible even under the same user id, because
every key of the store and every index document starts with the tenant.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from memwrite.claims.candidate import MemoryType, Tier
from memwrite.config.settings import PipelineConfig
from memwrite.errors import InvalidQuery, UnknownMemory
from memwrite.index import (
    BM25_STOPWORDS,
    DocKind,
    Fusion,
    FusionMethod,
    IndexFilter,
    IndexHit,
    MatchSource,
    fuse_hybrid,
)
from memwrite.model_ports import Embedder
from memwrite.models import Identifier
from memwrite.ports import EpisodeStore, MemoryIndex, MemoryReader, MemoryStore
from memwrite.read.pending import pending_of
from memwrite.records.episode import (
    Episode,
    EpisodeStatus,
    ExpiryWarning,
    episode_of_doc_id,
    expiry_warning,
)
from memwrite.records.memory import MemoryLink, MemoryUnit

__all__ = [
    "MAX_PAGE_SIZE",
    "SEARCHABLE_TIERS",
    "EpisodePageView",
    "EpisodeResultView",
    "EpisodeView",
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
    "episode_fusion",
    "list_episodes",
    "list_memories",
    "memory_detail",
    "memory_fusion",
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
    pinned: bool = Field(description="Only a direct write or an explicit correction replaces it.")
    expires_at: datetime | None = Field(
        description="The expiry set with PATCH: after it, out of search and the memory list."
    )


_MEMORY_FIELDS = frozenset(MemoryView.model_fields) - {"source_turn_id", "expires_at"}


def memory_json(memory: MemoryUnit) -> dict[str, Any]:
    """A memory as the API returns it (`MemoryView`'s fields, in JSON). Its `expires_at` is
    the user's expiry (`expires_on`), not the store's TTL."""
    view = memory.model_dump(mode="json", include=set(_MEMORY_FIELDS))
    view["source_turn_id"] = memory.turn_id
    view["expires_at"] = memory.expires_on.isoformat() if memory.expires_on else None
    return view


class SearchResultView(MemoryView):
    """One memory hit of `POST /v1/search`: the memory, its fused score and what matched."""

    kind: Literal["memory"]
    score: float
    matched: list[MatchSource]


class EpisodeView(BaseModel):
    """An episode as the API returns it: a kept turn's own (masked) words, waiting for a model
    (`pending`), in a provider batch (`in_batch`, with `batch_id`), distilled (`extracted`,
    with `memory_ids`) or `expired` (docs/episodes.md)."""

    kind: Literal["episode"]
    turn_id: str
    source_turn_id: str
    user_id: str
    session_id: str
    trace_id: str
    observed_at: datetime
    text: str
    in_reply_to: str | None
    status: EpisodeStatus
    deferred_reason: dict[str, Any]
    memory_ids: list[str]
    outcome: str | None
    backfill_trace_id: str | None
    batch_id: str | None
    expires_at: datetime


class EpisodeResultView(EpisodeView):
    """One episode hit of `POST /v1/search`: its score (times `episodes.search_weight`)."""

    score: float
    matched: list[MatchSource]


class SearchResults(BaseModel):
    """`POST /v1/search`: best first; each result a memory or an episode (`kind`)."""

    results: list[Annotated[SearchResultView | EpisodeResultView, Field(discriminator="kind")]]


class EpisodePageView(BaseModel):
    """`GET /v1/users/{user_id}/episodes`: one page, oldest first; `next_cursor` null on the
    last."""

    user_id: str
    episodes: list[EpisodeView]
    next_cursor: str | None
    # With no model configured: the user's pending episodes near their expiry (else empty).
    warnings: list[ExpiryWarning] = []


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
    kinds: list[DocKind] | None = Field(
        default=None,
        min_length=1,
        description="memory and/or episode (default: both; `as_of` searches memories only).",
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
    memory: MemoryUnit | None = None
    episode: Episode | None = None  # exactly one of the two
    score: float
    matched: list[MatchSource]

    @property
    def kind(self) -> DocKind:
        return DocKind.MEMORY if self.memory is not None else DocKind.EPISODE

    @property
    def source_turn_id(self) -> str:
        if self.memory is not None:
            return self.memory.turn_id
        assert self.episode is not None
        return self.episode.turn_id

    def as_json(self, now: float) -> dict[str, Any]:
        if self.memory is not None:
            view = {"kind": DocKind.MEMORY.value, **memory_json(self.memory)}
        else:
            assert self.episode is not None
            view = self.episode.as_json(now)
        return {**view, "score": self.score, "matched": self.matched}


class SearchResponse(BaseModel):
    results: list[SearchHit]

    @property
    def memories(self) -> list[MemoryUnit]:
        return [hit.memory for hit in self.results if hit.memory is not None]

    def as_json(self) -> dict[str, Any]:
        now = time.time()
        return {"results": [hit.as_json(now) for hit in self.results]}


@dataclass
class QueryDeps:
    store: MemoryStore
    reader: MemoryReader
    index: MemoryIndex
    embedder: Embedder
    episodes: EpisodeStore | None = None
    # Whether a model can distil pending episodes (else the episodes list warns of expiry).
    has_model: bool = True


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
        kinds=frozenset({DocKind.MEMORY}),
    )


def memory_fusion(config: PipelineConfig) -> Fusion:
    """How memories' BM25 and kNN lists are fused (`pipeline.search`)."""
    search = config.search
    return Fusion(FusionMethod(search.fusion), search.bm25_weight, search.rank_constant)


def episode_fusion(config: PipelineConfig) -> Fusion:
    """How episodes' lists are fused (`pipeline.episodes`, `search.rank_constant`)."""
    episodes = config.episodes
    return Fusion(FusionMethod(episodes.fusion), episodes.bm25_weight, config.search.rank_constant)


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
    """Hybrid search of one user's memories and episodes: BM25 on the text, kNN on content
    and question vectors, fused per kind; the stores have the last word on what is current
    (the index may lag them)."""
    kinds = set(request.kinds or DocKind)
    vector = deps.embedder.embed([request.query])[0]
    results: list[SearchHit] = []
    if DocKind.MEMORY in kinds:
        results = _search_memories(tenant, request, vector, config, deps)
    if DocKind.EPISODE in kinds and request.as_of is None and deps.episodes is not None:
        episodes = _search_episodes(tenant, request, vector, config, deps, results)
        results = sorted(
            [*results, *episodes],
            key=lambda hit: (-hit.score, hit.kind != DocKind.MEMORY, hit.source_turn_id),
        )
    # A fused score of 0 matched nothing that counts (a kNN-only hit where BM25 weighs 1, the
    # last of a min-max list): it does not fill the list up to k.
    return SearchResponse(results=[hit for hit in results if hit.score > 0][: request.k])


def _search_memories(
    tenant: str, request: SearchRequest, vector: Any, config: PipelineConfig, deps: QueryDeps
) -> list[SearchHit]:
    filter = _filter_of(request, config)
    if request.as_of is not None:
        memories = [
            memory
            for memory in deps.store.memories_of(tenant, request.user_id)
            if _believed_at(memory, request.as_of) and _passes(memory, filter)
        ]
        hits = _rank_in_process(
            request.query,
            vector,
            memories,
            request.k,
            embedder=deps.embedder,
            fusion=memory_fusion(config),
        )
        by_id = {memory.memory_id: memory for memory in memories}
    else:
        hits = deps.index.hybrid(
            tenant,
            request.user_id,
            request.query,
            vector,
            request.k * _SLACK,
            filter=filter,
            fusion=memory_fusion(config),
        )
        stored = deps.store.get_memories(tenant, request.user_id, [hit.memory_id for hit in hits])
        now = datetime.now(UTC)
        by_id = {
            memory_id: found.memory
            for memory_id, found in stored.items()
            if found.memory.active
            and not found.memory.expired(now)
            and _passes(found.memory, filter)
        }
    return [
        SearchHit(memory=by_id[hit.memory_id], score=hit.score, matched=sorted(hit.matched))
        for hit in hits
        if hit.memory_id in by_id
    ]


def _search_episodes(  # noqa: PLR0917 (private: its one caller passes them in order)
    tenant: str,
    request: SearchRequest,
    vector: Any,
    config: PipelineConfig,
    deps: QueryDeps,
    memories: Sequence[SearchHit],
) -> list[SearchHit]:
    """Episodes ranked within their kind, scores times `episodes.search_weight`; none that is
    expired, erased, or the source of a memory among `memories`."""
    assert deps.episodes is not None
    now = time.time()
    hits = deps.index.hybrid(
        tenant,
        request.user_id,
        request.query,
        vector,
        request.k * _SLACK,
        # Past their retention before their item is gone (TTL, later): not even fetched.
        filter=IndexFilter(kinds=frozenset({DocKind.EPISODE}), live_at=now),
        fusion=episode_fusion(config),
    )
    turn_ids = {hit.memory_id: episode_of_doc_id(hit.memory_id) for hit in hits}
    stored = deps.episodes.get_episodes(
        tenant, request.user_id, [t for t in turn_ids.values() if t is not None]
    )
    shown_turns = {hit.source_turn_id for hit in memories}
    shown_ids = {hit.memory.memory_id for hit in memories if hit.memory is not None}
    weight = config.episodes.search_weight
    results = []
    for hit in hits:
        episode = stored.get(turn_ids[hit.memory_id] or "")
        if episode is None or episode.status_at(now) is EpisodeStatus.EXPIRED:
            continue
        if episode.turn_id in shown_turns or shown_ids.intersection(episode.memory_ids):
            continue  # distilled into a memory that is shown: the memory speaks for it
        results.append(
            SearchHit(episode=episode, score=hit.score * weight, matched=sorted(hit.matched))
        )
    return results


def _believed_at(memory: MemoryUnit, at: datetime) -> bool:
    """Held to be true at `at`: observed by then, not yet superseded (nor a retraction) and
    not yet expired."""
    if memory.negated or memory.observed_at > at or memory.expired(at):
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
    *,
    embedder: Embedder,
    fusion: Fusion,
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

    def best_first(hits: list[IndexHit]) -> list[IndexHit]:  # as the index ranks: k each
        return sorted((hit for hit in hits if hit.score > 0), key=lambda h: -h.score)[:k]

    return fuse_hybrid(best_first(lexical), best_first(semantic), k, fusion)


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
    now = datetime.now(UTC)  # expired memories leave the list (a page may come out short)
    return {
        "user_id": user_id,
        "memories": [
            {**memory_json(m), "access_count": m.access_count}
            for m in page.memories
            if not m.expired(now)
        ],
        "next_cursor": page.next_cursor,
    }


def list_episodes(
    tenant: str,
    user_id: str,
    *,
    status: EpisodeStatus | None,
    since: datetime | None,
    until: datetime | None,
    limit: int,
    cursor: str | None,
    config: PipelineConfig,
    deps: QueryDeps,
) -> dict[str, Any]:
    """`GET /v1/users/{user_id}/episodes`: a user's episodes, oldest first, page by page, with
    a warning when pending ones near their expiry and no model is configured to distil them."""
    if not 1 <= limit <= MAX_PAGE_SIZE:
        raise InvalidQuery("limit", f"must be between 1 and {MAX_PAGE_SIZE}")
    if since is not None and until is not None and since > until:
        raise InvalidQuery("until", "must not be before since")
    if deps.episodes is None:
        return {"user_id": user_id, "episodes": [], "next_cursor": None, "warnings": []}
    now = time.time()
    page = deps.episodes.episodes_of(
        tenant,
        user_id,
        status=status,
        since=since,
        until=until,
        limit=limit,
        cursor=cursor,
        now=now,
    )
    return {
        "user_id": user_id,
        "episodes": [episode.as_json(now) for episode in page.episodes],
        "next_cursor": page.next_cursor,
        "warnings": _expiry_warnings(tenant, user_id, config, deps, now),
    }


def _expiry_warnings(
    tenant: str, user_id: str, config: PipelineConfig, deps: QueryDeps, now: float
) -> list[dict[str, Any]]:
    """With no model configured: the user's pending episodes near their expiry, whichever
    page is asked for (one query of the user's pending episodes)."""
    if deps.has_model or deps.episodes is None:
        return []
    pending = pending_of(deps.episodes, tenant, user_id, now=now)
    warning = expiry_warning(pending, now, config.episodes.expiry_warning_days)
    return [] if warning is None else [warning.model_dump(mode="json")]
