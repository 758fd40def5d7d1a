"""Food and health rules: allergies, intolerances, diets and what the user does not eat."""

from __future__ import annotations

import re
from typing import Final

from memwrite.claims.candidate import MemoryType
from memwrite.extract.rules.engine import (
    Claim,
    Context,
    Found,
    Rule,
    Spec,
    Subject,
    collapse,
    listed_things,
    make_claim,
    needs_subject,
    one_claim,
    thing_ok,
    verbatim,
)
from memwrite.extract.rules.vocabulary import (
    ADV,
    APOS,
    BE,
    BE_SIMPLE,
    SUBJECT,
    THING_STOPS,
    list_run,
    verbose,
)

_DIETS = (
    r"lacto-ovo\s+vegetarian|vegan|vegetarian|veggie|pescatarian|pescetarian|keto|paleo"
    r"|plant-based|gluten-free|dairy-free|flexitarian|kosher|halal|carnivore"
)
_DIET_NOUNS = (
    r"food|restaurant|place|options?|recipes?|dish|meals?|cook|chef|blogger|cooking|spot"
    r"|friendly|stall|truck|bakery|cafe|version"
)

_ALLERGIC_TO_SPEC: Final = Spec(
    "allergic_to",
    MemoryType.FACT,
    "health",
    False,
    0.9,
    ("What is {s} allergic to?", "Does {s} have any allergies?", "Is {s} allergic to {v}?"),
)
_INTOLERANT_TO_SPEC: Final = Spec(
    "intolerant_to",
    MemoryType.FACT,
    "health",
    False,
    0.8,
    (
        "What food intolerances does {s} have?",
        "Is {s} {v} intolerant?",
        "What can {s} not eat?",
    ),
)
_DIET_SPEC: Final = Spec(
    "diet",
    MemoryType.PREFERENCE,
    "food",
    True,
    0.8,
    ("What diet does {s} follow?", "Is {s} {v}?", "What does {s} eat?"),
)
_DOES_NOT_EAT_SPEC: Final = Spec(
    "does_not_eat",
    MemoryType.PREFERENCE,
    "food",
    False,
    0.7,
    ("What does {s} not eat?", "Does {s} eat {v}?", "What are {s}'s dietary restrictions?"),
)
_DOES_NOT_DRINK_SPEC: Final = Spec(
    "does_not_drink",
    MemoryType.PREFERENCE,
    "food",
    False,
    0.6,
    ("What does {s} not drink?", "Does {s} drink {v}?", "What are {s}'s dietary restrictions?"),
)

# "I'm allergic to cats, dogs and pollen": one claim per item.
_ALLERGY_RE = verbose(
    rf"""{SUBJECT}{BE}{ADV}\s+
    (?:(?i:severely|very|deathly|highly|mildly|super|extremely|slightly)\s+)?
    (?i:allergic)\s+(?i:to)\s+{list_run("value", THING_STOPS, 8)}"""
)


@needs_subject
def _build_allergy(
    m: re.Match[str], ctx: Context, subject: Subject, extra: list[Claim]
) -> Found | None:
    items = listed_things(m)
    if not items:
        return None
    claims = [make_claim(subject, _ALLERGIC_TO_SPEC, i, f"is allergic to {i}", ctx) for i in items]
    return Found((*extra, *claims), m.end())


ALLERGY: Final = Rule(_ALLERGY_RE, _build_allergy)

# "I have a severe peanut allergy."
_ALLERGY_HAVE_RE = verbose(
    rf"""{SUBJECT}(?:{APOS}ve\s+(?i:got)|{ADV}\s+(?i:have|has)(?:\s+(?i:got))?)\s+(?i:an?)\s+
    (?:(?i:severe|mild|bad|serious|deadly)\s+)?(?P<value>[\w-]+(?:\s+[\w-]+)?)\s+(?i:allergy)"""
)
ALLERGY_HAVE: Final = Rule(
    _ALLERGY_HAVE_RE,
    one_claim(
        _ALLERGIC_TO_SPEC,
        "has a {value} allergy",
        clean=verbatim,
        accept=lambda value, m, ctx: thing_ok(value),
    ),
)

# "I'm lactose intolerant."
_INTOLERANCE_RE = verbose(rf"""{SUBJECT}{BE}{ADV}\s+(?P<value>[\w-]+)\s+(?i:intolerant)""")
INTOLERANCE: Final = Rule(
    _INTOLERANCE_RE,
    one_claim(
        _INTOLERANT_TO_SPEC,
        "is {value} intolerant",
        clean=verbatim,
        accept=lambda value, m, ctx: thing_ok(value),
    ),
)

# "I'm vegan", "I'm on a keto diet", "I went vegetarian last year".
_DIET_IS_RE = verbose(
    rf"""{SUBJECT}{BE}{ADV}\s+(?:(?i:an?)\s+)?
    (?:(?i:strict|strictly|fully|full|mostly|100%|completely)\s+)?(?P<value>(?i:{_DIETS}))
    (?![\w-])(?!\s+(?i:{_DIET_NOUNS})\b)"""
)
_DIET_ON_RE = verbose(
    rf"""{SUBJECT}{BE_SIMPLE}{ADV}\s+(?i:on)\s+(?:(?i:an?)\s+)?(?:(?i:strict)\s+)?
    (?P<value>(?i:{_DIETS}|low-carb|low\s+carb|low-fat|low\s+fat|low-sodium|mediterranean
       |whole30|dash))\s+(?i:diet)"""
)
_DIET_BECAME_RE = verbose(
    rf"""{SUBJECT}
    (?:(?:{APOS}ve|\s+have|{APOS}s|\s+has){ADV}\s+(?i:gone|become|decided\s+to\s+go
         |decided\s+to\s+become)
      |{ADV}\s+(?i:went|became|eat|eats|keep|keeps|decided\s+to\s+go|decided\s+to\s+become))
    \s+(?:(?i:fully|full|completely|100%|strictly|strict)\s+)?(?P<value>(?i:{_DIETS}))(?![\w-])"""
)
_build_diet = one_claim(_DIET_SPEC, "follows a {value} diet", clean=collapse)
DIET_IS: Final = Rule(_DIET_IS_RE, _build_diet)
DIET_ON: Final = Rule(_DIET_ON_RE, _build_diet)
DIET_BECAME: Final = Rule(_DIET_BECAME_RE, _build_diet)

# "I don't eat pork or shellfish", "I can't drink milk".
_NOT_EAT_RE = verbose(
    rf"""{SUBJECT}{ADV}\s+
    (?P<verb>(?i:do(?:n{APOS}?t|\s+not)|does(?:n{APOS}?t|\s+not)|never|can{APOS}?t|cannot
       |can\s+not))\s+(?P<food>(?i:eat|eats|drink|drinks))\s+
    {list_run("value", THING_STOPS, 6)}"""
)


@needs_subject
def _build_not_eat(
    m: re.Match[str], ctx: Context, subject: Subject, extra: list[Claim]
) -> Found | None:
    items = listed_things(m)
    if not items:
        return None
    drink = m.group("food").lower().startswith("drink")
    spec, verb = (_DOES_NOT_DRINK_SPEC, "drink") if drink else (_DOES_NOT_EAT_SPEC, "eat")
    modal = "cannot" if m.group("verb").lower().startswith("can") else "does not"
    claims = [make_claim(subject, spec, i, f"{modal} {verb} {i}", ctx) for i in items]
    return Found((*extra, *claims), m.end())


NOT_EAT: Final = Rule(_NOT_EAT_RE, _build_not_eat)
