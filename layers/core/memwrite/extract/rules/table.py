"""The rule table: every claim rule, in the order the clause analysis tries them.

The first rule whose builder yields a result wins the clause, so the order is behaviour: named
relations before "my name is", "I'm Marcus" after every other reading of "I'm ...".
"""

from __future__ import annotations

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


def match_rules(body: str, ctx: Context) -> Found | None:
    """The claims of the first rule that matches the start of body and yields a result."""
    for rule in RULES:
        m = rule.pattern.match(body)
        if m is None:
            continue
        found = rule.build(m, ctx)
        if found is not None:
            return found
    return None
