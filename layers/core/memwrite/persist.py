"""Stages 4-6 on the store: dedupe, conflict and the atomic commit of one candidate.

`plan_candidate` reads what the candidate touches (its memory id, its predicate's entity_facts
row and the memories in it, recent unindexed memories for unkeyed types), decides dedupe and
conflict, scores every memory whose state changes, and returns the `Commit` that applies it.
`persist_candidate` commits the plan; when a concurrent writer moved a version first
(`WriteConflict`) it plans again from a fresh read, so nothing is ever half-applied and
concurrent writers converge. Re-running a candidate that is already stored changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from memwrite.candidate import Candidate, MemoryType
from memwrite.config import PipelineConfig
from memwrite.dedupe import DedupeDecision, DedupeJudge, Neighbour, decide_duplicate
from memwrite.embedder import Embedder
from memwrite.errors import WriteConflict
from memwrite.facts import DerivedState, FactObservation, canonical_predicate, derive
from memwrite.ids import content_hash
from memwrite.memory import KEYED_TYPES, MemoryLink, MemoryUnit, memory_id_for, normalise
from memwrite.scoring import score, tier_for
from memwrite.store import (
    Commit,
    FactRow,
    LedgerEntry,
    MemoryStore,
    OutboxOp,
    OutboxRow,
    VersionedMemory,
)

__all__ = [
    "MAX_COMMIT_ATTEMPTS",
    "PENDING_NEIGHBOURS",
    "PersistDeps",
    "PersistItem",
    "PersistOutcome",
    "PersistResult",
    "Plan",
    "persist_candidate",
    "plan_candidate",
]

MAX_COMMIT_ATTEMPTS = 5
PENDING_NEIGHBOURS = 50  # unindexed memories compared for unkeyed types (events, tasks)


@dataclass(frozen=True)
class PersistItem:
    """A resolved candidate with where it came from."""

    candidate: Candidate  # entity is the canonical name
    entity_id: str
    tenant: str
    user_id: str
    session_id: str
    trace_id: str
    turn_id: str
    observed_at: datetime
    source: str


class PersistOutcome(StrEnum):
    STORED = "stored"  # a new memory
    MERGED = "merged"  # the same memory seen again: corroboration + 1
    ALREADY_APPLIED = "already_applied"  # this turn's candidate is in the store already


@dataclass(frozen=True)
class PersistResult:
    outcome: PersistOutcome
    memory_id: str
    dedupe: DedupeDecision
    superseded: tuple[str, ...] = ()  # memories this write ended
    contradicts: tuple[str, ...] = ()
    born_superseded: bool = False  # a late-arriving older fact
    attempts: int = 1


@dataclass
class PersistDeps:
    store: MemoryStore
    embedder: Embedder
    judge: DedupeJudge | None = None
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))


@dataclass(frozen=True)
class Plan:
    commit: Commit | None  # None: nothing to write (already applied)
    result: PersistResult


def _fact_key(candidate: Candidate, entity_id: str) -> str:
    """Stateful predicates keep one row of history; idempotent ones one row per value, so a
    user who likes a thousand things never has a row (and a read) that grows with them."""
    predicate, _ = canonical_predicate(candidate.attribute, candidate.negated)
    if candidate.predicate_is_stateful:
        return f"{entity_id}#{predicate}"
    return f"{entity_id}#{predicate}#{content_hash(normalise(candidate.value))}"


def _share_a_word(a: str, b: str) -> bool:
    return bool(set(normalise(a).split()) & set(normalise(b).split()))


def _neighbours(
    item: PersistItem, row: FactRow, memories: dict[str, VersionedMemory], deps: PersistDeps
) -> list[Neighbour]:
    candidate = item.candidate
    if candidate.type in KEYED_TYPES:
        _, negated = canonical_predicate(candidate.attribute, candidate.negated)
        # Same predicate, same polarity, and a value in common: "Berlin" vs "Berlin, Germany".
        return [
            Neighbour(mid, memories[mid].memory.text)
            for mid, fact in row.facts.items()
            if mid in memories
            and fact.negated == negated
            and _share_a_word(fact.value, candidate.value)
        ]
    pending = deps.store.pending_memories(item.tenant, item.user_id, PENDING_NEIGHBOURS)
    return [
        Neighbour(m.memory_id, m.text)
        for m in pending
        if m.type is candidate.type and m.negated == candidate.negated
    ]


def _new_memory(
    item: PersistItem, memory_id: str, now: datetime, config: PipelineConfig
) -> MemoryUnit:
    candidate = item.candidate
    expires_at = None
    if candidate.type is MemoryType.TASK:
        ttl = timedelta(days=config.scoring.task_ttl_days)
        expires_at = int((item.observed_at + ttl).timestamp())
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
    )


def _merged(memory: MemoryUnit, item: PersistItem) -> MemoryUnit:
    return memory.model_copy(
        update={
            "corroboration": memory.corroboration + 1,
            "corroborated_by": [*memory.corroborated_by, item.turn_id],
            "last_seen": max(memory.last_seen, item.observed_at),
            "observed_at": min(memory.observed_at, item.observed_at),
            "extractor_confidence": max(memory.extractor_confidence, item.candidate.confidence),
        }
    )


def _apply_state(memory: MemoryUnit, state: DerivedState, config: PipelineConfig) -> MemoryUnit:
    """Re-derive what conflict and scoring decide for one memory of the row."""
    in_conflict = memory.memory_id in state.challenged
    confidence = score(
        extractor_confidence=memory.extractor_confidence,
        source=memory.source,
        corroboration=memory.corroboration,
        in_conflict=in_conflict,
        memory_type=memory.type,
        config=config.scoring,
    )
    return memory.model_copy(
        update={
            "superseded_by": state.superseded_by.get(memory.memory_id),
            "valid_until": state.valid_until.get(memory.memory_id),
            "links": [
                MemoryLink(kind="contradicts", memory_id=other)
                for other in sorted(state.contradicts.get(memory.memory_id, ()))
            ],
            "confidence": confidence,
            "tier": tier_for(confidence, in_conflict=in_conflict, config=config.scoring),
        }
    )


def plan_candidate(item: PersistItem, config: PipelineConfig, deps: PersistDeps) -> Plan:
    """Dedupe and conflict for one candidate, from a fresh read; the commit that applies them."""
    candidate = item.candidate
    keyed = candidate.type in KEYED_TYPES
    memory_id = memory_id_for(item.tenant, item.user_id, candidate, item.entity_id)
    fact_key = _fact_key(candidate, item.entity_id) if keyed else None
    row = (
        deps.store.get_fact_row(item.tenant, item.user_id, fact_key)
        if fact_key is not None
        else FactRow()
    )
    read = deps.store.get_memories(item.tenant, item.user_id, [memory_id, *row.facts])

    if memory_id in read:
        decision = DedupeDecision(memory_id, 1, 1.0)
    else:
        decision = decide_duplicate(
            candidate.text,
            _neighbours(item, row, read, deps),
            embedder=deps.embedder,
            config=config.dedupe,
            judge=deps.judge,
        )
    target_id = decision.target or memory_id
    if decision.target is not None:
        target = read.get(target_id) or deps.store.get_memories(
            item.tenant, item.user_id, [target_id]
        ).get(target_id)
        if target is None:  # a pending memory vanished (TTL): store as new
            decision, target_id = DedupeDecision(None, None), memory_id
        elif item.turn_id in target.memory.corroborated_by:
            result = PersistResult(PersistOutcome.ALREADY_APPLIED, target_id, decision)
            return Plan(None, result)
        else:
            read[target_id] = target
    now = deps.clock()
    written = (
        _merged(read[target_id].memory, item)
        if decision.target is not None
        else _new_memory(item, memory_id, now, config)
    )

    state = DerivedState()
    new_row = row
    if fact_key is not None:
        _, negated = canonical_predicate(candidate.attribute, written.negated)
        facts = dict(row.facts)
        facts[target_id] = FactObservation(
            memory_id=target_id,
            value=normalise(written.value),
            negated=negated,
            observed_at=written.last_seen,
        )
        new_row = FactRow(facts=facts, version=row.version)
        state = derive(facts, stateful=candidate.predicate_is_stateful)

    before = {mid: versioned.memory for mid, versioned in read.items()}
    after = {**before, target_id: written}
    changed: list[tuple[MemoryUnit, int | None]] = []
    for mid in sorted(after):
        updated = _apply_state(after[mid], state, config)
        if mid == target_id or updated != before.get(mid):
            changed.append((updated, read[mid].rev if mid in read else None))
    outcome = PersistOutcome.MERGED if decision.target is not None else PersistOutcome.STORED
    commit = Commit(
        tenant=item.tenant,
        user_id=item.user_id,
        memories=changed,
        fact_key=fact_key,
        fact_row=new_row if fact_key is not None else None,
        ledger=[LedgerEntry(item.trace_id, target_id, outcome.value)],
        outbox=[
            OutboxRow(memory.memory_id, OutboxOp.UPSERT if memory.active else OutboxOp.DELETE)
            for memory, _ in changed
        ],
    )
    ended = tuple(
        m.memory_id
        for m, _ in changed
        if m.superseded_by and m.memory_id != target_id and not before[m.memory_id].superseded_by
    )
    final = next(m for m, _ in changed if m.memory_id == target_id)
    result = PersistResult(
        outcome=outcome,
        memory_id=target_id,
        dedupe=decision,
        superseded=ended,
        contradicts=tuple(link.memory_id for link in final.links),
        born_superseded=final.superseded_by is not None,
    )
    return Plan(commit, result)


def persist_candidate(
    item: PersistItem, config: PipelineConfig, deps: PersistDeps
) -> PersistResult:
    """Plan and commit; a lost race re-plans from a fresh read (bounded attempts)."""
    for attempt in range(1, MAX_COMMIT_ATTEMPTS + 1):
        plan = plan_candidate(item, config, deps)
        if plan.commit is None:
            return plan.result
        try:
            deps.store.commit(plan.commit)
        except WriteConflict:
            if attempt == MAX_COMMIT_ATTEMPTS:
                raise
            continue
        return PersistResult(**{**plan.result.__dict__, "attempts": attempt})
    raise AssertionError("unreachable: the loop returns or raises")
