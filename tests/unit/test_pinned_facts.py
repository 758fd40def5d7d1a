"""The pin rule of `memwrite.records.entity_facts.derive`: a pinned memory stands against inferred
facts (they are challenged beside it), a direct one or an explicit correction replaces it; in
any order."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from memwrite.records.entity_facts import FactObservation, derive


def day(number: int) -> datetime:
    return datetime(2025, 1, number, tzinfo=UTC)


def fact(mid: str, value: str, on: int, **flags: bool) -> FactObservation:
    return FactObservation(memory_id=mid, value=value, negated=False, observed_at=day(on), **flags)


def correction(mid: str, value: str, on: int, corrected_on: int | None = None) -> FactObservation:
    """A fact last observed on `on`, stated as an explicit correction on `corrected_on`."""
    return fact(mid, value, on).model_copy(update={"corrected_at": day(corrected_on or on)})


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


def test_a_direct_fact_restated_plainly_after_a_newer_pin_is_challenged() -> None:
    # Given Lisbon, written directly on day 2 and restated in a turn on day 4 (one memory),
    # and Berlin, observed on day 3 and pinned
    lisbon = fact("l", "lisbon", 4, direct=True).model_copy(update={"corrected_at": day(2)})
    facts = {"l": lisbon, "b": fact("b", "berlin", 3, pinned=True)}

    # When the row is derived
    state = derive(facts, stateful=True)

    # Then the plain restatement does not end Berlin: the direct write came before the pin's
    assert state.current == "b"
    assert state.challenged == {"l"} and state.pinned_by == {"l": "b"}


def test_an_older_inferred_fact_is_still_superseded_by_a_pinned_one() -> None:
    facts = {"o": fact("o", "oslo", 1), "b": fact("b", "berlin", 2, pinned=True)}

    state = derive(facts, stateful=True)

    assert state.current == "b" and state.superseded_by == {"o": "b"}


def test_an_inferred_negation_does_not_end_a_pinned_fact() -> None:
    at = datetime(2025, 1, 3, tzinfo=UTC)
    negation = FactObservation(memory_id="n", value="berlin", negated=True, observed_at=at)
    facts = {"b": fact("b", "berlin", 1, pinned=True), "n": negation}

    assert derive(facts, stateful=True).current == "b"


def test_an_explicit_correction_replaces_a_pinned_fact() -> None:
    # Given Berlin, pinned, and a later turn that corrects it ("I misspoke, ...")
    facts = {"b": fact("b", "berlin", 1, pinned=True), "l": correction("l", "lisbon", 2)}

    # When the row is derived
    state = derive(facts, stateful=True)

    # Then the correction ends the pin like a direct write: current, nothing challenged
    assert state.current == "l"
    assert state.superseded_by == {"b": "l"}
    assert state.valid_until == {"b": day(2)}
    assert state.challenged == set() and state.pinned_by == {}


def test_a_correction_older_than_the_pinned_fact_does_not_replace_it() -> None:
    # Given a correction said on day 1, arriving late, and Berlin stated (and pinned) on day 2
    facts = {"l": correction("l", "lisbon", 1), "b": fact("b", "berlin", 2, pinned=True)}

    # When the row is derived
    state = derive(facts, stateful=True)

    # Then the pinned fact is the newer statement: the correction was about what came before
    # it, so it is born superseded, as any older value is
    assert state.current == "b"
    assert state.superseded_by == {"l": "b"}
    assert state.challenged == set()


def test_a_correction_restated_plainly_after_a_newer_pin_is_challenged() -> None:
    # Given Lisbon, stated as a correction on day 2 and restated plainly on day 4 (one memory),
    # and Berlin, observed on day 3 and pinned
    facts = {
        "l": correction("l", "lisbon", 4, corrected_on=2),
        "b": fact("b", "berlin", 3, pinned=True),
    }

    # When the row is derived
    state = derive(facts, stateful=True)

    # Then the plain day-4 statement does not end Berlin: the correction was made before Berlin
    # was stated, so Lisbon is challenged beside it
    assert state.current == "b"
    assert state.superseded_by == {}
    assert state.challenged == {"l"} and state.pinned_by == {"l": "b"}


def test_a_correcting_negation_ends_a_pinned_fact() -> None:
    # Given Berlin, pinned, and a later correction that says it was never true
    negation = correction("n", "berlin", 2).model_copy(update={"negated": True})
    facts = {"b": fact("b", "berlin", 1, pinned=True), "n": negation}

    # When the row is derived, then the pinned fact ends at the correction
    state = derive(facts, stateful=True)
    assert state.current is None
    assert state.superseded_by == {"b": "n"}


def test_rows_stored_before_corrections_existed_still_load() -> None:
    # Given an observation as stored before the field existed
    stored = {"memory_id": "b", "value": "berlin", "negated": False, "pinned": True}
    observation = FactObservation.model_validate(stored | {"observed_at": "2025-01-01T00:00Z"})

    # Then it is no correction, and an inferred fact after it is still challenged
    assert observation.corrected_at is None
    state = derive({"b": observation, "l": fact("l", "lisbon", 2)}, stateful=True)
    assert state.pinned_by == {"l": "b"}


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
