"""The rule fast-path's entry point: one user turn in, its claims as candidates out."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Final

from pydantic import ValidationError

from memwrite.claims.candidate import USER_ENTITY, Candidate, Quality, SourceSpan
from memwrite.claims.scoring import WordingCue, wording_confidence, wording_cues
from memwrite.extract.rules.clauses import (
    RETRACTION_RE,
    ROLE_PLAY_RE,
    SARCASM_RE,
    Clause,
    Outcome,
    analyse_clause,
    content_free,
    content_words,
    split_clauses,
)
from memwrite.extract.rules.corrections import corrections
from memwrite.extract.rules.engine import Claim, bounded_value
from memwrite.extract.rules.times import resolve_time
from memwrite.extract.rules.vocabulary import NAME_TOKEN

logger = logging.getLogger(__name__)

CONFIDENCE_EXPLICIT: Final = 0.9
# docs/design.md §2: hypotheticals, role-play, sarcasm and "basically" framings get <= 0.3.
CONFIDENCE_GUARDED: Final = 0.3

REASON_EXPLICIT: Final = "explicit statement"
REASON_ROLE_PLAY: Final = "role_play"
REASON_SARCASM: Final = "sarcasm"

# A claim-free clause this short is a comment on its sentence's claims ("I think", "maybe").
_SHORT_CLAUSE_WORDS: Final = 4

# An opening quote with no close this near is an apostrophe or a typo, not a quotation.
_MAX_QUOTE_CHARS: Final = 500
_QUOTE_OPEN_RE = re.compile(r"(?<![\w])['‘\"“](?=\w)")
_QUOTE_CLOSE: Final[dict[str, re.Pattern[str]]] = {
    "'": re.compile(r"(?<=[\w.!?,])'(?![\w])"),
    "‘": re.compile(r"’(?![\w])"),
    '"': re.compile(r'"'),
    "“": re.compile(r"”"),
}
_FULL_NAME_RE = re.compile(rf"{NAME_TOKEN}(?:\s+{NAME_TOKEN}){{1,3}}")


@dataclass(frozen=True)
class RuleExtraction:
    """What the rules found in one turn, and whether they understood all of it."""

    candidates: tuple[Candidate, ...]
    fully_covered: bool


def extract_with_rules(
    text: str,
    *,
    role: str = "user",
    observed_at: datetime | None = None,
    source_turn_id: str | None = None,
) -> RuleExtraction:
    """Extract the simple claims of one turn; pure and deterministic.

    observed_at, the turn's time, resolves a trailing time phrase of a change ("I moved to
    Berlin last week") into the memory's text; rule claims are facts (no events), so it never
    becomes a valid_at.
    """
    if role != "user":
        # Assistant text restates or guesses; only the user's own words are evidence here.
        return RuleExtraction(candidates=(), fully_covered=False)

    turn_guard = (
        REASON_ROLE_PLAY
        if ROLE_PLAY_RE.search(text)
        else REASON_SARCASM
        if SARCASM_RE.search(text)
        else None
    )
    quotes = _quoted_spans(text)
    fully_covered = True
    sentence_guard: tuple[int, str] | None = None
    analysed: list[tuple[Clause, Outcome]] = []
    previous: tuple[Clause, Outcome] | None = None
    for clause in split_clauses(text):
        if any(start <= clause.start < end for start, end in quotes):
            # Reported speech ("she said 'I'm Elena'") is about someone else: the LLM decides.
            fully_covered = fully_covered and content_free(clause.text)
            previous = None
            continue
        inherited = (
            sentence_guard[1] if sentence_guard and sentence_guard[0] == clause.sentence else None
        )
        carried = (
            previous[1].subject_prefixes
            if previous and previous[0].sentence == clause.sentence
            else ()
        )
        outcome = analyse_clause(clause, inherited_guard=inherited, carried=carried)
        if outcome.opens_guard and outcome.guard:
            sentence_guard = (clause.sentence, outcome.guard)
        # A role-play turn is fiction throughout; sarcasm only in the clause that marks it.
        if turn_guard == REASON_ROLE_PLAY or SARCASM_RE.search(clause.text):
            outcome = replace(outcome, covered=True)
        analysed.append((clause, outcome))
        previous = (clause, outcome)

    # A retraction the rules did not read as one (a claim it negates: "I don't live in Berlin
    # anymore"), as in "I'm a nurse, not anymore" or "... No longer, though": which claim it
    # takes back is not theirs to guess, so they state none of the turn's.
    if any(_unread_retraction(clause, outcome) for clause, outcome in analysed):
        return RuleExtraction(candidates=(), fully_covered=False)

    # Short claim-free clauses of a sentence colour the wording of its claims: "Maybe, I'm
    # allergic to cats" and "I'm allergic to cats, I think" are both hedged; a longer clause
    # ("and I'll work at ...") has a claim of its own that the rules did not read.
    claim_free: dict[int, str] = {}
    for clause, outcome in analysed:
        short = content_words(clause.text) < _SHORT_CLAUSE_WORDS
        if not outcome.claims and short:
            claim_free[clause.sentence] = f"{claim_free.get(clause.sentence, '')} {clause.text}"
    corrected = corrections(analysed)
    candidates: list[Candidate] = []
    seen: set[tuple[str, bool]] = set()
    wording = ""
    for position, (clause, outcome) in enumerate(analysed):
        # A clause read with the subject of the one before shares its wording: "I think I
        # love sushi but hate wasabi" hedges both.
        wording = f"{wording} {clause.text}" if outcome.carried_subject else clause.text
        if _restates_full_name(clause, candidates):
            continue  # "Marcus Rivera." after "I'm Marcus": read, as the name in full
        fully_covered = fully_covered and (outcome.covered or position in corrected.read)
        if not outcome.claims:
            continue
        guard = outcome.guard or turn_guard
        question = "?" if clause.terminator == "?" else ""
        cues = wording_cues(f"{claim_free.get(clause.sentence, '')} {wording}{question}")
        since = resolve_time(outcome.when, observed_at) if outcome.when else None
        for index, claim in enumerate(outcome.claims):
            correction = (position, index) in corrected.marked
            candidate = _to_candidate(
                claim, clause, guard, cues, source_turn_id, correction=correction, since=since
            )
            if candidate is None:
                fully_covered = False
                continue
            key = (_dedupe_key(candidate), candidate.negated)
            if key not in seen:
                seen.add(key)
                candidates.append(candidate)
    return RuleExtraction(candidates=tuple(candidates), fully_covered=fully_covered)


def _quoted_spans(text: str) -> list[tuple[int, int]]:
    """[start, end) of each quotation; an apostrophe inside a word never opens or closes one."""
    spans = []
    for m in _QUOTE_OPEN_RE.finditer(text):
        close = _QUOTE_CLOSE[m.group()].search(text, m.end(), m.end() + _MAX_QUOTE_CHARS)
        if close:
            spans.append((m.start(), close.end()))
    return spans


def _dedupe_key(c: Candidate) -> str:
    return f"{c.entity}|{c.attribute}|{c.value}".lower()


def _unread_retraction(clause: Clause, outcome: Outcome) -> bool:
    if RETRACTION_RE.search(clause.text) is None:
        return False
    return not outcome.claims or not all(claim.negated for claim in outcome.claims)


def _restates_full_name(clause: Clause, candidates: list[Candidate]) -> bool:
    """ "I'm Marcus, by the way. Marcus Rivera." upgrades the name to the full one, in place."""
    if not _FULL_NAME_RE.fullmatch(clause.text):
        return False
    for index, c in enumerate(candidates):
        if c.entity == USER_ENTITY and c.attribute == "name" and not c.negated:
            if clause.text.split()[0] != c.value.split()[0] or clause.text == c.value:
                return False
            candidates[index] = c.model_copy(
                update={
                    "value": clause.text,
                    "text": f"The user's name is {clause.text}.",
                    "source_span": SourceSpan(start=_span_start(c), end=clause.end),
                }
            )
            return True
    return False


def _span_start(c: Candidate) -> int:
    return c.source_span.start if c.source_span else 0


def _to_candidate(
    claim: Claim,
    clause: Clause,
    guard: str | None,
    cues: frozenset[WordingCue],
    source_turn_id: str | None,
    *,
    correction: bool,
    since: str | None,
) -> Candidate | None:
    """The claim as a candidate; `since` is the time its change began, for its text."""
    if claim.attribute != "instruction" and not bounded_value(claim.value):
        return None  # cut mid-phrase or chat in the value: not sure, so not a memory
    if claim.attribute == "instruction":
        # "Can you always reply in English?" is a polite request, not a doubt.
        cues = cues - {WordingCue.QUESTION}
    if guard:
        confidence, quality = CONFIDENCE_GUARDED, Quality(verdict="discard", reason=guard)
    elif cues:
        # "I think", "apparently", "I'm going to": kept, but below a plain statement.
        confidence = wording_confidence(CONFIDENCE_EXPLICIT, cues)
        reason = ", ".join(sorted(cues)) + " statement"
        quality = Quality(verdict="keep", reason=reason)
    else:
        confidence, quality = CONFIDENCE_EXPLICIT, Quality(verdict="keep", reason=REASON_EXPLICIT)
    try:
        return Candidate(
            text=f"{claim.text.removesuffix('.')} (since {since})." if since else claim.text,
            type=claim.spec.type,
            topic=claim.spec.topic,
            entity=claim.entity,
            attribute=claim.attribute,
            value=claim.value,
            predicate_is_stateful=claim.spec.stateful,
            importance=claim.spec.importance,
            confidence=confidence,
            grounded=True,
            quality=quality,
            search_questions=list(claim.questions),
            source_turn_id=source_turn_id,
            source_span=SourceSpan(start=clause.start, end=clause.end),
            negated=claim.negated,
            correction=correction,
        )
    except ValidationError:
        # User text can produce a value the schema refuses (e.g. far too long); the clause
        # then counts as not understood, so the LLM sees it instead of the turn failing.
        logger.debug("rule claim refused by the candidate schema", exc_info=True)
        return None
