"""Identity rules: the user's name ("My name is", "Call me", "I'm Marcus") and age."""

from __future__ import annotations

import re
from typing import Final

from memwrite.claims.candidate import MemoryType
from memwrite.extract.rules.engine import (
    USER,
    Builder,
    Context,
    Found,
    Rule,
    Spec,
    is_name,
    make_claim,
    one_claim,
    place_ok,
    verbatim,
    written_name,
)
from memwrite.extract.rules.places import HOMETOWN_SPEC
from memwrite.extract.rules.vocabulary import (
    ADV,
    APOS,
    BE_SIMPLE,
    END,
    SUBJECT,
    TITLE_NAME,
    person_run,
    place_run,
    verbose,
)

MAX_AGE: Final = 120

_NAME_SPEC: Final = Spec(
    "name",
    MemoryType.FACT,
    "identity",
    True,
    0.9,
    ("What is {s}'s name?", "What should the assistant call {s}?", "Who is {s}?"),
)


def _name_builder(phrase: str) -> Builder:
    """The user's own name, worded as `phrase` ("'s name is {value}")."""

    def build(m: re.Match[str], ctx: Context) -> Found | None:
        value = written_name(m, ctx)
        if value is None:
            return None
        return Found(
            (make_claim(USER, _NAME_SPEC, value, phrase.format(value=value), ctx),), m.end()
        )

    return build


# "My name is Marcus", "my real name's marcus".
_MY_NAME_RE = verbose(
    rf"""(?i:my)\s+(?:(?i:full|real|first)\s+)?(?i:name)(?:\s+(?i:is)|{APOS}s)\s+
    {person_run("value", 4)}"""
)
MY_NAME: Final = Rule(_MY_NAME_RE, _name_builder("'s name is {value}"))

# "Call me Mo", "I go by Sam".
_CALL_ME_RE = verbose(
    rf"""(?:(?i:you\s+can|please|just|everyone|people|friends|they)\s+)?
    (?:(?i:call|calls)\s+(?i:me)|(?:I|i)\s+(?i:go)\s+(?i:by))\s+
    {person_run("value", 3, "|please|instead")}"""
)
CALL_ME: Final = Rule(_CALL_ME_RE, _name_builder("goes by the name {value}"))

# "I'm 34", "my sister Ana just turned 5".
_AGE_RE = verbose(
    rf"""{SUBJECT}(?:{BE_SIMPLE}{ADV}\s+|{ADV}\s+(?i:just\s+)?(?i:turned)\s+)
    (?P<value>\d{{1,3}})(?:\s+(?i:years?\s+old|yrs?\s+old|y/?o))?{END}"""
)
_AGE_SPEC: Final = Spec(
    "age",
    MemoryType.FACT,
    "identity",
    True,
    0.7,
    ("How old is {s}?", "What is {s}'s age?", "What age is {s}?"),
)
AGE: Final = Rule(
    _AGE_RE,
    one_claim(
        _AGE_SPEC,
        "is {value} years old",
        clean=verbatim,
        accept=lambda value, m, ctx: 0 < int(value) <= MAX_AGE,
    ),
)

# "I'm Marcus", "I'm Marcus from Austin": last in the table, after every other reading of
# "I'm ...".
_I_AM_NAME_RE = verbose(
    rf"""(?:I|i)(?:{APOS}m|\s+am)\s+(?P<value>{TITLE_NAME})
    (?:\s+(?i:from)\s+{place_run("place")})?{END}"""
)


def _build_i_am_name(m: re.Match[str], ctx: Context) -> Found | None:
    value = m.group("value")
    if not is_name(value):
        return None
    claims = [make_claim(USER, _NAME_SPEC, value, f"'s name is {value}", ctx)]
    place = m.group("place")
    if place and place_ok(place, ctx):
        claims.append(make_claim(USER, HOMETOWN_SPEC, place, f"is from {place}", ctx))
    return Found(tuple(claims), m.end())


I_AM_NAME: Final = Rule(_I_AM_NAME_RE, _build_i_am_name)
