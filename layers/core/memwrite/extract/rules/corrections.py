"""Explicit corrections: the words by which a user says an earlier statement was wrong.

A candidate marked a correction replaces even a memory the user pinned
(`memwrite.records.entity_facts`), so only explicit correction wording counts, and only for the
claims it introduces:

- a clause that is nothing but a cue ("Correction:", "Sorry, I misspoke.", "Actually no,",
  "To correct myself:") marks the claims of the rest of its sentence, or of the next sentence
  when nothing else in its own sentence makes a claim;
- a cue that opens the claim's own clause ("I meant my sister is ...", "actually no my ...");
- a contrast with another value of the same single-valued predicate, "X, not Y" or "not Y, X",
  where Y in place of X reads as the same claim ("I work at Acme, not Initech"): the user says
  Y is wrong. Contrasts of anything else ("a career, not just a hobby") are not corrections.

Never "actually" alone ("I actually love sushi"), an apology alone, or news of a change ("I
moved to ..."): those are new statements, which a pinned memory outlives.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Final

from memwrite.extract.rules.clauses import Clause, Outcome, analyse_clause
from memwrite.extract.rules.engine import Claim, bounded_value
from memwrite.extract.rules.vocabulary import (
    CORRECTION_CUE_RE,
    DANGLING_WORDS,
    HEDGE_WORDS,
    word_set,
)

__all__ = ["Corrections", "corrections"]

# "..., not Y" after a claim's value; "not Y" (or "no, not Y") as the clause before one.
_NOT_AFTER_RE: Final = re.compile(r"\s*,?\s*(?i:not)\s+(?P<other>[^,;:]+)")
_NOT_BEFORE_RE: Final = re.compile(r"(?i:(?:no\s*,?\s*)?not)\s+(?P<other>[^,;:]+)")
_MAX_OTHER_WORDS: Final = 4
# "not just a hobby", "not too far": the negation qualifies the claim, it names no other value.
_QUALIFYING: Final = (
    DANGLING_WORDS
    | HEDGE_WORDS
    | word_set(
        "just only even really exactly quite too necessarily always yet sure much anymore "
        "entirely totally one everyone everybody everything anything anyone nothing"
    )
)

Analysed = Sequence[tuple[Clause, Outcome]]


@dataclass(frozen=True)
class Corrections:
    """What the correction wording of a turn says: the claims it marks, (clause position,
    claim position), and the clauses it reads whole (a cue alone, a claim with its "not Y", a
    "not Y" before a claim), which leave nothing of the turn unread."""

    marked: frozenset[tuple[int, int]]
    read: frozenset[int]


def corrections(analysed: Analysed) -> Corrections:
    marked: set[tuple[int, int]] = set()
    read: set[int] = set()
    for i, (clause, outcome) in enumerate(analysed):
        for k, claim in enumerate(outcome.claims):
            contrast = _contrast_after(clause, claim)
            if contrast:
                read.add(i)
            if outcome.correction or contrast:
                marked.add((i, k))
        if outcome.claims:
            continue
        if CORRECTION_CUE_RE.fullmatch(clause.text):
            read.add(i)
            marked.update((j, k) for j in _scope(analysed, i) for k in _claims(analysed, j))
        elif (m := _NOT_BEFORE_RE.fullmatch(clause.text)) and _next_in_sentence(analysed, i):
            following, outcome_after = analysed[i + 1]
            contrasted = {
                (i + 1, k)
                for k, claim in enumerate(outcome_after.claims)
                if _same_claim(following, claim, m.group("other"))
            }
            if contrasted:
                read.add(i)
            marked.update(contrasted)
    return Corrections(marked=frozenset(marked), read=frozenset(read))


def _scope(analysed: Analysed, cue: int) -> list[int]:
    """The clauses a cue clause speaks for: the rest of its sentence, or the next sentence
    when the rest of its own makes no claim ("I misspoke. My ...")."""
    sentence = analysed[cue][0].sentence
    rest = [j for j in range(cue + 1, len(analysed)) if analysed[j][0].sentence == sentence]
    if any(analysed[j][1].claims for j in rest):
        return rest
    return [j for j in range(cue + 1, len(analysed)) if analysed[j][0].sentence == sentence + 1]


def _claims(analysed: Analysed, index: int) -> range:
    return range(len(analysed[index][1].claims))


def _next_in_sentence(analysed: Analysed, index: int) -> bool:
    return (
        index + 1 < len(analysed) and analysed[index + 1][0].sentence == analysed[index][0].sentence
    )


def _contrast_after(clause: Clause, claim: Claim) -> bool:
    """ "X, not Y" in the claim's own clause, right after its value."""
    start = clause.text.rfind(claim.value)
    m = _NOT_AFTER_RE.fullmatch(clause.text, start + len(claim.value)) if start >= 0 else None
    return m is not None and _same_claim(clause, claim, m.group("other"))


def _same_claim(clause: Clause, claim: Claim, other: str) -> bool:
    """Whether `other` in place of the claim's value reads as the same predicate with `other`
    as its value: only then does "not other" correct it. Single-valued predicates only: "I
    like tea, not coffee" takes back nothing."""
    start = clause.text.rfind(claim.value)
    if start < 0 or not claim.spec.stateful or claim.negated:
        return False
    if len(other.split()) > _MAX_OTHER_WORDS:
        return False
    before = clause.text[:start]
    # "in Porto, not in Lisbon": the repeated preposition or article is the clause's own.
    first, _, rest = other.partition(" ")
    if rest and before.rstrip().lower().endswith(f" {first.lower()}"):
        other = rest
    if other.split()[0].lower() in _QUALIFYING or not bounded_value(other):
        return False
    text = before + other
    swapped = replace(clause, text=text, end=clause.start + len(text))
    return any(
        c.entity == claim.entity and c.attribute == claim.attribute and c.value == other
        for c in analyse_clause(swapped, inherited_guard=None).claims
    )
