"""Explicit corrections in the rule fast-path: which wording marks a claim as the user's
correction (it then replaces even a pinned memory), and which never does."""

from __future__ import annotations

import pytest

from memwrite.extract.rules import extract_with_rules

Marked = frozenset[tuple[str, str, bool]]
"""(attribute, value, correction) of each candidate"""


def marked(text: str, *, whole: bool = True) -> Marked:
    """What the rules mark in `text`; `whole`: they must have read all of it (the turn is
    then stored without a model, its correction applied)."""
    result = extract_with_rules(text)
    assert result.fully_covered or not whole, text
    return frozenset((c.attribute, c.value, c.correction) for c in result.candidates)


CORRECTIONS: list[tuple[str, Marked]] = [
    # a clause that is only a cue marks the rest of its sentence
    ("Correction: I work at Initech.", frozenset({("works_at", "Initech", True)})),
    ("Quick correction: my name is Bruna.", frozenset({("name", "Bruna", True)})),
    ("Oops, I misspoke, I'm a pharmacist.", frozenset({("occupation", "pharmacist", True)})),
    ("To correct myself: I live in Aveiro.", frozenset({("lives_in", "Aveiro", True)})),
    ("Let me correct that, I'm 52.", frozenset({("age", "52", True)})),
    ("Scratch that, I'm vegetarian.", frozenset({("diet", "vegetarian", True)})),
    ("No wait, I work at Globex.", frozenset({("works_at", "Globex", True)})),
    ("actually, no, my brother's name is Tiago", frozenset({("brother", "Tiago", True)})),
    # ...or the next sentence when its own has no claim
    ("Sorry, I misspoke earlier. I work at Globex.", frozenset({("works_at", "Globex", True)})),
    # a cue that opens the claim's own clause
    ("I meant I live in Faro.", frozenset({("lives_in", "Faro", True)})),
    ("Sorry, what I meant was that I'm a dentist.", frozenset({("occupation", "dentist", True)})),
    ("Actually no my name is Joana.", frozenset({("name", "Joana", True)})),
    # another value of the same single-valued predicate, denied
    ("I work at Initech, not Globex.", frozenset({("works_at", "Initech", True)})),
    ("I live in Braga, not in Aveiro.", frozenset({("lives_in", "Braga", True)})),
    ("I'm a pharmacist, not a nurse.", frozenset({("occupation", "pharmacist", True)})),
    ("I'm 52, not 25.", frozenset({("age", "52", True)})),
    ("Not Aveiro, I live in Braga.", frozenset({("lives_in", "Braga", True)})),
]

PLAIN: list[tuple[str, Marked]] = [
    # "actually" as filler, anywhere
    ("I actually love sushi.", frozenset({("likes", "sushi", False)})),
    ("Actually, I work at Initech.", frozenset({("works_at", "Initech", False)})),
    ("Actually I'm a pharmacist.", frozenset({("occupation", "pharmacist", False)})),
    # news of a change, an apology, an answer, an admission about something else
    ("I moved to Braga.", frozenset({("lives_in", "Braga", False)})),
    ("I live in Braga now.", frozenset({("lives_in", "Braga", False)})),
    ("Sorry, I work at Initech.", frozenset({("works_at", "Initech", False)})),
    ("Sorry about that, I live in Braga.", frozenset({("lives_in", "Braga", False)})),
    ("No, I live in Braga.", frozenset({("lives_in", "Braga", False)})),
    ("I was wrong, I live in Braga.", frozenset({("lives_in", "Braga", False)})),
    ("I meant it, I love sushi.", frozenset({("likes", "sushi", False)})),
    # a contrast that names no other value of the predicate
    ("I'm a pharmacist, not just a cashier.", frozenset({("occupation", "pharmacist", False)})),
    ("I work at Initech, not for long.", frozenset({("works_at", "Initech", False)})),
    ("I work at Initech, not in Braga.", frozenset({("works_at", "Initech", False)})),
    # a cue speaks for its own sentence (or the next), not for the whole turn
    (
        "I live in Braga. Correction: I work at Globex.",
        frozenset({("lives_in", "Braga", False), ("works_at", "Globex", True)}),
    ),
    (
        "I misspoke. I work at Globex. I love sushi.",
        frozenset({("works_at", "Globex", True), ("likes", "sushi", False)}),
    ),
    (
        "I live in Braga, not Aveiro, and I work at Globex.",
        frozenset({("lives_in", "Braga", True), ("works_at", "Globex", False)}),
    ),
]


@pytest.mark.parametrize(("text", "expected"), CORRECTIONS, ids=[t for t, _ in CORRECTIONS])
def test_explicit_correction_wording_marks_its_claims(text: str, expected: Marked) -> None:
    # When the rules read a turn that says an earlier statement was wrong
    # Then its claims are extracted as usual and marked as corrections
    assert marked(text) == expected


@pytest.mark.parametrize(("text", "expected"), PLAIN, ids=[t for t, _ in PLAIN])
def test_other_wording_marks_nothing_beyond_its_own_claims(text: str, expected: Marked) -> None:
    # When the rules read a plain statement, or a cue beside other claims (words they do not
    # read, "not for long", "I was wrong", leave the turn to a model: an episode without one)
    # Then only the claims a cue speaks for are corrections
    assert marked(text, whole=False) == expected


@pytest.mark.parametrize("text", ["I like tea, not coffee.", "My sister is Rita, not Ines."])
def test_a_contrast_of_a_predicate_with_many_values_is_no_correction(text: str) -> None:
    # Given a predicate that holds many values at once: saying one is not another takes
    # nothing back
    result = extract_with_rules(text)
    # Then nothing is marked as a correction
    assert not any(c.correction for c in result.candidates)


def test_a_hypothetical_correction_is_still_discarded() -> None:
    # Given a cue before a hypothetical
    result = extract_with_rules("Correction: if I lived in Braga, I'd cycle.")
    # Then the guard wins: whatever is kept is discarded, never stored as a plain claim
    assert all(c.quality.verdict == "discard" for c in result.candidates)
