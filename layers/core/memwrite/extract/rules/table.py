"""The rule table: every claim rule, in the order the clause analysis tries them.

The first rule whose builder yields a result wins the clause, so the order is behaviour: named
relations before "my name is", "I'm Marcus" after every other reading of "I'm ...".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from memwrite.extract.rules.engine import Context, Found, Rule
from memwrite.extract.rules.family import MARRIED, RELATION_IS, RELATION_NAMED
from memwrite.extract.rules.food_and_health import (
    ALLERGY,
    ALLERGY_HAVE,
    DIET_BECAME,
    DIET_IS,
    DIET_ON,
    INTOLERANCE,
    NOT_EAT,
)
from memwrite.extract.rules.identity import AGE, CALL_ME, I_AM_NAME, MY_NAME
from memwrite.extract.rules.places import HOMETOWN, LIVES_IN, MOVED_AWAY, MOVED_FROM_TO
from memwrite.extract.rules.preferences import (
    DISLIKES,
    DISLIKES_FAN,
    FAVORITE,
    LIKES,
    LIKES_FAN,
    PREFERS,
    USES,
)
from memwrite.extract.rules.vocabulary import ADV, BE, BE_SIMPLE, SUBJECT
from memwrite.extract.rules.work import EMPLOYMENT, OCCUPATION, QUIT_JOB, WORKS_AS, WORKS_AT

RULES: Final[tuple[Rule, ...]] = (
    RELATION_NAMED,  # family
    RELATION_IS,  # family
    MY_NAME,  # identity
    CALL_ME,  # identity
    FAVORITE,  # preferences
    AGE,  # identity
    ALLERGY,  # food_and_health
    ALLERGY_HAVE,  # food_and_health
    INTOLERANCE,  # food_and_health
    DIET_IS,  # food_and_health
    DIET_ON,  # food_and_health
    DIET_BECAME,  # food_and_health
    NOT_EAT,  # food_and_health
    DISLIKES_FAN,  # preferences
    DISLIKES,  # preferences
    LIKES_FAN,  # preferences
    LIKES,  # preferences
    PREFERS,  # preferences
    USES,  # preferences
    MOVED_FROM_TO,  # places
    MOVED_AWAY,  # places
    LIVES_IN,  # places
    HOMETOWN,  # places
    MARRIED,  # family
    QUIT_JOB,  # work
    WORKS_AT,  # work
    WORKS_AS,  # work
    EMPLOYMENT,  # work
    OCCUPATION,  # work
    I_AM_NAME,  # identity
)


_NAMED_GROUP_RE = re.compile(r"\(\?P<\w+>")
_VERBOSE: Final = re.compile("", re.VERBOSE).flags


# Verb phrases that open many rules' rests, longest first: each read once too.
_SHARED_OPENINGS: Final = (f"{BE}{ADV}", f"{BE_SIMPLE}{ADV}", ADV)


def _any_of(rules: Sequence[Rule]) -> re.Pattern[str]:
    """A pattern that matches the start of a body wherever one of `rules` (verbose patterns
    that open with `SUBJECT`) does: the subject read once, then each rule's rest, those that
    open alike after their shared opening (groups unnamed, as their names repeat; a newline
    ends each part's last comment)."""
    by_opening: dict[str, list[str]] = {}
    for rule in rules:
        rest = rule.pattern.pattern[len(SUBJECT) :]
        opening = next((o for o in _SHARED_OPENINGS if rest.startswith(o)), "")
        by_opening.setdefault(opening, []).append(f"(?:{rest[len(opening) :]}\n)")
    branches = "|".join(
        f"{opening}\n(?:{'|'.join(rests)})" for opening, rests in by_opening.items()
    )
    return re.compile(_NAMED_GROUP_RE.sub("(?:", f"{SUBJECT}\n(?:{branches})"), re.VERBOSE)


# Most rules read a subject first, and most clause bodies match no rule: one pattern tells
# whether any of those rules can match (most bodies none), at about a third of the cost of trying
# each, which re-reads the subject.
_AFTER_SUBJECT: Final = tuple(
    rule
    for rule in RULES
    if rule.pattern.pattern.startswith(SUBJECT) and rule.pattern.flags == _VERBOSE
)
_ANY_AFTER_SUBJECT: Final = _any_of(_AFTER_SUBJECT)
_ORDER: Final = tuple((rule, rule in _AFTER_SUBJECT) for rule in RULES)


def match_rules(body: str, ctx: Context) -> Found | None:
    """The claims of the first rule that matches the start of body and yields a result."""
    subject_rules_may_match: bool | None = None
    for rule, after_subject in _ORDER:
        if after_subject:
            if subject_rules_may_match is None:
                subject_rules_may_match = _ANY_AFTER_SUBJECT.match(body) is not None
            if not subject_rules_may_match:
                continue
        m = rule.pattern.match(body)
        if m is None:
            continue
        found = rule.build(m, ctx)
        if found is not None:
            return found
    return None
