"""The rule table: every claim rule, in the order the clause analysis tries them.

The first rule whose builder yields a result wins the clause, so the order is behaviour: named
relations before "my name is", "I'm Marcus" after every other reading of "I'm ...".
"""

from __future__ import annotations

from typing import Final

from memwrite.extract.rules import family, food_and_health, identity, places, preferences, work
from memwrite.extract.rules.engine import Context, Found, Rule

RULES: Final[tuple[Rule, ...]] = (
    family.RELATION_NAMED,
    family.RELATION_IS,
    identity.MY_NAME,
    identity.CALL_ME,
    preferences.FAVORITE,
    identity.AGE,
    food_and_health.ALLERGY,
    food_and_health.ALLERGY_HAVE,
    food_and_health.INTOLERANCE,
    food_and_health.DIET_IS,
    food_and_health.DIET_ON,
    food_and_health.DIET_BECAME,
    food_and_health.NOT_EAT,
    preferences.DISLIKES_FAN,
    preferences.DISLIKES,
    preferences.LIKES_FAN,
    preferences.LIKES,
    preferences.PREFERS,
    preferences.USES,
    places.MOVED_FROM_TO,
    places.MOVED_AWAY,
    places.LIVES_IN,
    places.HOMETOWN,
    family.MARRIED,
    work.QUIT_JOB,
    work.WORKS_AT,
    work.WORKS_AS,
    work.EMPLOYMENT,
    work.OCCUPATION,
    identity.I_AM_NAME,
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
