"""Preference values on informal chat: a complete phrase that stands alone, or no memory.

Our own wording of the failure forms seen on held-out chat: a verb without its object ("likes
to play" from a turn that goes on to say what), a value cut where the turn goes on to say with
whom ("hanging out" with friends), and two activities typed as one value ("hiking biking",
"painting and reading novels"). Each turn lists every preference memory the rules may make;
anything else they make is wrong.
"""

from __future__ import annotations

import pytest

from memwrite.extract.rules import extract_with_rules

# (turn, the preference values that are right for it: each a memory of its own)
TURNS: list[tuple[str, set[str]]] = [
    # a verb without its object or company: no memory
    ("I really like to play, mostly board games", set()),
    ("i love watching, esp horror stuff", set()),
    ("I enjoy making", set()),
    ("I like collecting", set()),
    ("I love to play", set()),
    ("I love to go", set()),
    ("I love playing with my dog", set()),
    ("I enjoy hanging out.", set()),
    ("I enjoy spending time with my kids", set()),
    ("I love chilling with my cousins", set()),
    ("I like to hang out with friends", set()),
    ("I like to chill with friends", set()),
    ("i like hanging out w friends", set()),
    ("I hate going out with coworkers", set()),
    # two activities typed as one: two memories, or none
    ("I love hiking biking", set()),
    ("I enjoy painting and reading novels", {"painting", "reading novels"}),
    ("i like cooking and baking", {"cooking", "baking"}),
    ("I love swimming, running and cycling", {"swimming", "running", "cycling"}),
    # whole phrases: kept as they are
    ("I like fish and chips", {"fish and chips"}),
    ("I love rock and roll", {"rock and roll"}),
    ("I love wedding planning", {"wedding planning"}),
    ("I love playing chess", {"playing chess"}),
    ("I love to play the guitar", {"play the guitar"}),
    ("I enjoy watching documentaries", {"watching documentaries"}),
    ("I like hiking", {"hiking"}),
    ("I love cooking with my kids", {"cooking"}),
    ("I like spending time outdoors", {"spending time outdoors"}),
    ("I really enjoy meeting new people", {"meeting new people"}),
    ("I love to travel", {"travel"}),
    ("I can't stand hiking", {"hiking"}),
]
PRECISION_GOAL = 0.95


def _preferences(text: str) -> list[str]:
    found = extract_with_rules(text)
    return [c.value for c in found.candidates if c.attribute in {"likes", "dislikes"}]


@pytest.mark.parametrize(("text", "right"), TURNS)
def test_a_preference_value_is_a_whole_phrase_or_nothing(text: str, right: set[str]) -> None:
    # Given an informal turn about what the user likes or dislikes
    # When the rules read it
    made = _preferences(text)
    # Then every value they make is one of the turn's whole phrases, and each is made
    assert sorted(made) == sorted(right)


def test_precision_on_informal_preferences() -> None:
    # Given every turn above, When the rules read them all
    made = [(value, value in right) for text, right in TURNS for value in _preferences(text)]
    # Then at least 95 % of the values they make are right (here: all)
    precision = sum(ok for _, ok in made) / len(made)
    assert precision >= PRECISION_GOAL, [value for value, ok in made if not ok]
