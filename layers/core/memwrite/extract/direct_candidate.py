"""A direct memory's candidate (`POST /v1/users/{user_id}/memories`): kept, grounded, fully
confident, with the topic, statefulness and importance the rules give its attribute, so it
lands in the same entity_facts row as the memories extracted for that attribute."""

from __future__ import annotations

from datetime import datetime
from functools import cache

from memwrite.claims.candidate import USER_ENTITY, Candidate, MemoryType, Quality
from memwrite.direct_memories import DirectMemory
from memwrite.extract.rules import (
    engine,
    food_and_health,
    identity,
    instructions,
    places,
    preferences,
    work,
)
from memwrite.extract.rules.engine import relation_spec
from memwrite.extract.rules.vocabulary import (
    PET_RELATIONS,
    SOCIAL_RELATIONS,
    STATEFUL_RELATIONS,
    WORK_RELATIONS,
)

__all__ = ["candidate_of"]

_DIRECT_IMPORTANCE = 0.8


@cache
def _known_specs() -> dict[str, tuple[str, bool, float]]:
    """(topic, stateful, importance) of each attribute the rules know, so a direct write
    lands in the same entity_facts row as the extracted memories of that attribute."""
    specs: dict[str, tuple[str, bool, float]] = {}
    for module in (food_and_health, identity, instructions, places, preferences, work):
        for value in vars(module).values():
            if isinstance(value, engine.Spec):
                specs.setdefault(value.attribute, (value.topic, value.stateful, value.importance))
    return specs


def _spec(memory: DirectMemory) -> tuple[str, bool, float]:
    known = _known_specs().get(memory.attribute)
    if known is not None:
        return known
    relations = SOCIAL_RELATIONS | WORK_RELATIONS | PET_RELATIONS | STATEFUL_RELATIONS
    if memory.attribute in relations:
        spec = relation_spec(memory.attribute)
        return spec.topic, spec.stateful, spec.importance
    # Unknown predicate: a direct write sets its value (a later one replaces it).
    return "general", memory.type is not MemoryType.EVENT, _DIRECT_IMPORTANCE


def candidate_of(memory: DirectMemory, turn_id: str, observed_at: datetime) -> Candidate:
    """The candidate a direct memory is: kept, grounded, fully confident."""
    topic, stateful, importance = _spec(memory)
    subject = "the user" if memory.entity.lower() == USER_ENTITY else memory.entity
    asked = memory.attribute.replace("_", " ")
    return Candidate(
        text=memory.sentence,
        type=memory.type,
        topic=topic,
        entity=memory.entity,
        attribute=memory.attribute,
        value=memory.value,
        predicate_is_stateful=stateful,
        importance=importance,
        confidence=1.0,
        grounded=True,
        quality=Quality(verdict="keep", reason="direct write"),
        valid_at=observed_at if memory.type is MemoryType.EVENT else None,
        search_questions=[
            f"What is {subject}'s {asked}?",
            f"What do we know about {subject}'s {asked}?",
            f"Which {asked} does {subject} have?",
        ],
        source_turn_id=turn_id,
    )
