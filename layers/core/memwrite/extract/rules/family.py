"""Family and other named relations: "my sister is called Ana", "I'm married to Sam".

The relation helpers themselves (`relation_claim`) live in the engine: a named relation is
also the subject of other claims ("my sister Ana works at Google").
"""

from __future__ import annotations

import re
from typing import Final

from memwrite.extract.rules.engine import (
    Claim,
    Context,
    Found,
    Rule,
    Subject,
    is_name,
    make_claim,
    needs_subject,
    relation_claim,
    relation_spec,
    written_name,
)
from memwrite.extract.rules.vocabulary import (
    ADV,
    APOS,
    BE,
    END,
    RELATION,
    SUBJECT,
    TITLE_NAME,
    person_run,
    verbose,
)

# "My sister's name is Ana", "my wife is called Jo", "my dog named Rex".
_RELATION_NAMED_RE = verbose(
    rf"""(?i:my)\s+{RELATION}
    (?:{APOS}s\s+(?i:name)(?:\s+(?i:is)|{APOS}s)|\s+(?i:is)\s+(?i:named|called)
       |\s+(?i:named|called|goes\s+by))\s+
    {person_run("value", 3)}"""
)


def _build_relation_named(m: re.Match[str], ctx: Context) -> Found | None:
    value = written_name(m, ctx)
    if value is None:
        return None
    return Found((relation_claim(m.group("relmod"), m.group("rel"), value, ctx),), m.end())


RELATION_NAMED: Final = Rule(_RELATION_NAMED_RE, _build_relation_named)

# "My boss is Raj Patel."
_RELATION_IS_RE = verbose(
    rf"""(?i:my)\s+{RELATION}(?:\s+(?i:is)|{APOS}s)\s+(?P<value>{TITLE_NAME}){END}"""
)


def _build_relation_is(m: re.Match[str], ctx: Context) -> Found | None:
    value = m.group("value")
    if not is_name(value):
        return None
    return Found((relation_claim(m.group("relmod"), m.group("rel"), value, ctx),), m.end())


RELATION_IS: Final = Rule(_RELATION_IS_RE, _build_relation_is)

# "I'm married to Sam", "I'm engaged to Alex Kim".
_MARRIED_RE = verbose(
    rf"""{SUBJECT}{BE}{ADV}\s+(?P<state>(?i:married|engaged))\s+(?i:to)\s+
    (?P<value>{TITLE_NAME}){END}"""
)


@needs_subject
def _build_married(
    m: re.Match[str], ctx: Context, subject: Subject, extra: list[Claim]
) -> Found | None:
    value = m.group("value")
    if not is_name(value):
        return None
    state = m.group("state").lower()
    attribute = "spouse" if state == "married" else "fiance"
    spec = relation_spec(attribute)
    claim = make_claim(subject, spec, value, f"is {state} to {value}", ctx, extra=attribute)
    return Found((*extra, claim), m.end())


MARRIED: Final = Rule(_MARRIED_RE, _build_married)
