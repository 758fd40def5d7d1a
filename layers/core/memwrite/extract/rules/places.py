"""Place rules: where the user lives, has moved from and to, and comes from."""

from __future__ import annotations

import re
from typing import Final

from memwrite.claims.candidate import MemoryType
from memwrite.extract.rules.engine import (
    Context,
    Found,
    Rule,
    Spec,
    make_claim,
    one_claim,
    place_ok,
    resolve_subject,
    strip_value,
    unresolved_match,
)
from memwrite.extract.rules.vocabulary import (
    ADV,
    BE_SIMPLE,
    HAVE_BEEN,
    SUBJECT,
    place_run,
    verbose,
    word_set,
)

# "I'm from IT" names a department, not a hometown.
_DEPARTMENTS: Final = word_set(
    "it hr pr qa ops sales marketing finance legal support engineering accounting"
)

_LIVES_IN_SPEC: Final = Spec(
    "lives_in",
    MemoryType.FACT,
    "location",
    True,
    0.8,
    ("Where does {s} live?", "Which city is {s} based in?", "Has {s} moved recently?"),
)
HOMETOWN_SPEC: Final = Spec(
    "hometown",
    MemoryType.FACT,
    "location",
    True,
    0.6,
    ("Where is {s} from?", "Where did {s} grow up?", "What is {s}'s hometown?"),
)

# "We moved from Austin to Berlin": lives in Berlin, no longer in Austin.
_MOVED_FROM_TO_RE = verbose(
    rf"""{SUBJECT}{ADV}\s+(?i:moved|relocated)\s+(?i:from)\s+{place_run("old")}\s+(?i:to)\s+
    {place_run("value")}"""
)


def _build_moved_from_to(m: re.Match[str], ctx: Context) -> Found | None:
    subject, extra = resolve_subject(m, allow_we=True)
    if subject is None:
        return unresolved_match(m)
    old, new = strip_value(m.group("old")), strip_value(m.group("value"))
    if not (place_ok(old, ctx) and place_ok(new, ctx)):
        return None
    claims = (
        make_claim(subject, _LIVES_IN_SPEC, new, f"lives in {new}", ctx),
        make_claim(subject, _LIVES_IN_SPEC, old, f"lives in {old}", ctx, negated=True),
    )
    return Found((*extra, *claims), m.end())


MOVED_FROM_TO: Final = Rule(_MOVED_FROM_TO_RE, _build_moved_from_to)


def _place_accepted(value: str, m: re.Match[str], ctx: Context) -> bool:
    return place_ok(value, ctx)


# "I moved away from London": no longer lives there.
_MOVED_AWAY_RE = verbose(
    rf"""{SUBJECT}{ADV}\s+(?i:moved|relocated)\s+(?i:away\s+from|out\s+of)\s+{place_run("value")}"""
)
MOVED_AWAY: Final = Rule(
    _MOVED_AWAY_RE,
    one_claim(
        _LIVES_IN_SPEC, "lives in {value}", accept=_place_accepted, negated=True, allow_we=True
    ),
)

# "I live in Berlin", "we're based in Lisbon", "I moved to Austin, Texas".
_LIVES_IN_RE = verbose(
    rf"""{SUBJECT}
    (?:{HAVE_BEEN}{ADV}\s+(?i:living)
      |{BE_SIMPLE}{ADV}\s+(?i:living|based|settled|located)
      |{ADV}\s+(?i:live|lives|reside|resides|moved|relocated)(?:\s+(?i:back|here|over))?)
    \s+(?i:in|to|out\s+of)\s+{place_run("value")}"""
)
LIVES_IN: Final = Rule(
    _LIVES_IN_RE,
    one_claim(_LIVES_IN_SPEC, "lives in {value}", accept=_place_accepted, allow_we=True),
)

# "I'm from Ohio", "I grew up in Lagos" ("I'm from IT" is a department).
_HOMETOWN_RE = verbose(
    rf"""{SUBJECT}
    (?:{BE_SIMPLE}{ADV}\s+(?i:from)
      |{ADV}\s+(?i:grew\s+up\s+in|was\s+born\s+in|come\s+from|comes\s+from))\s+{place_run("value")}"""
)
HOMETOWN: Final = Rule(
    _HOMETOWN_RE,
    one_claim(
        HOMETOWN_SPEC,
        "is from {value}",
        accept=lambda value, m, ctx: place_ok(value, ctx) and value.lower() not in _DEPARTMENTS,
    ),
)
