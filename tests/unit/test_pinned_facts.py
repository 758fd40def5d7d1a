"""The pin rule of `memwrite.entity_facts.derive`: a pinned memory stands against inferred
facts (they are challenged beside it), a direct one replaces it; in any order."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from memwrite.entity_facts import FactObservation, derive


def fact(mid: str, value: str, day: int, **flags: bool) -> FactObservation:
    at = datetime(2025, 1, day, tzinfo=UTC)
    return FactObservation(memory_id=mid, value=value, negated=False, observed_at=at, **flags)


def test_an_inferred_fact_is_challenged_beside_a_pinned_one() -> None:
    # Given Berlin, pinned, and a later inferred Lisbon
    facts = {"b": fact("b", "berlin", 1, pinned=True), "l": fact("l", "lisbon", 2)}

    # When the row is derived
    state = derive(facts, stateful=True)

    # Then Berlin stays current, Lisbon is challenged and says by what
    assert state.current == "b"
    assert state.superseded_by == {}
    assert state.challenged == {"l"}
    assert state.pinned_by == {"l": "b"}


def test_a_direct_fact_replaces_a_pinned_one() -> None:
    facts = {"b": fact("b", "berlin", 1, pinned=True), "l": fact("l", "lisbon", 2, direct=True)}

    state = derive(facts, stateful=True)

    assert state.current == "l"
    assert state.superseded_by == {"b": "l"}
    assert state.challenged == set()


def test_an_older_inferred_fact_is_still_superseded_by_a_pinned_one() -> None:
    facts = {"o": fact("o", "oslo", 1), "b": fact("b", "berlin", 2, pinned=True)}

    state = derive(facts, stateful=True)

    assert state.current == "b" and state.superseded_by == {"o": "b"}


def test_an_inferred_negation_does_not_end_a_pinned_fact() -> None:
    at = datetime(2025, 1, 3, tzinfo=UTC)
    negation = FactObservation(memory_id="n", value="berlin", negated=True, observed_at=at)
    facts = {"b": fact("b", "berlin", 1, pinned=True), "n": negation}

    assert derive(facts, stateful=True).current == "b"


@given(st.permutations(["b", "l", "p", "d"]))
def test_the_state_does_not_depend_on_the_order_of_the_facts(order: list[str]) -> None:
    # Given a pinned fact, two inferred ones after it and a direct one last
    facts = {
        "b": fact("b", "berlin", 1, pinned=True),
        "l": fact("l", "lisbon", 2),
        "p": fact("p", "paris", 3),
        "d": fact("d", "dublin", 4, direct=True),
    }
    # When the row is derived from the facts in any order
    state = derive({mid: facts[mid] for mid in order}, stateful=True)
    # Then always the same: the direct one ends the pin, the inferred ones stay challenged
    assert state.current == "d"
    assert state.superseded_by == {"b": "d"}
    assert state.challenged == {"l", "p"}
