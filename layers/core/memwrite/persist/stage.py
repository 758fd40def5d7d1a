"""Stage 6, persist: commit what dedupe and conflict decided, one transaction per candidate.

For each candidate, persist reads what the candidate touches, checks that the decisions in the
payload still hold for that read (the memory dedupe called new is still absent, the merge
target still exists, the entity_facts row is still at the version conflict decided on), scores
every memory whose state changes, and writes memory, entity_facts, supersession, ledger and
outbox rows in one all-or-nothing commit. Only when a decision no longer holds, or the
transaction is refused (`WriteConflict`: a concurrent writer got in between), does it read
again and decide again (dedupe's and conflict's, `memwrite.decisions`), so nothing is ever
half-applied and concurrent writers converge. Re-running a candidate already stored changes
nothing.
Every commit also requires the candidate's source trace to exist: a turn whose user was erased
while it was in flight is refused by the store (`SourceErased`), never retried, and reported
as rejected (`UserErased`). So is a commit of a trace rolled back meanwhile (`SourceRolledBack`,
rejected as `TraceRolledBack`): a retry of a failed turn must not undo its trace's rollback.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING

from memwrite.claims.candidate import MemoryType
from memwrite.claims.scoring import tier_for
from memwrite.config.settings import PipelineConfig
from memwrite.costs.usage import LlmUsage
from memwrite.decisions.candidate_reads import CandidateReads, read_candidate
from memwrite.decisions.duplicate import decide_on_read
from memwrite.decisions.fact_row import apply_state, decide_row
from memwrite.errors import (
    SourceErased,
    SourceRolledBack,
    StageInputError,
    WriteConflict,
)
from memwrite.model_ports import DedupeJudge, DedupeJudgement, Embedder
from memwrite.models import SpanResult, StageSpan
from memwrite.payloads import ConflictNote, DedupeNote, ItemsPayload, PipelineItem
from memwrite.ports import MemoryIndex, MemoryStore, MetricsSink, SpanStore
from memwrite.reasons import DuplicateConfirmed, StoreError, TraceRolledBack, UserErased
from memwrite.records.entity_facts import DerivedState
from memwrite.records.memory import EXPIRED_RETENTION, MemoryUnit, expiry_announced_on_write
from memwrite.records.store import Commit, FactRow, LedgerEntry, OutboxOp, OutboxRow, StoreItem
from memwrite.spans import (
    failure_recorded,
    item_span,
    record_spans,
    unrecorded,
    usage_summary,
)

if TYPE_CHECKING:
    from memwrite.ports import StageAdapters

__all__ = [
    "MAX_COMMIT_ATTEMPTS",
    "STAGE",
    "Decisions",
    "PersistDeps",
    "PersistOutcome",
    "PersistResult",
    "Plan",
    "build_deps",
    "decide",
    "persist_candidate",
    "plan",
    "run",
]

STAGE = "persist"
MAX_COMMIT_ATTEMPTS = 5


class PersistOutcome(StrEnum):
    STORED = "stored"  # a new memory
    MERGED = "merged"  # the same memory seen again: corroboration + 1
    ALREADY_APPLIED = "already_applied"  # this turn's candidate is in the store already


@dataclass(frozen=True)
class Decisions:
    """What dedupe and conflict decided for one candidate (conflict: None for unkeyed types)."""

    dedupe: DedupeNote
    conflict: ConflictNote | None

    def hold_for(self, item: StoreItem, reads: CandidateReads) -> bool:
        """True when a commit built from these decisions is the one they meant."""
        note = self.dedupe
        if note.target is None and note.memory_id in reads.memories:
            return False  # someone stored the "new" memory first
        if note.target is not None and note.target not in reads.memories:
            return False  # the merge target is gone (a task's TTL)
        if item.fact_key is None:
            return True
        if self.conflict is None:
            return note.already_applied
        return self.conflict.row_version == reads.row.version


@dataclass(frozen=True)
class PersistResult:
    outcome: PersistOutcome
    memory_id: str
    dedupe: DedupeNote
    superseded: tuple[str, ...] = ()  # memories this write ended
    contradicts: tuple[str, ...] = ()
    born_superseded: bool = False  # a late-arriving older fact
    attempts: int = 1
    decided_again: bool = False  # the recorded decisions no longer held: decided on a fresh read
    llm_calls: tuple[LlmUsage, ...] = ()  # the dedupe judge's, when deciding again asked it
    judge_malformed: int = 0  # of those, the malformed answers


@dataclass
class PersistDeps:
    store: MemoryStore
    embedder: Embedder  # dedupe's, for deciding again after a lost race
    spans: SpanStore
    metrics: MetricsSink
    judge: DedupeJudge | None = None
    index: MemoryIndex | None = None  # dedupe's, for indexed events and tasks
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))


def build_deps(adapters: StageAdapters) -> PersistDeps:
    # Dedupe's own stores, embedder, judge and index: persist decides again with them after a
    # lost race.
    return PersistDeps(
        store=adapters.memory_store(),
        embedder=adapters.similarity_embedder(),
        spans=adapters.spans,
        metrics=adapters.metrics,
        judge=adapters.dedupe_judge(),
        index=adapters.search_index(),
    )


@dataclass(frozen=True)
class Plan:
    commit: Commit | None  # None: nothing to write (already applied)
    result: PersistResult


def _new_memory(
    item: StoreItem, memory_id: str, now: datetime, config: PipelineConfig
) -> MemoryUnit:
    candidate = item.candidate
    expires_at = None
    if candidate.type is MemoryType.TASK:
        ttl = timedelta(days=config.scoring.task_ttl_days)
        expires_at = int((item.observed_at + ttl).timestamp())
    if item.expires_on is not None:
        expires_at = int((item.expires_on + EXPIRED_RETENTION).timestamp())
    return MemoryUnit(
        memory_id=memory_id,
        tenant=item.tenant,
        user_id=item.user_id,
        text=candidate.text,
        type=candidate.type,
        topic=candidate.topic,
        importance=candidate.importance,
        confidence=candidate.confidence,
        extractor_confidence=candidate.confidence,
        tier=tier_for(candidate.confidence, in_conflict=False, config=config.scoring),
        source=item.source,
        source_session=item.session_id,
        trace_id=item.trace_id,
        turn_id=item.turn_id,
        created_at=now,
        observed_at=item.observed_at,
        last_seen=item.observed_at,
        valid_at=candidate.valid_at,
        corroboration=1,
        corroborated_by=[item.turn_id],
        entity=candidate.entity,
        entity_id=item.entity_id,
        attribute=candidate.attribute,
        value=candidate.value,
        predicate_is_stateful=candidate.predicate_is_stateful,
        negated=candidate.negated,
        search_questions=list(candidate.search_questions),
        expires_at=expires_at,
        pinned=item.pinned,
        expires_on=item.expires_on,
        expiry_announced=expiry_announced_on_write(None, item.expires_on, now),
    )


def _merged(memory: MemoryUnit, item: StoreItem, now: datetime) -> MemoryUnit:
    """The memory seen again; a direct write seen again also pins it or sets its expiry."""
    written: dict[str, object] = {}
    if item.pinned:
        written["pinned"] = True
    if item.expires_on is not None:
        written["expires_on"] = item.expires_on
        written["expires_at"] = int((item.expires_on + EXPIRED_RETENTION).timestamp())
        written["expiry_announced"] = expiry_announced_on_write(memory, item.expires_on, now)
    return memory.model_copy(
        update={
            **written,
            "corroboration": memory.corroboration + 1,
            "corroborated_by": [*memory.corroborated_by, item.turn_id],
            "last_seen": max(memory.last_seen, item.observed_at),
            "observed_at": min(memory.observed_at, item.observed_at),
            "extractor_confidence": max(memory.extractor_confidence, item.candidate.confidence),
        }
    )


def decide(
    item: StoreItem, reads: CandidateReads, config: PipelineConfig, deps: PersistDeps
) -> tuple[Decisions, CandidateReads, DedupeJudgement | None]:
    """Dedupe and conflict again, on a fresh read (the path after a lost race); the dedupe
    judge's answer, when it was asked, comes along for its cost."""
    note, judgement = decide_on_read(
        item,
        reads,
        deps.store,
        index=deps.index,
        embedder=deps.embedder,
        config=config.dedupe,
        judge=deps.judge,
    )
    if note.target is not None and note.target not in reads.memories:
        found = deps.store.get_memories(item.tenant, item.user_id, [note.target])
        if not found:  # a pending memory vanished (TTL): store as new
            note = note.model_copy(update={"target": None, "tier": None})
        reads = replace(reads, memories={**reads.memories, **found})
    conflict_note = None if note.already_applied else decide_row(item, note, reads.row)
    return Decisions(note, conflict_note), reads, judgement


def plan(
    item: StoreItem,
    decisions: Decisions,
    reads: CandidateReads,
    config: PipelineConfig,
    now: datetime,
) -> Plan:
    """The commit that applies `decisions` to what was read (they must hold for it)."""
    note = decisions.dedupe
    target_id = note.written_id
    target = reads.memories.get(target_id)
    if target is not None and item.turn_id in target.memory.corroborated_by:
        return Plan(None, PersistResult(PersistOutcome.ALREADY_APPLIED, target_id, note))
    if note.target is not None:
        assert target is not None, "decisions must hold for the read"
        written = _merged(target.memory, item, now)
    else:
        written = _new_memory(item, target_id, now, config)
    noted = decisions.conflict
    state = noted.state if noted is not None else DerivedState()
    before = {mid: versioned.memory for mid, versioned in reads.memories.items()}
    after = {**before, target_id: written}
    changed: list[tuple[MemoryUnit, int | None]] = []
    for mid in sorted(after):
        updated = apply_state(after[mid], state, config)
        if mid == target_id or updated != before.get(mid):
            versioned = reads.memories.get(mid)
            changed.append((updated, versioned.rev if versioned is not None else None))
    outcome = PersistOutcome.MERGED if note.target is not None else PersistOutcome.STORED
    fact_row = None
    if noted is not None:
        facts = {**reads.row.facts, target_id: noted.observation}
        fact_row = FactRow(facts=facts, version=reads.row.version)
    commit = Commit(
        tenant=item.tenant,
        user_id=item.user_id,
        trace_id=item.trace_id,
        memories=changed,
        fact_key=noted.fact_key if noted is not None else None,
        fact_row=fact_row,
        ledger=[LedgerEntry(item.trace_id, target_id, outcome.value)],
        outbox=[
            OutboxRow(
                memory.memory_id,
                OutboxOp.UPSERT if memory.active else OutboxOp.DELETE,
                item.trace_id,
            )
            for memory, _ in changed
        ],
    )
    result = PersistResult(
        outcome=outcome,
        memory_id=target_id,
        dedupe=note,
        superseded=tuple(noted.supersedes) if noted is not None else (),
        contradicts=tuple(noted.contradicts) if noted is not None else (),
        born_superseded=noted.born_superseded if noted is not None else False,
    )
    return Plan(commit, result)


def persist_candidate(
    item: StoreItem,
    config: PipelineConfig,
    deps: PersistDeps,
    decided: Decisions | None = None,
) -> PersistResult:
    """Commit `decided` (or decide first, when None); a lost race decides again from a fresh
    read (bounded attempts)."""
    decided_again = False
    calls: list[LlmUsage] = []
    malformed = 0
    for attempt in range(1, MAX_COMMIT_ATTEMPTS + 1):
        target = decided.dedupe.target if decided is not None else None
        reads = read_candidate(deps.store, item, also=[target] if target else ())
        if decided is None or not decided.hold_for(item, reads):
            decided_again = decided_again or decided is not None
            decided, reads, judgement = decide(item, reads, config, deps)
            if judgement is not None:
                calls.extend(judgement.calls)
                malformed += judgement.malformed
        planned = plan(item, decided, reads, config, deps.clock())
        if planned.commit is None:
            return replace(planned.result, llm_calls=tuple(calls), judge_malformed=malformed)
        try:
            deps.store.commit(planned.commit)
        except WriteConflict:
            if attempt == MAX_COMMIT_ATTEMPTS:
                raise
            decided, decided_again = None, True
            continue
        return replace(
            planned.result,
            attempts=attempt,
            decided_again=decided_again,
            llm_calls=tuple(calls),
            judge_malformed=malformed,
        )
    raise AssertionError("unreachable: the loop returns or raises")


def _decisions(item: PipelineItem) -> Decisions:
    if item.dedupe is None:
        raise StageInputError(f"{STAGE}: item {item.item_id} has no dedupe decision")
    return Decisions(item.dedupe, item.conflict)


def _count_judge(calls: list[LlmUsage], malformed: int, metrics: MetricsSink) -> None:
    """The dedupe judge's calls when persist decided again, under persist's own name."""
    if malformed:
        metrics.event(STAGE, "dedupe_json_fail", malformed)
    metrics.llm_usage(STAGE, calls)


def run(payload: ItemsPayload, config: PipelineConfig, deps: PersistDeps) -> ItemsPayload:
    """Commit each candidate in order; a failure leaves error spans and propagates (Catch).

    A candidate whose user was erased meanwhile is rejected (`UserErased`), not retried: the
    erasure must not be undone by a turn that was still in flight. So is one whose trace was
    rolled back (`TraceRolledBack`), for the same reason."""
    items: list[PipelineItem] = []
    spans: list[StageSpan] = []
    replayed: list[StageSpan] = []  # items a redelivery finds applied
    calls: list[LlmUsage] = []
    malformed = 0

    def committed_so_far() -> None:
        """The spans and judge calls of the candidates committed before a failure."""
        _count_judge(calls, malformed, deps.metrics)
        record_spans(spans, deps.spans, deps.metrics)

    for index, item in enumerate(payload.items):
        started = time.perf_counter()
        refused: SourceErased | None = None
        # Earlier candidates are committed (each atomically); this and later ones are not. The
        # judge may have been paid before the commit failed: this candidate's span says so.
        with failure_recorded(
            STAGE,
            deps.spans,
            deps.metrics,
            reason=StoreError,
            undone=payload.items[index:],
            error_span=lambda rest, error, _latency_ms: item_span(
                payload, rest, STAGE, result=SpanResult.ERROR, reason=error
            ),
            before=committed_so_far,
            started=started,
        ) as paid:
            try:
                result = persist_candidate(
                    StoreItem.of(payload, item), config, deps, decided=_decisions(item)
                )
            except SourceErased as exc:
                refused = exc
        if refused is not None:
            latency_ms = (time.perf_counter() - started) * 1000
            spans.append(
                item_span(
                    payload,
                    item,
                    STAGE,
                    result=SpanResult.REJECT,
                    reason=(
                        TraceRolledBack() if isinstance(refused, SourceRolledBack) else UserErased()
                    ),
                    latency_ms=latency_ms,
                    llm=usage_summary(paid),  # a judge asked before the refusal was seen
                )
            )
            calls.extend(paid)
            continue
        items.append(
            item.model_copy(update={"memory_id": result.memory_id, "outcome": result.outcome.value})
        )
        tier = result.dedupe.tier
        merged = result.outcome is not PersistOutcome.STORED and tier is not None
        reason = DuplicateConfirmed(tier=tier) if merged and tier is not None else None
        latency_ms = (time.perf_counter() - started) * 1000
        applied = result.outcome is PersistOutcome.ALREADY_APPLIED
        (replayed if applied else spans).append(
            item_span(
                payload,
                item,
                STAGE,
                result=SpanResult.PASS,
                reason=reason,
                latency_ms=latency_ms,
                llm=usage_summary(result.llm_calls),
            )
        )
        calls.extend(result.llm_calls)
        malformed += result.judge_malformed
    record_spans([*spans, *unrecorded(replayed, deps.spans)], deps.spans, deps.metrics)
    _count_judge(calls, malformed, deps.metrics)
    return payload.model_copy(update={"items": items})
