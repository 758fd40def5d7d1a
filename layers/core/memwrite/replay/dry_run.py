"""Overlays of the ports for a dry run (replay): reads go through to the real stores, every
write stays in memory and is dropped with the overlay.

`DryRunAdapters` is the adapters bundle of one run: the stages' own `build_deps` build their
deps from it, and the pipeline's own stage functions run against them unchanged, so a replay
decides exactly as the pipeline would, and writes nothing: no ledger, trace, span, memory,
entity, session turn, outbox row, rate-gate claim or index document. The memory store and the
index also hide the memories the replayed trace itself stored, so its candidates meet the store
as it was before that trace (not their own earlier writes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from memwrite.claims.entities import Entity, VersionedEntity
from memwrite.config.settings import PipelineConfig, Settings
from memwrite.costs.usage import LlmUsage
from memwrite.errors import WriteConflict
from memwrite.index import (
    DEFAULT_FUSION,
    Fusion,
    IndexFilter,
    IndexHit,
    IndexWrite,
    MemoryDoc,
    Vector,
)
from memwrite.model_ports import (
    CandidateVerifier,
    DedupeJudge,
    Embedder,
    ExtractionLlm,
    QuestionGenerator,
    ResolveJudge,
)
from memwrite.models import LlmUsageSummary, QueuedTurn, StageSpan, TraceInput, session_sort_key
from memwrite.ports import (
    EnqueueResult,
    EntityStore,
    EpisodeStore,
    EventPublisher,
    MemoryIndex,
    MemoryStore,
    Outbox,
    RateStore,
    SessionLog,
    StageAdapters,
    TenantSettingsStore,
    TenantWebhooks,
    TracePage,
    TraceRecord,
    TurnLedger,
    TurnQueue,
    WebhookQueue,
)
from memwrite.reasons import Reason
from memwrite.records.episode import Episode
from memwrite.records.memory import MemoryUnit
from memwrite.records.store import Commit, FactRow, VersionedMemory

__all__ = [
    "CollectedSpans",
    "DryRunAdapters",
    "DryRunEntities",
    "DryRunIndex",
    "DryRunLedger",
    "DryRunQueue",
    "DryRunRateStore",
    "DryRunSessionLog",
    "DryRunStore",
    "NoMetrics",
]


class CollectedSpans:
    """The run's spans, kept for the diff: one per (stage, item), the last one written."""

    def __init__(self) -> None:
        self.by_item: dict[tuple[str, str], StageSpan] = {}

    def put_spans(self, spans: Sequence[StageSpan]) -> None:
        for span in spans:
            self.by_item[(span.stage, span.item_id)] = span

    def spans_of(self, tenant: str, trace_id: str) -> list[StageSpan]:
        return sorted(self.by_item.values(), key=lambda span: span.at)

    def llm_usage_of(
        self, tenant: str, trace_id: str, keys: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], LlmUsageSummary]:
        usage = {key: span.llm for key in keys if (span := self.by_item.get(key)) is not None}
        return {key: llm for key, llm in usage.items() if llm is not None}


class NoMetrics:
    """A replay is not traffic: it counts nothing."""

    def count(self, stage: str, outcome: str, reason: Reason | None, value: int = 1) -> None:
        return None

    def event(self, stage: str, name: str, value: int = 1) -> None:
        return None

    def by_rule(self, stage: str, name: str, rule: str, value: int = 1) -> None:
        return None

    def timing(self, stage: str, latency_ms: float) -> None:
        return None

    def llm_usage(self, stage: str, calls: Sequence[LlmUsage]) -> None:
        return None

    def tenant_cost(self, tenant: str, cost_usd: float) -> None:
        return None


class DryRunQueue:
    """Keeps what the pre-filter would enqueue: the input of the run's extract stage."""

    def __init__(self) -> None:
        self.turns: dict[str, QueuedTurn] = {}

    def enqueue(self, turns: Sequence[QueuedTurn]) -> EnqueueResult:
        for turn in turns:
            self.turns.setdefault(turn.turn_id, turn)
        return EnqueueResult(sent=frozenset(turn.turn_id for turn in turns), failed={})


class DryRunRateStore:
    """Grants every claim and keeps none: the run's own rate gate, in the process, still
    admits the same words once per window within the replayed request."""

    def claim_all(self, claims: Sequence[tuple[str, str, float]], window_secs: int) -> list[bool]:
        return [True] * len(claims)


class DryRunLedger:
    """A ledger that has seen nothing: the replayed turns are not duplicates of their own first
    run, and no session question precedes them (both runs of a replay see the same)."""

    def already_enqueued(self, tenant: str, turn_ids: Sequence[str]) -> set[str]:
        return set()

    def record_enqueued(self, tenant: str, trace_id: str, turn_ids: Sequence[str]) -> set[str]:
        return set()

    def put_trace(self, trace: TraceRecord, inputs: Sequence[TraceInput] = ()) -> None:
        return None

    def get_trace(self, tenant: str, trace_id: str) -> TraceRecord | None:
        return None

    def trace_inputs(self, tenant: str, trace_id: str) -> list[TraceInput]:
        return []

    def replace_inputs(self, tenant: str, trace_id: str, inputs: Sequence[TraceInput]) -> None:
        return None

    def traces_of_user(
        self,
        tenant: str,
        user_id: str,
        *,
        since: datetime | None,
        until: datetime | None,
        limit: int,
        cursor: str | None,
    ) -> TracePage:
        return TracePage(traces=[], next_cursor=None)

    def memories_of_trace(self, tenant: str, trace_id: str) -> list[tuple[str, str]]:
        return []

    def traces_of_memory(self, tenant: str, memory_id: str) -> list[tuple[str, str]]:
        return []

    def last_question(self, tenant: str, user_id: str, session_id: str, now: float) -> str | None:
        return None

    def set_last_question(
        self,
        tenant: str,
        user_id: str,
        session_id: str,
        question: str | None,
        *,
        now: float,
        retention_secs: int,
    ) -> None:
        return None


class DryRunSessionLog:
    """The session's logged turns, plus the ones this run appended."""

    def __init__(self, base: SessionLog) -> None:
        self._base = base
        self._appended: dict[str, QueuedTurn] = {}
        self.episodes: dict[str, Episode] = {}  # turn id -> what this run would keep

    def recent(
        self, tenant: str, user_id: str, session_id: str, before: str, limit: int, *, now: float
    ) -> list[QueuedTurn]:
        turns = {
            session_sort_key(turn): turn
            for turn in self._base.recent(tenant, user_id, session_id, before, limit, now=now)
        }
        turns.update(
            (key, turn)
            for key, turn in self._appended.items()
            if key < before
            and (turn.tenant, turn.user_id, turn.session_id) == (tenant, user_id, session_id)
        )
        return [turns[key] for key in sorted(turns)[-limit:]] if limit > 0 else []

    def append_batch(
        self,
        turns: Sequence[QueuedTurn],
        now: float,
        retention_secs: int,
        episodes: Mapping[str, Episode] | None = None,
    ) -> frozenset[str]:
        for turn in turns:
            self._appended[session_sort_key(turn)] = turn
        self.episodes.update(episodes or {})
        return frozenset()


class DryRunEntities:
    """The user's entities, with this run's puts over them (version checked the same way)."""

    def __init__(self, base: EntityStore) -> None:
        self._base = base
        self._written: dict[tuple[str, str, str], VersionedEntity] = {}

    def entities_of(self, tenant: str, user_id: str, limit: int) -> list[Entity]:
        mine = {
            key[2]: versioned.entity
            for key, versioned in self._written.items()
            if key[:2] == (tenant, user_id)
        }
        found = {e.entity_id: e for e in self._base.entities_of(tenant, user_id, limit)} | mine
        ordered = sorted(found.values(), key=lambda entity: entity.name)
        ordered.sort(key=lambda entity: entity.last_seen, reverse=True)
        return ordered[:limit]

    def get(self, tenant: str, user_id: str, entity_id: str) -> VersionedEntity | None:
        written = self._written.get((tenant, user_id, entity_id))
        return written or self._base.get(tenant, user_id, entity_id)

    def put(
        self, entity: Entity, expected_version: int | None, source_trace_ids: Sequence[str]
    ) -> None:
        current = self.get(entity.tenant, entity.user_id, entity.entity_id)
        if (current.version if current else None) != expected_version:
            raise WriteConflict(f"entity {entity.entity_id} changed since it was read")
        key = (entity.tenant, entity.user_id, entity.entity_id)
        self._written[key] = VersionedEntity(entity, (expected_version or 0) + 1)


class DryRunStore:
    """The memory store as `hidden` memories were never written, with this run's commits
    applied in memory (later candidates of the run see earlier ones, as in the pipeline)."""

    def __init__(self, base: MemoryStore, hidden: frozenset[str]) -> None:
        self._base = base
        self._hidden = hidden
        self._memories: dict[tuple[str, str, str], VersionedMemory] = {}
        self._rows: dict[tuple[str, str, str], FactRow] = {}
        self.commits: list[Commit] = []

    def get_memories(
        self, tenant: str, user_id: str, ids: Sequence[str]
    ) -> dict[str, VersionedMemory]:
        own = {
            mid: self._memories[(tenant, user_id, mid)]
            for mid in ids
            if (tenant, user_id, mid) in self._memories
        }
        rest = [mid for mid in dict.fromkeys(ids) if mid not in own and mid not in self._hidden]
        found = self._base.get_memories(tenant, user_id, rest) if rest else {}
        return {**found, **own}

    def get_fact_row(self, tenant: str, user_id: str, key: str) -> FactRow:
        own = self._rows.get((tenant, user_id, key))
        if own is not None:
            return own
        row = self._base.get_fact_row(tenant, user_id, key)
        facts = {mid: fact for mid, fact in row.facts.items() if mid not in self._hidden}
        return FactRow(facts=facts, version=row.version)

    def _own(self, tenant: str, user_id: str) -> list[MemoryUnit]:
        return [
            versioned.memory
            for key, versioned in self._memories.items()
            if key[:2] == (tenant, user_id)
        ]

    def _visible(self, tenant: str, user_id: str, memories: list[MemoryUnit]) -> list[MemoryUnit]:
        return [
            memory
            for memory in memories
            if memory.memory_id not in self._hidden
            and (tenant, user_id, memory.memory_id) not in self._memories
        ]

    def pending_memories(self, tenant: str, user_id: str, limit: int) -> list[MemoryUnit]:
        base = self._base.pending_memories(tenant, user_id, limit + len(self._hidden))
        own = list(reversed(self._own(tenant, user_id)))  # newest first, as the port orders
        return [*own, *self._visible(tenant, user_id, base)][:limit]

    def commit(self, commit: Commit) -> None:
        self.commits.append(commit)
        for memory, rev in commit.memories:
            key = (commit.tenant, commit.user_id, memory.memory_id)
            self._memories[key] = VersionedMemory(memory, (rev or 0) + 1)
        if commit.fact_key is not None and commit.fact_row is not None:
            row = commit.fact_row
            self._rows[(commit.tenant, commit.user_id, commit.fact_key)] = FactRow(
                facts=row.facts, version=row.version + 1
            )

    def memories_of(self, tenant: str, user_id: str) -> list[MemoryUnit]:
        base = self._base.memories_of(tenant, user_id)
        return [*self._visible(tenant, user_id, base), *self._own(tenant, user_id)]


class DryRunIndex:
    """The search index, read only, without the `hidden` memories."""

    def __init__(self, base: MemoryIndex, hidden: frozenset[str]) -> None:
        self._base = base
        self._hidden = hidden

    def _visible(self, hits: list[IndexHit], k: int) -> list[IndexHit]:
        return [hit for hit in hits if hit.memory_id not in self._hidden][:k]

    def upsert(self, doc: MemoryDoc) -> None:
        raise AssertionError("a dry run never writes the index")

    def delete(self, tenant: str, user_id: str, memory_id: str) -> None:
        raise AssertionError("a dry run never writes the index")

    def write(self, writes: Sequence[IndexWrite]) -> dict[int, str]:
        raise AssertionError("a dry run never writes the index")

    def delete_user(self, tenant: str, user_id: str) -> int:
        raise AssertionError("a dry run never writes the index")

    def delete_expired(self, now: float, limit: int) -> int:
        raise AssertionError("a dry run never writes the index")

    def knn(
        self,
        tenant: str,
        user_id: str,
        vector: Vector,
        k: int,
        *,
        filter: IndexFilter | None = None,
    ) -> list[IndexHit]:
        wider = k + len(self._hidden)
        return self._visible(self._base.knn(tenant, user_id, vector, wider, filter=filter), k)

    def bm25(
        self,
        tenant: str,
        user_id: str,
        query: str,
        k: int,
        *,
        filter: IndexFilter | None = None,
    ) -> list[IndexHit]:
        wider = k + len(self._hidden)
        return self._visible(self._base.bm25(tenant, user_id, query, wider, filter=filter), k)

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
        hits = self._base.hybrid(
            tenant,
            user_id,
            query,
            vector,
            k + len(self._hidden),
            filter=filter,
            fusion=fusion,
        )
        return self._visible(hits, k)

    def count(self, tenant: str, user_id: str) -> int:
        return self._base.count(tenant, user_id)


class DryRunAdapters:
    """The adapters bundle (`StageAdapters`) of one dry run over the deployment's: each stage's
    own `build_deps` builds its deps from it. Every store is an overlay of the real one (reads
    go through, writes stay here and are dropped with the run); spans are collected for the
    diff, metrics dropped; the model clients and embedders are the deployment's.

    The episode store and the outbox are refused: no replayed stage writes through them (extract
    keeps its episodes through the session log, which the overlay keeps here)."""

    def __init__(self, base: StageAdapters, config: PipelineConfig, hidden: frozenset[str]) -> None:
        self._base = base
        # The run's config stands for the deployment's: what a builder sizes from the
        # settings (the rate gate's map) is the run's, override included.
        self._settings = base.settings.model_copy(update={"pipeline": config})
        self.collected = CollectedSpans()
        self._metrics = NoMetrics()
        self.queued = DryRunQueue()
        self._ledger = DryRunLedger()
        self.session = DryRunSessionLog(base.session_log())
        self._entities = DryRunEntities(base.entities())
        self._store = DryRunStore(base.memory_store(), hidden)
        self._index = DryRunIndex(base.search_index(), hidden)

    @property
    def settings(self) -> Settings:
        return self._settings

    @property
    def spans(self) -> CollectedSpans:
        return self.collected

    @property
    def metrics(self) -> NoMetrics:
        return self._metrics

    def ledger(self) -> TurnLedger:
        return self._ledger

    def rate_store(self) -> RateStore:
        return DryRunRateStore()

    def queue(self) -> TurnQueue:
        return self.queued

    def session_log(self) -> SessionLog:
        return self.session

    def episodes(self) -> EpisodeStore:
        raise AssertionError("a dry run never writes episodes")

    def entities(self) -> EntityStore:
        return self._entities

    def memory_store(self) -> MemoryStore:
        return self._store

    def outbox(self) -> Outbox:
        raise AssertionError("a dry run never writes the outbox")

    def tenant_settings(self) -> TenantSettingsStore | None:
        return None  # the run's config is given, the tenant's stored settings in it

    def tenant_webhooks(self) -> TenantWebhooks:
        raise AssertionError("a dry run sends no webhook")

    def event_publisher(self) -> EventPublisher | None:
        return None  # a dry run announces nothing

    def webhook_queue(self) -> WebhookQueue:
        raise AssertionError("a dry run hands no webhook delivery over")

    def extraction_llm(self) -> ExtractionLlm | None:
        return self._base.extraction_llm()

    def verifier(self) -> CandidateVerifier | None:
        return self._base.verifier()

    def resolve_judge(self) -> ResolveJudge | None:
        return self._base.resolve_judge()

    def dedupe_judge(self) -> DedupeJudge | None:
        return self._base.dedupe_judge()

    def questions(self) -> QuestionGenerator:
        return self._base.questions()

    def embedder(self) -> Embedder:
        return self._base.embedder()

    def similarity_embedder(self) -> Embedder:
        return self._base.similarity_embedder()

    def search_index(self) -> MemoryIndex:
        return self._index
