"""In-memory adapters: the same ports with no AWS, for unit tests and benchmarks.

They keep the semantics that matter (INSERT-if-absent ledger, dedup by turn id in the queue,
spans keyed by stage and item) so logic tested against them behaves as against DynamoDB/SQS.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from threading import Lock

from memwrite.adapters.page_cursor import (
    decode_trace_cursor,
    encode_trace_cursor,
    time_bounds,
    trace_sort_key,
)
from memwrite.backfill.ports import BackfillJob
from memwrite.budget.ports import BucketRecord
from memwrite.claims.entities import Entity, VersionedEntity
from memwrite.config.tenant_overrides import TenantOverrides
from memwrite.costs.usage import LlmUsage
from memwrite.errors import SourceErased, WriteConflict
from memwrite.models import LlmUsageSummary, QueuedTurn, StageSpan, TraceInput, session_sort_key
from memwrite.ports import EnqueueResult, TracePage, TraceRecord
from memwrite.reasons import Reason
from memwrite.records.episode import Episode

__all__ = [
    "CountingMetrics",
    "InMemoryBackfillJobs",
    "InMemoryBudgetStore",
    "InMemoryEntityStore",
    "InMemoryQueue",
    "InMemorySessionLog",
    "InMemorySpanStore",
    "InMemoryTenantSettingsStore",
    "InMemoryTurnLedger",
]


class InMemoryBackfillJobs:
    """Backfills handed over in this process (`memwrite serve`: its backfill worker takes
    them). Held in memory: a job lost with the process leaves its episodes pending, and the
    continuous backfill distils them under a trace of its own."""

    def __init__(self) -> None:
        self._jobs: deque[BackfillJob] = deque()
        self._lock = Lock()

    def start(self, job: BackfillJob) -> None:
        with self._lock:
            self._jobs.append(job)

    def take(self) -> list[BackfillJob]:
        """Every job handed over so far, oldest first (each taken once)."""
        with self._lock:
            jobs = list(self._jobs)
            self._jobs.clear()
        return jobs


class InMemoryQueue:
    def __init__(self, refuse: frozenset[str] = frozenset()) -> None:
        self.messages: dict[str, QueuedTurn] = {}
        self._refuse = refuse  # turn ids this queue reports as failed, to exercise that path

    def enqueue(self, turns: Sequence[QueuedTurn]) -> EnqueueResult:
        failed = {t.turn_id: "InternalError" for t in turns if t.turn_id in self._refuse}
        for turn in turns:
            if turn.turn_id not in failed:
                self.messages.setdefault(turn.turn_id, turn)
        return EnqueueResult(
            sent=frozenset(t.turn_id for t in turns if t.turn_id not in failed), failed=failed
        )


class InMemoryTurnLedger:
    def __init__(self) -> None:
        self.enqueued: dict[tuple[str, str], str] = {}
        self.traces: dict[tuple[str, str], TraceRecord] = {}
        self.inputs: dict[tuple[str, str], list[TraceInput]] = {}
        self.trace_memories: dict[tuple[str, str], list[tuple[str, str]]] = {}
        self.questions: dict[tuple[str, str, str], tuple[str | None, float]] = {}

    def already_enqueued(self, tenant: str, turn_ids: Sequence[str]) -> set[str]:
        return {tid for tid in turn_ids if (tenant, tid) in self.enqueued}

    def record_enqueued(self, tenant: str, trace_id: str, turn_ids: Sequence[str]) -> set[str]:
        taken = {tid for tid in turn_ids if (tenant, tid) in self.enqueued}
        for tid in turn_ids:
            self.enqueued.setdefault((tenant, tid), trace_id)
        return taken

    def put_trace(self, trace: TraceRecord, inputs: Sequence[TraceInput] = ()) -> None:
        self.inputs[(trace.tenant, trace.trace_id)] = list(inputs)
        self.traces[(trace.tenant, trace.trace_id)] = trace

    def get_trace(self, tenant: str, trace_id: str) -> TraceRecord | None:
        return self.traces.get((tenant, trace_id))

    def trace_inputs(self, tenant: str, trace_id: str) -> list[TraceInput]:
        return list(self.inputs.get((tenant, trace_id), []))

    def replace_inputs(self, tenant: str, trace_id: str, inputs: Sequence[TraceInput]) -> None:
        if (tenant, trace_id) in self.inputs:
            self.inputs[(tenant, trace_id)] = list(inputs)

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
        low, high = time_bounds(since, until)
        if cursor is not None:
            high = min(high, decode_trace_cursor(cursor))
        keyed = sorted(
            (
                (trace_sort_key(trace.created_at, trace.trace_id), trace)
                for (t, _), trace in self.traces.items()
                if t == tenant and trace.user_id == user_id
            ),
            key=lambda pair: pair[0],
            reverse=True,
        )
        found = [trace for key, trace in keyed if low <= key < high]
        page = found[:limit]
        last = page[-1] if len(found) > limit and page else None
        next_cursor = (
            encode_trace_cursor(trace_sort_key(last.created_at, last.trace_id)) if last else None
        )
        return TracePage(traces=page, next_cursor=next_cursor)

    def memories_of_trace(self, tenant: str, trace_id: str) -> list[tuple[str, str]]:
        return list(self.trace_memories.get((tenant, trace_id), []))

    def traces_of_memory(self, tenant: str, memory_id: str) -> list[tuple[str, str]]:
        return sorted(
            (trace_id, outcome)
            for (t, trace_id), written in self.trace_memories.items()
            if t == tenant
            for mid, outcome in written
            if mid == memory_id
        )

    def last_question(self, tenant: str, user_id: str, session_id: str, now: float) -> str | None:
        question, expires_at = self.questions.get((tenant, user_id, session_id), (None, 0.0))
        return question if expires_at > now else None

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
        self.questions[(tenant, user_id, session_id)] = (question, int(now) + retention_secs)

    def require_trace(self, tenant: str, trace_id: str) -> None:
        """The stores' source-trace condition: the trace is recorded (erasing removes it)."""
        if (tenant, trace_id) not in self.traces:
            raise SourceErased(tenant, trace_id)


class InMemorySpanStore:
    def __init__(self) -> None:
        self.spans: dict[tuple[str, str, str, str], StageSpan] = {}

    def put_spans(self, spans: Sequence[StageSpan]) -> None:
        for span in spans:
            self.spans[(span.tenant, span.trace_id, span.stage, span.item_id)] = span

    def spans_of(self, tenant: str, trace_id: str) -> list[StageSpan]:
        found = [s for key, s in self.spans.items() if key[:2] == (tenant, trace_id)]
        return sorted(found, key=lambda span: span.at)

    def llm_usage_of(
        self, tenant: str, trace_id: str, keys: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], LlmUsageSummary]:
        usage = {
            key: span.llm
            for key in keys
            if (span := self.spans.get((tenant, trace_id, *key))) is not None
        }
        return {key: llm for key, llm in usage.items() if llm is not None}


class CountingMetrics:
    def __init__(self) -> None:
        self.counts: Counter[tuple[str, str, str]] = Counter()
        self.timings: list[tuple[str, float]] = []
        self.events: Counter[tuple[str, str]] = Counter()
        self.rules: Counter[tuple[str, str, str]] = Counter()
        self.llm: dict[str, list[LlmUsage]] = {}
        self.tenant_costs: dict[str, float] = {}

    def count(self, stage: str, outcome: str, reason: Reason | None, value: int = 1) -> None:
        self.counts[(stage, outcome, reason.type if reason else "none")] += value

    def event(self, stage: str, name: str, value: int = 1) -> None:
        self.events[(stage, name)] += value

    def by_rule(self, stage: str, name: str, rule: str, value: int = 1) -> None:
        self.rules[(stage, name, rule)] += value

    def timing(self, stage: str, latency_ms: float) -> None:
        self.timings.append((stage, latency_ms))

    def llm_usage(self, stage: str, calls: Sequence[LlmUsage]) -> None:
        if calls:
            self.llm.setdefault(stage, []).extend(calls)

    def tenant_cost(self, tenant: str, cost_usd: float) -> None:
        self.tenant_costs[tenant] = self.tenant_costs.get(tenant, 0.0) + cost_usd


class InMemorySessionLog:
    """`SessionLog` in a dict. With a ledger, a turn whose trace it does not hold is refused
    (`SourceErased`), as the stores refuse it; without one, every trace counts as live."""

    def __init__(self, ledger: InMemoryTurnLedger | None = None) -> None:
        self.turns: dict[tuple[str, str, str], dict[str, tuple[QueuedTurn, float]]] = {}
        self.episodes: dict[str, Episode] = {}  # turn id -> the episode kept with its turn
        self._ledger = ledger

    def recent(
        self, tenant: str, user_id: str, session_id: str, before: str, limit: int, *, now: float
    ) -> list[QueuedTurn]:
        log = self.turns.get((tenant, user_id, session_id), {})
        keys = sorted(
            key for key, (_, expires_at) in log.items() if key < before and expires_at > now
        )
        return [log[key][0] for key in keys[-limit:]] if limit else []

    def append_batch(
        self,
        turns: Sequence[QueuedTurn],
        now: float,
        retention_secs: int,
        episodes: Mapping[str, Episode] | None = None,
    ) -> frozenset[str]:
        erased: set[str] = set()
        if self._ledger is not None:
            for turn in turns:
                try:
                    self._ledger.require_trace(turn.tenant, turn.trace_id)
                except SourceErased:
                    erased.add(turn.trace_id)
        kept = episodes or {}
        for turn in turns:
            if turn.trace_id in erased:
                continue
            if (episode := kept.get(turn.turn_id)) is not None:
                self.episodes[episode.turn_id] = episode
            log = self.turns.setdefault((turn.tenant, turn.user_id, turn.session_id), {})
            log[session_sort_key(turn)] = (turn, int(now) + retention_secs)
        return frozenset(erased)


class InMemoryEntityStore:
    """`EntityStore` in a dict, with the same version check as DynamoDB's; with a ledger,
    the same source-trace check too (see `InMemorySessionLog`)."""

    def __init__(self, ledger: InMemoryTurnLedger | None = None) -> None:
        self._entities: dict[tuple[str, str, str], VersionedEntity] = {}
        self._ledger = ledger

    def entities_of(self, tenant: str, user_id: str, limit: int) -> list[Entity]:
        mine = [v.entity for (t, u, _), v in self._entities.items() if (t, u) == (tenant, user_id)]
        # Ties on last_seen break by name, so the order never depends on insertion.
        mine.sort(key=lambda e: e.name)
        mine.sort(key=lambda e: e.last_seen, reverse=True)
        return mine[:limit]

    def get(self, tenant: str, user_id: str, entity_id: str) -> VersionedEntity | None:
        return self._entities.get((tenant, user_id, entity_id))

    def put(
        self, entity: Entity, expected_version: int | None, source_trace_ids: Sequence[str]
    ) -> None:
        if self._ledger is not None:
            for trace_id in source_trace_ids:
                self._ledger.require_trace(entity.tenant, trace_id)
        key = (entity.tenant, entity.user_id, entity.entity_id)
        stored = self._entities.get(key)
        if (stored.version if stored else None) != expected_version:
            raise WriteConflict(f"entity {entity.entity_id} changed since it was read")
        self._entities[key] = VersionedEntity(entity, (expected_version or 0) + 1)


class InMemoryTenantSettingsStore:
    """Tenants' stored settings, kept as the JSON the other backends store (so a test sees
    what a round trip through storage does)."""

    def __init__(self) -> None:
        self.documents: dict[str, str] = {}
        self.reads = 0

    def get(self, tenant: str) -> TenantOverrides | None:
        self.reads += 1
        document = self.documents.get(tenant)
        return TenantOverrides.model_validate_json(document) if document else None

    def put(self, tenant: str, settings: TenantOverrides, updated_at: str) -> None:
        self.documents[tenant] = settings.model_dump_json(exclude_none=True)


class InMemoryBudgetStore:
    """`BudgetStore` in a dict: the unit tests' buckets (one process, so no real contention;
    `conflicts` makes the next saves lose, as to another worker)."""

    def __init__(self) -> None:
        self.records: dict[str, BucketRecord] = {}
        self.conflicts = 0

    def load(self, keys: Sequence[str]) -> list[BucketRecord | None]:
        return [self.records.get(key) for key in keys]

    def save(self, records: Sequence[BucketRecord]) -> bool:
        if self.conflicts:
            self.conflicts -= 1
            return False
        stored = [self.records.get(record.key) for record in records]
        if any((s.version if s else 0) != r.version for s, r in zip(stored, records, strict=True)):
            return False
        for record in records:
            self.records[record.key] = replace(record, version=record.version + 1)
        return True
