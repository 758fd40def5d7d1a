"""Conflict (stage 5) as a pure function: the state of one (entity, predicate) from its facts.

Every observation of a predicate is kept in its entity_facts row; the row's *derived state*
(which memory is current, who supersedes whom and since when, what contradicts what) is computed
from the whole set, never from arrival order. That is what makes any delivery order, and any
redelivery, converge on the same store (docs/design.md §8: correctness never depends on order).

Stateful predicates (lives_in, works_at, ...): positive facts in `observed_at` order each end at
the next one, or earlier at a later negation of their own value ("I don't live in Berlin
anymore"); the last positive not ended by a negation is current. A late-arriving older fact is
therefore born superseded. A pinned memory (the user pinned it, or wrote it pinned) is not
ended by an inferred observation: that one is CHALLENGED beside it instead (`pinned_by`). Only a
direct write (`direct`) replaces it, or an explicit correction by the user (`corrected_at`)
made at or after the pinned memory's latest observation: a correction corrects what was said
before it, not a value stated (and pinned) later. Idempotent predicates (likes, has_visited,
...): a positive and a negative observation of the same value contradict each other: both are
CHALLENGED and linked.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from memwrite.claims.candidate import Candidate
from memwrite.ids import content_hash
from memwrite.records.memory import KEYED_TYPES, MemoryUnit, normalise

__all__ = [
    "OPPOSITE_PREDICATES",
    "DerivedState",
    "FactObservation",
    "canonical_predicate",
    "derive",
    "fact_key",
    "fact_key_for",
    "memory_fact_key",
]

# Predicates that state the negative of another: "dislikes X" is "likes X", negated.
OPPOSITE_PREDICATES = {"dislikes": "likes", "hates": "loves"}


def canonical_predicate(attribute: str, negated: bool) -> tuple[str, bool]:
    if attribute in OPPOSITE_PREDICATES:
        return OPPOSITE_PREDICATES[attribute], not negated
    return attribute, negated


class FactObservation(BaseModel):
    """One memory's place in its predicate's history (stored in the entity_facts row)."""

    model_config = ConfigDict(frozen=True)

    memory_id: str
    value: str  # normalised
    negated: bool
    observed_at: datetime  # the latest observation of this memory
    pinned: bool = False  # the memory is pinned: only a direct write or a correction ends it
    direct: bool = False  # written by the user through the API, not inferred from a turn
    # The latest explicit statement of this memory that may replace a pin: a direct write or a
    # turn stating it as a correction ("I misspoke, ..."); None when none did. A time, not a
    # flag: a memory once written directly or as a correction and later restated plainly must
    # not end a pin set on a value observed in between.
    corrected_at: datetime | None = None


def fact_key_for(candidate: Candidate, entity_id: str) -> str:
    """The entity_facts row of a keyed candidate. Stateful predicates keep one row of history;
    idempotent ones one row per value, so a user who likes a thousand things never has a row
    (and a read) that grows with them."""
    return fact_key(
        entity_id,
        candidate.attribute,
        negated=candidate.negated,
        value=candidate.value,
        stateful=candidate.predicate_is_stateful,
    )


def fact_key(entity_id: str, attribute: str, *, negated: bool, value: str, stateful: bool) -> str:
    """The entity_facts row of one (entity, predicate[, value]); see `fact_key_for`."""
    predicate, _ = canonical_predicate(attribute, negated)
    if stateful:
        return f"{entity_id}#{predicate}"
    return f"{entity_id}#{predicate}#{content_hash(normalise(value))}"


def memory_fact_key(memory: MemoryUnit) -> str | None:
    """The entity_facts row a stored memory observes; None for events and tasks."""
    if memory.type not in KEYED_TYPES:
        return None
    return fact_key(
        memory.entity_id,
        memory.attribute,
        negated=memory.negated,
        value=memory.value,
        stateful=memory.predicate_is_stateful,
    )


class DerivedState(BaseModel):
    """Who supersedes whom and since when, and what contradicts what, in one row."""

    current: str | None = None
    superseded_by: dict[str, str] = Field(default_factory=dict)
    valid_until: dict[str, datetime] = Field(default_factory=dict)
    challenged: set[str] = Field(default_factory=set)
    contradicts: dict[str, set[str]] = Field(default_factory=dict)
    pinned_by: dict[str, str] = Field(
        default_factory=dict, description="Challenged inferred fact -> the pinned one it met."
    )


def _order(fact: FactObservation) -> tuple[datetime, str]:
    return (fact.observed_at, fact.memory_id)  # ties broken by id: still order-free


def _guarded(held: FactObservation, fact: FactObservation) -> bool:
    """A pinned memory stands against an inferred observation; a direct write or an explicit
    correction made at or after the pinned memory's latest observation replaces it."""
    corrects = fact.corrected_at is not None and fact.corrected_at >= held.observed_at
    # Rows written before direct writes carried their time: the flag alone, as then.
    legacy_direct = fact.direct and fact.corrected_at is None
    return held.pinned and not (corrects or legacy_direct)


def _derive_stateful(facts: list[FactObservation]) -> DerivedState:
    state = DerivedState()
    positives: list[FactObservation] = []  # the chain of values that held, in turn
    for fact in sorted((f for f in facts if not f.negated), key=_order):
        if positives and _guarded(positives[-1], fact):
            state.challenged.add(fact.memory_id)
            state.pinned_by[fact.memory_id] = positives[-1].memory_id
            continue
        positives.append(fact)
    negations = sorted((f for f in facts if f.negated), key=_order)
    for index, fact in enumerate(positives):
        enders = [
            n
            for n in negations
            if n.value == fact.value and _order(n) > _order(fact) and not _guarded(fact, n)
        ]
        if index + 1 < len(positives):
            enders.append(positives[index + 1])
        if enders:
            end = min(enders, key=_order)
            state.superseded_by[fact.memory_id] = end.memory_id
            state.valid_until[fact.memory_id] = end.observed_at
        else:
            state.current = fact.memory_id
    return state


def _derive_idempotent(facts: list[FactObservation]) -> DerivedState:
    state = DerivedState()
    by_value: dict[str, list[FactObservation]] = {}
    for fact in facts:
        by_value.setdefault(fact.value, []).append(fact)
    for group in by_value.values():
        positive = [f.memory_id for f in group if not f.negated]
        negative = [f.memory_id for f in group if f.negated]
        if positive and negative:
            for a in positive:
                for b in negative:
                    state.contradicts.setdefault(a, set()).add(b)
                    state.contradicts.setdefault(b, set()).add(a)
            state.challenged.update(positive + negative)
    return state


def derive(facts: Mapping[str, FactObservation], *, stateful: bool) -> DerivedState:
    """The derived state of one entity_facts row; a pure function of the set of facts."""
    listed = list(facts.values())
    return _derive_stateful(listed) if stateful else _derive_idempotent(listed)
