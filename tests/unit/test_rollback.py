"""Planning a trace's rollback (`memwrite.edit.rollback.plan_rollback`), a pure function of what was
read: what goes, what comes back, and what is refused because it cannot be undone exactly."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memwrite.claims.candidate import MemoryType, Tier
from memwrite.config.settings import PipelineConfig
from memwrite.decisions.fact_row import apply_state
from memwrite.edit.rollback import MAX_ROLLBACK_ITEMS, RollbackReads, plan_rollback
from memwrite.errors import RollbackRefused
from memwrite.ids import content_hash
from memwrite.ports import TraceRecord
from memwrite.records.entity_facts import FactObservation, derive, memory_fact_key
from memwrite.records.memory import MemoryUnit
from memwrite.records.store import FactRow, OutboxOp, VersionedMemory

CONFIG = PipelineConfig()
T0 = datetime(2025, 1, 5, 10, tzinfo=UTC)
NOW = datetime(2025, 9, 1, tzinfo=UTC)


def memory(
    trace: str,
    attribute: str,
    value: str,
    *,
    day: int,
    negated: bool = False,
    stateful: bool = True,
    type: MemoryType = MemoryType.FACT,
) -> MemoryUnit:
    turn = f"{trace}-turn"
    return MemoryUnit(
        memory_id=content_hash(attribute, value, str(negated), type.value),
        tenant="acme",
        user_id="dana",
        text=f"The user {attribute} {value}.",
        type=type,
        topic="t",
        importance=0.5,
        confidence=0.85,
        extractor_confidence=0.9,
        tier=Tier.WORKING,
        source="user_explicit",
        source_session="s",
        trace_id=trace,
        turn_id=turn,
        created_at=T0,
        observed_at=T0 + timedelta(days=day),
        last_seen=T0 + timedelta(days=day),
        corroborated_by=[turn],
        entity="user",
        entity_id="e-user",
        attribute=attribute,
        value=value,
        predicate_is_stateful=stateful,
        negated=negated,
    )


def trace(trace_id: str) -> TraceRecord:
    return TraceRecord(
        trace_id, "acme", "dana", "s", None, "user_explicit", "", (f"{trace_id}-turn",)
    )


def stored(*memories: MemoryUnit) -> tuple[dict[str, VersionedMemory], dict[str, FactRow]]:
    """The store as persist leaves it: each keyed row's state derived from all its facts."""
    rows: dict[str, FactRow] = {}
    for m in memories:
        key = memory_fact_key(m)
        if key is not None:
            facts = dict(rows.get(key, FactRow()).facts)
            facts[m.memory_id] = FactObservation(
                memory_id=m.memory_id,
                value=m.value.lower(),
                negated=m.negated,
                observed_at=m.observed_at,
            )
            rows[key] = FactRow(facts=facts, version=len(facts))
    versioned = {}
    for m in memories:
        key = memory_fact_key(m)
        state = derive(rows[key].facts, stateful=m.predicate_is_stateful) if key else None
        derived = apply_state(m, state, CONFIG) if state is not None else m
        versioned[m.memory_id] = VersionedMemory(derived, 2)
    return versioned, rows


def reads(
    trace_id: str,
    written: list[tuple[str, str]],
    memories: dict[str, VersionedMemory],
    rows: dict[str, FactRow],
    turn_traces: dict[str, str] | None = None,
) -> RollbackReads:
    return RollbackReads(trace(trace_id), written, memories, rows, turn_traces or {})


def test_rolling_back_a_move_restores_the_city_it_ended() -> None:
    # Given Paris (trace a), ended by Berlin (trace b)
    paris = memory("a", "lives_in", "Paris", day=0)
    berlin = memory("b", "lives_in", "Berlin", day=30)
    memories, rows = stored(paris, berlin)
    assert memories[paris.memory_id].memory.superseded_by == berlin.memory_id
    # When trace b is planned away
    commit = plan_rollback(
        reads("b", [(berlin.memory_id, "stored")], memories, rows), CONFIG, NOW, "api"
    )
    # Then Berlin goes, Paris comes back active on the rev read, re-indexed by stage 7
    assert [v.memory.memory_id for v in commit.removed] == [berlin.memory_id]
    [(restored, rev)] = commit.changed
    assert (restored.memory_id, restored.superseded_by, restored.valid_until, rev) == (
        paris.memory_id,
        None,
        None,
        2,
    )
    assert [(o.memory_id, o.op, o.trace_id) for o in commit.outbox] == [
        (paris.memory_id, OutboxOp.UPSERT, "b")
    ]
    # And the row keeps Paris only, on the version read
    [(key, row)] = commit.fact_rows.items()
    assert (list(row.facts), row.version) == ([paris.memory_id], rows[key].version)
    record = commit.record
    assert (record.removed, record.restored, record.updated) == (
        [berlin.memory_id],
        [paris.memory_id],
        [],
    )
    assert (record.rolled_back_at, record.requested_via) == (NOW, "api")


def test_rolling_back_the_older_fact_leaves_the_newer_untouched() -> None:
    paris = memory("a", "lives_in", "Paris", day=0)
    berlin = memory("b", "lives_in", "Berlin", day=30)
    memories, rows = stored(paris, berlin)
    commit = plan_rollback(
        reads("a", [(paris.memory_id, "stored")], memories, rows), CONFIG, NOW, "api"
    )
    assert [v.memory.memory_id for v in commit.removed] == [paris.memory_id]
    assert commit.changed == [] and commit.outbox == []
    assert commit.record.restored == []


def test_a_late_arrival_ended_by_the_trace_becomes_current() -> None:
    # Given Berlin (said in June, trace a) and Paris (said in January, arriving later: trace b)
    berlin = memory("a", "lives_in", "Berlin", day=150)
    paris = memory("b", "lives_in", "Paris", day=0)
    memories, rows = stored(berlin, paris)
    # When trace a is planned away / Then Paris, born superseded, is current
    commit = plan_rollback(
        reads("a", [(berlin.memory_id, "stored")], memories, rows), CONFIG, NOW, "api"
    )
    assert commit.record.restored == [paris.memory_id]


def test_a_contradiction_is_lifted_when_one_side_is_rolled_back() -> None:
    likes = memory("a", "likes", "cilantro", day=0, stateful=False)
    dislikes = memory("b", "likes", "cilantro", day=1, stateful=False, negated=True)
    memories, rows = stored(likes, dislikes)
    assert memories[likes.memory_id].memory.tier is Tier.CHALLENGED
    commit = plan_rollback(
        reads("b", [(dislikes.memory_id, "stored")], memories, rows), CONFIG, NOW, "api"
    )
    [(lifted, _)] = commit.changed
    assert (lifted.memory_id, lifted.links, lifted.tier) == (likes.memory_id, [], Tier.WORKING)
    assert lifted.confidence > memories[likes.memory_id].memory.confidence
    # It was active all along: updated, not restored
    assert (commit.record.restored, commit.record.updated) == ([], [likes.memory_id])


def test_events_go_without_touching_any_row() -> None:
    event = memory("a", "event", "ran a marathon", day=0, type=MemoryType.EVENT)
    memories, rows = stored(event)
    commit = plan_rollback(
        reads("a", [(event.memory_id, "stored")], memories, rows), CONFIG, NOW, "cli"
    )
    assert [v.memory.memory_id for v in commit.removed] == [event.memory_id]
    assert commit.fact_rows == {}


def test_a_merge_into_another_traces_memory_is_refused_naming_it() -> None:
    berlin = memory("a", "lives_in", "Berlin", day=0)
    memories, rows = stored(berlin)
    with pytest.raises(RollbackRefused) as refused:
        plan_rollback(
            reads("b", [(berlin.memory_id, "merged")], memories, rows), CONFIG, NOW, "api"
        )
    assert (refused.value.reason, refused.value.memory_ids) == (
        "merged_into_existing",
        [berlin.memory_id],
    )


def test_a_merge_of_the_trace_into_its_own_memory_is_part_of_it() -> None:
    berlin = memory("a", "lives_in", "Berlin", day=0)
    berlin = berlin.model_copy(update={"corroborated_by": ["a-turn", "a-turn-2"]})
    memories, rows = stored(berlin)
    written = [(berlin.memory_id, "stored"), (berlin.memory_id, "merged")]
    commit = plan_rollback(
        reads("a", written, memories, rows, {"a-turn-2": "a"}), CONFIG, NOW, "api"
    )
    assert commit.record.removed == [berlin.memory_id]


def test_a_later_merge_into_the_traces_memory_is_refused_naming_that_trace() -> None:
    berlin = memory("a", "lives_in", "Berlin", day=0)
    berlin = berlin.model_copy(update={"corroborated_by": ["a-turn", "b-turn", "gone-turn"]})
    memories, rows = stored(berlin)
    with pytest.raises(RollbackRefused) as refused:
        plan_rollback(
            reads("a", [(berlin.memory_id, "stored")], memories, rows, {"b-turn": "b"}),
            CONFIG,
            NOW,
            "api",
        )
    assert refused.value.reason == "later_trace_depends"
    assert refused.value.trace_ids == ["b", "unknown"]  # a turn the ledger no longer knows
    assert refused.value.memory_ids == [berlin.memory_id]


def test_a_memory_stored_again_by_another_trace_is_not_this_traces_to_remove() -> None:
    berlin = memory("c", "lives_in", "Berlin", day=0)  # erased, then stored by trace c
    memories, rows = stored(berlin)
    commit = plan_rollback(
        reads("a", [(berlin.memory_id, "stored")], memories, rows), CONFIG, NOW, "api"
    )
    assert commit.removed == [] and commit.record.removed == []


def test_a_rollback_over_one_transaction_is_refused() -> None:
    berlin = memory("a", "lives_in", "Berlin", day=0)
    memories, rows = stored(berlin)
    # A memory written MAX_ROLLBACK_ITEMS times left as many outbox rows to delete
    memories[berlin.memory_id] = VersionedMemory(berlin, MAX_ROLLBACK_ITEMS)
    with pytest.raises(RollbackRefused) as refused:
        plan_rollback(
            reads("a", [(berlin.memory_id, "stored")], memories, rows), CONFIG, NOW, "api"
        )
    assert refused.value.reason == "too_large"
