"""Clause machinery: cut a turn into clauses, strip filler, read guards, questions, negations
and continuations, and ask the rule table what each clause body claims."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from memwrite.extract.rules.engine import (
    INITIALS_END_RE,
    Claim,
    Context,
    Found,
    is_name,
    relation_claim,
)
from memwrite.extract.rules.instructions import (
    INSTRUCTION_LEAD_RE,
    INSTRUCTION_QUESTION_RE,
    instruction_claim,
)
from memwrite.extract.rules.table import match_rules
from memwrite.extract.rules.times import CHANGE_VERB_RE, TRAILING_TIME_RE
from memwrite.extract.rules.vocabulary import (
    APOS,
    BE_SIMPLE,
    CHAT_FILLER_BY_LETTER,
    CORRECTION_LEAD_RE,
    NAME_TOKEN,
    RELATION,
    SMALL_TALK_GLUE,
    SMALL_TALK_REACTIONS,
    SUBJECT,
    by_first_letter,
    verbose,
)

# docs/design.md §2: hypotheticals, role-play, sarcasm and "basically" framings get <= 0.3.
REASON_HYPOTHETICAL: Final = "hypothetical"

_ABBREVIATIONS: Final = frozenset(
    {"mr", "mrs", "ms", "dr", "st", "mt", "ft", "jr", "sr", "prof", "vs", "etc", "e.g", "i.e"}
)
# Enough characters before a full stop to see the word it ends.
_ABBREVIATION_WINDOW: Final = 40
# Company suffixes end a sentence only when a capital follows ("Acme Corp. I love it").
_COMPANY_ABBREVIATIONS: Final = frozenset({"inc", "corp", "ltd", "co", "llc"})

# Guarded tenses: "if I lived in Paris" is read as "I live in Paris", then downgraded.
_SUBJUNCTIVE_PRESENT: Final[dict[str, str]] = {
    "lived": "live",
    "worked": "work",
    "was": "am",
    "were": "am",
    "had": "have",
    "used": "use",
    "loved": "love",
    "liked": "like",
    "hated": "hate",
}

_SUBJECT_RE = verbose(SUBJECT)
_BE_SIMPLE_RE = verbose(BE_SIMPLE)
# "and" followed by a verb phrase, not by a new subject (the clause splitter took those).
_CONTINUATION_RE = re.compile(r"\s*,?\s*(?i:and)\s+(?!(?:I|i|[Mm]y|[Ww]e)\b)")

# Relation names found anywhere in a clause: "I had lunch with my sister Ana".
_RELATION_APPOSITION_RE = verbose(
    rf"""(?<![\w])(?i:my)\s+{RELATION}\s+(?P<value>{NAME_TOKEN}(?:\s+{NAME_TOKEN})?)"""
)

_SENTENCE_BREAK_RE = re.compile(r"[.!?…]+[\"'”’)\]]*(?=\s|$)|\n+|;|\s+[-–—]+\s+|[—–]")
_CLAUSE_BREAK_RE = verbose(
    r"""
      ,\s*(?:(?i:and|but|so)\s+)?(?=(?:I|i|[Mm]y|[Ww]e)\b)
    | \s+(?i:and|so)\s+(?=(?:I|i|my|we)\b)
    | ,?\s+(?i:but)\s+
    | ,\s*(?=(?i:what|where|who|how|why|when|which|do\s+you|did\s+you|can\s+you|could\s+you
              |would\s+you|will\s+you|any\s+(?:tips|ideas|suggestions))\b)
    | :\s+
    """
)
_CONJUNCTION_RE = re.compile(r"\b(?i:and|but|so)\b")
_TRIM_CHARS = " \t\r\n.,!?;:…\"'”“’‘()[]-–—*"

_LEADING_FILLER_RE = re.compile(
    r"(?:(?i:so|well|oh|ah|also|and|but|plus|actually|honestly|anyway|anyways|btw|by\s+the\s+way"
    r"|yeah|yes|yep|yup|ok|okay|hey|hi|hello|um+|uh+|hmm+|fyi|just\s+so\s+you\s+know"
    r"|for\s+the\s+record|to\s+be\s+honest|tbh|fun\s+fact|as\s+you\s+know|in\s+fact|lol|haha\w*"
    r"|fwiw|for\s+context|quick\s+update|update|(?:please\s+)?remember\s+that|note\s+that"
    r"|heads\s+up|just\s+to\s+let\s+you\s+know|for\s+your\s+info|oh\s+and|right|sure|now"
    r"|nowadays|these\s+days|currently)(?![\w'’])[\s,:!.\-]*)+"
)
# Hedges lower confidence only when a first-person claim follows: "I think I'm allergic".
_HEDGE_RE = re.compile(
    r"(?i:i\s+think|i\s+guess|i\s+believe|i\s+suppose|probably|maybe|perhaps)(?![\w'’])"
    r"\s*,?\s*(?:(?i:that)\s+)?(?=(?:I|i|[Mm]y|[Ww]e)\b)"
)
# Hypothetical framings that open a clause; the rest of the sentence inherits them.
_GUARD_START_RE = re.compile(
    r"(?i:even\s+if|what\s+if|if|imagine(?:\s+if)?|suppose|supposing|let['’]s\s+say|pretend"
    r"|hypothetically|in\s+another\s+life|in\s+a\s+parallel\s+universe|assuming|i\s+wish)"
    r"(?![\w'’])(?:\s+(?i:that))?\s*,?\s*"
)
# Hedges inside a claim: "I'm basically a chef" is a framing, not a job.
_GUARD_HEDGE_RE = re.compile(
    r"\s+(?i:basically|practically|pretty\s+much|more\s+or\s+less|kind\s+of|sort\s+of|kinda"
    r"|sorta)(?=\s+(?i:an?\s|live|work|the|from|allergic|vegan|vegetarian))"
)
# "act as" only as a request ("Act as a pirate", "can you act as ..."): "the walls act as
# thermal mass" is not role-play. The lookahead (the characters a match can open with) spares
# the branches at most positions of a turn.
ROLE_PLAY_RE = re.compile(
    r"(?=[.!?:;]|(?i:[acilnprwy]))"
    r"(?i:role[\s-]?play|\brp\b|in\s+character|let['’]s\s+play\s+a\s+game"
    r"|(?:^|[.!?:;]\s*|\b(?:please|you|can\s+you|could\s+you|will\s+you|now)\s+)act\s+as\b"
    r"|you\s+are\s+now|pretend\s+(?:to\s+be|you['’]re|you\s+are))"
)
# "/s", "yeah right", and a claim taken back by a trailing "... not" ("I love Mondays... not").
SARCASM_RE = re.compile(
    r"(?:^|\s)/s\b|(?i:\byeah,?\s+right\b|\bsure,?\s+jan\b)"
    r"|(?:\.{2,}|…|,|\s-+)\s*(?i:not)[.!]*\s*$|\sNOT[.!]*\s*$"
)
_SUBJUNCTIVE_RE = re.compile(
    r"\b(?P<subj>I|i|we|We)\s+(?P<verb>(?i:lived|worked|was|were|had|used|loved|liked|hated))\b"
)

_NEGATION_PRESENT_RE = re.compile(
    rf"(?i:\bdo(?:n{APOS}?t|\s+not)\b|\bdoes(?:n{APOS}?t|\s+not)\b|\bno\s+longer\b|\bnot\b"
    rf"|\bis(?:n{APOS}?t)\b|\bare(?:n{APOS}?t)\b|\bany\s?more\b)"
)
_NEGATION_DO_RE = re.compile(rf"\b(?i:do|does)(?:\s+not|n{APOS}?t)\s+")
_NEGATION_NO_LONGER_RE = re.compile(r"\s*\b(?i:no\s+longer)\b")
_NEGATION_BE_RE = re.compile(
    rf"(?P<be>{APOS}m|\s+am|{APOS}s|\s+is|{APOS}re|\s+are|{APOS}ve\s+been|\s+has\s+been)"
    r"\s+(?i:not|no\s+longer)\b"
)
_NEGATION_BE_CONTRACTED_RE = re.compile(rf"\b(?P<be>(?i:is|are))n{APOS}?t\b")
_NEGATION_ANYMORE_RE = re.compile(r"\s+(?i:any\s?more)\b")
RETRACTION_RE = re.compile(r"(?i:\bno\s+longer\b|\bany\s?more\b)")

_QUESTION_START_RE = re.compile(
    r"(?i:(?:do|does|did|is|are|am|was|were|can|could|would|will|should|shall|have|has|may"
    r"|might)\s+(?:i|you|we|they|it|he|she|there|my|your|this|that|the)\b"
    r"|(?:what|where|who|how|why|when|which)(?:['’]s|\s+(?:do|does|did|is|are|was|were|can"
    r"|could|should|would|will|shall|might|may)\b))"
)
_FIRST_PERSON_START_RE = re.compile(r"(?:I|i|[Mm]y|[Ww]e)\b")
_ABOUT_THE_SPEAKER_RE = re.compile(
    r"(?i:\b(?:i|i['’](?:m|ve|d|ll)|me|my|mine|myself|we|us|our|ours)\b)"
)
_CAPITAL_I_RE = re.compile(r"\bI\b")
# The class first, so that a search skips ahead to a capital; then "not the word I".
_ASCII_CAPITAL_RE = re.compile(r"[A-Z](?<!\bI\b)")
_CAPITAL_NEXT_RE = re.compile(r"\s+[A-Z]")
_INITIALS_RE = re.compile(r"(?:[a-z]\.)+[a-z]")
_WORD_RE = re.compile(r"[^\W_][\w'’-]*")
_LOWER_TYPING_RE = re.compile(r"(?:^|[^\w'’])i(?:[^\w]|$)")
# Pleasantries carry no knowledge wherever they appear.
_PLEASANTRY_RE = re.compile(
    r"(?i:\b(?:thanks?(?:\s+you)?(?:\s+(?:so|very)\s+much|\s+a\s+lot)?(?:\s+for\s+(?:that|this"
    r"|the\s+help|your\s+help|everything|asking))?|thx|ty|haha\w*|hah|ha|lol|lmao|rofl"
    r"|good\s+(?:morning|afternoon|evening|night)|hi|hello|hey|ok|okay|kk?|sure|cool|great"
    r"|nice|awesome|got\s+it|sounds\s+good|yeah|yes|yep|yup|no|nope|bye|goodbye"
    r"|see\s+you(?:\s+later)?|cheers|you['’]re\s+welcome|no\s+worries|perfect|exactly|right"
    r"|fair\s+enough|makes\s+sense|(?:i\s+)?appreciate\s+it|that['’]s\s+(?:so\s+|really\s+"
    r"|very\s+|super\s+)?(?:helpful|great|perfect|awesome|amazing|good|cool|nice|fair|fine"
    r"|true|funny|interesting|wild)|that\s+was\s+(?:so\s+|really\s+|very\s+|super\s+)?helpful"
    r"|never\s*mind|wow|interesting|hmm+|ugh|oops|sorry|my\s+bad)\b)"
)
_SMALL_TALK_RE = re.compile(
    r"(?<![\w'’])(?i:"
    + by_first_letter(tuple(sorted(SMALL_TALK_REACTIONS, key=len, reverse=True)))
    + r")(?![\w'’])"
)
_CHAT_FILLER_RE = re.compile(rf"(?<![\w'’])(?i:{CHAT_FILLER_BY_LETTER})(?![\w'’])")
# A name set off beside small talk is the person addressed: "Wow, Caroline", "Thanks Jon".
_VOCATIVE_RE = re.compile(rf"(?:^|,)\s*{NAME_TOKEN}(?:\s+{NAME_TOKEN})?\s*(?=,|$)")
# Adverbs and discourse words that pad a clause ("I live in Berlin now", "and so, you know").
_RESIDUAL_FILLER_RE = re.compile(
    r"(?i:\b(?:by\s+the\s+way|btw|actually|honestly|really|now|any\s?more|these\s+days|too"
    r"|as\s+well|though|currently|right\s+now|at\s+the\s+moment|also|just|so|well|oh|ah|and"
    r"|but|um+|uh+|please|from\s+now\s+on|lately|nowadays|totally|definitely|indeed"
    r"|of\s+course|for\s+sure|you\s+know|i\s+mean|like)\b)"
)


def _negation_rewrite(body: str) -> str:
    """Turn a retraction into the plain claim it retracts: "I don't live in X anymore"."""
    body = _NEGATION_DO_RE.sub("", body, count=1)
    body = _NEGATION_NO_LONGER_RE.sub("", body, count=1)
    body = _NEGATION_BE_RE.sub(lambda m: m.group("be"), body, count=1)
    body = _NEGATION_BE_CONTRACTED_RE.sub(lambda m: m.group("be"), body, count=1)
    return _NEGATION_ANYMORE_RE.sub("", body)


def _subjunctive_rewrite(body: str) -> str:
    return _SUBJUNCTIVE_RE.sub(
        lambda m: f"{m.group('subj')} {_SUBJUNCTIVE_PRESENT[m.group('verb').lower()]}", body
    )


# --------------------------------------------------------------------------------------------
# Clauses
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Clause:
    start: int
    end: int
    text: str
    terminator: str
    sentence: int
    # The conjunction that joins it to the clause before ("but"), or "".
    conjunction: str = ""


@dataclass(frozen=True)
class Outcome:
    claims: tuple[Claim, ...]
    # Whether the rules read the clause, `unread` aside (see `is_covered`).
    covered: bool
    guard: str | None
    opens_guard: bool
    # How a following "but ..." with no subject of its own is read: "I love sushi but hate
    # wasabi" -> "I hate wasabi". Empty unless this clause was a plain claim about "I".
    subject_prefixes: tuple[str, ...] = ()
    # This clause had no subject and was read with the one before's.
    carried_subject: bool = False
    correction: bool = False  # a cue opened the clause: "I meant my ..."
    # The time phrase that ends a claim of change ("I moved to Berlin last week"), or "".
    when: str = ""
    # The words left over that must be small talk for the clause to be covered, or "".
    unread: str = ""

    def is_covered(self) -> bool:
        """Whether the rules read all of the clause. `unread` is checked only when asked: once
        a turn holds a clause the rules did not read, its other clauses' leftovers do not
        matter, and `content_free` is the costliest check of a clause."""
        return self.covered and (not self.unread or content_free(self.unread))


def split_clauses(text: str) -> list[Clause]:
    clauses: list[Clause] = []
    sentence_start = 0
    sentence = 0
    for m in _SENTENCE_BREAK_RE.finditer(text):
        if m.group() == "." and not _is_sentence_end(text, m.start(), m.end()):
            continue
        terminator = "?" if "?" in m.group() else m.group().strip()[:1]
        clauses.extend(_split_sentence(text, sentence_start, m.start(), terminator, sentence))
        sentence_start, sentence = m.end(), sentence + 1
    clauses.extend(_split_sentence(text, sentence_start, len(text), "", sentence))
    return clauses


def _is_sentence_end(text: str, dot: int, after: int) -> bool:
    written = _word_before(text, dot)
    word = written.lower()
    # "Dr.", "e.g.", "U.S." and the initial in "John F. Kennedy" do not end a sentence.
    initial = len(written) == 1 and written.isupper() and written != "I"
    if word in _ABBREVIATIONS or _INITIALS_RE.fullmatch(word) or initial:
        return False
    if word in _COMPANY_ABBREVIATIONS:
        return _CAPITAL_NEXT_RE.match(text, after) is not None
    return True


def _word_before(text: str, dot: int) -> str:
    """The run of word characters and dots (`[\\w.]+`) that ends at the full stop at `dot`, or
    before a newline there, within `_ABBREVIATION_WINDOW` characters; "" when none. Read
    backwards: a `[\\w.]+$` search would try each start in the window."""
    low = max(0, dot - _ABBREVIATION_WINDOW)
    end = dot - 1 if dot > low and text[dot - 1] == "\n" else dot
    start = end
    while start > low and (text[start - 1].isalnum() or text[start - 1] in "_."):
        start -= 1
    return text[start:end]


def _split_sentence(
    text: str, start: int, end: int, terminator: str, sentence: int
) -> list[Clause]:
    pieces: list[tuple[int, int, str]] = []
    cursor, conjunction = start, ""
    for m in _CLAUSE_BREAK_RE.finditer(text, start, end):
        pieces.append((cursor, m.start(), conjunction))
        cursor = m.end()
        word = _CONJUNCTION_RE.search(m.group())
        conjunction = word.group().lower() if word else ""
    pieces.append((cursor, end, conjunction))
    clauses = []
    for index, (piece_start, piece_end, joined) in enumerate(pieces):
        a, b = _trim(text, piece_start, piece_end)
        if a < b:
            last = index == len(pieces) - 1
            clauses.append(Clause(a, b, text[a:b], terminator if last else ",", sentence, joined))
    return clauses


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start] in _TRIM_CHARS:
        start += 1
    while end > start and text[end - 1] in _TRIM_CHARS:
        if text[end - 1] == "." and INITIALS_END_RE.search(text, start, end):
            break
        end -= 1
    return start, end


def content_words(text: str) -> int:
    return len(_WORD_RE.findall(_PLEASANTRY_RE.sub(" ", text)))


def content_free(text: str) -> bool:
    """Whether text holds no word of knowledge: only pleasantries, small talk, chat filler and
    the name of the person addressed. Length does not matter: "hate wasabi" is two words of
    knowledge, "wow, that's so awesome, Caroline" none."""
    text, reactions = _SMALL_TALK_RE.subn(",", text)  # first: its phrases hold pleasantries
    text, pleasantries = _PLEASANTRY_RE.subn(",", text)
    if pleasantries or reactions:
        text = _VOCATIVE_RE.sub(",", text)
    text = _RESIDUAL_FILLER_RE.sub(" ", _CHAT_FILLER_RE.sub(" ", text))
    return all(word.lower() in SMALL_TALK_GLUE for word in _WORD_RE.findall(text))


def _is_lowercase_typing(clause: str) -> bool:
    """No capitals anywhere except a leading one, and a lowercase 'i' or a lowercase start."""
    if _has_capital(clause[1:]):
        return False
    return clause[:1].islower() or _LOWER_TYPING_RE.search(clause) is not None


def _has_capital(text: str) -> bool:
    """Whether text holds a capital other than the word "I"; one regex for ASCII text (most
    text), where the capitals are A-Z, rather than a test of each character."""
    if text.isascii():
        return _ASCII_CAPITAL_RE.search(text) is not None
    return any(c.isupper() for c in _CAPITAL_I_RE.sub("", text))


def _is_question(body: str, terminator: str) -> bool:
    if _QUESTION_START_RE.match(body):
        return True
    return terminator == "?" and not _FIRST_PERSON_START_RE.match(body)


def analyse_clause(
    clause: Clause, *, inherited_guard: str | None, carried: tuple[str, ...] = ()
) -> Outcome:
    """What one clause claims and whether that is all it says. carried: the subject prefixes
    of the clause before, for a "but ..." with no subject of its own."""
    text = clause.text
    correction = CORRECTION_LEAD_RE.match(text)  # a cue alone ("Let me correct that") says nothing
    pos = _end_of(_LEADING_FILLER_RE, text, correction.end() if correction else 0)
    body = text[pos:]
    if not body:
        return Outcome((), True, inherited_guard, False)

    lead = INSTRUCTION_LEAD_RE.match(body)
    if lead:
        body = body[lead.end() :]
    hedge = _HEDGE_RE.match(body)
    if hedge:
        body = body[hedge.end() :]

    guard = inherited_guard
    opens_guard = False
    guard_start = _GUARD_START_RE.match(body)
    if guard_start:
        body, guard, opens_guard = body[guard_start.end() :], REASON_HYPOTHETICAL, True
    elif _GUARD_HEDGE_RE.search(body):
        body, guard = _GUARD_HEDGE_RE.sub("", body), REASON_HYPOTHETICAL
    if guard:
        body = _subjunctive_rewrite(body)

    if guard is None and _is_question(body, clause.terminator):
        ask = INSTRUCTION_QUESTION_RE.match(body)
        claim = (
            instruction_claim(body[ask.end() :], lead=lead is not None, asked=True) if ask else None
        )
        if claim is not None:
            return Outcome((claim,), True, None, False)
        # A question about the user's own life tells of it ("Where do I even buy that in
        # Austin?", "How do I be a good father to a kid who's angry at me?"): the model's to
        # read, else kept as an episode; one about anything else says nothing of the user.
        return Outcome((), _ABOUT_THE_SPEAKER_RE.search(body) is None, None, False)

    ctx = Context(lowercase_typing=_is_lowercase_typing(text), negated=False)
    carried_subject = bool(carried) and clause.conjunction == "but" and _lacks_subject(body)
    if carried_subject:
        body = _with_subject(body, carried, ctx)
    found = match_rules(body, ctx)
    if found is None and guard is None:
        claim = instruction_claim(body, lead=lead is not None)
        if claim:
            found = Found((claim,), len(body))
    unclear_negation = False
    if found is None and _NEGATION_PRESENT_RE.search(body):
        ctx, body, found, unclear_negation = _read_negation(body, ctx)

    claims, rest, when = _read_claims(body, found, ctx, guard=guard)
    appositions = _appositions(rest, ctx)
    claims = (*claims, *appositions)
    rest = _RELATION_APPOSITION_RE.sub(" ", rest) if appositions else rest

    # Unnamed people and "and ..." after a retraction are knowledge the rules can't pin down.
    ambiguous = ctx.negated and _CONTINUATION_RE.match(rest) is not None
    # Every word the rules did not read must be small talk or filler: a conjunct they could not
    # read ("... and hate wasabi", "..., but wasabi is awful") is knowledge. The leading filler
    # stays, so "Hey Mel" reads as a greeting to Mel; a correction cue is read (it marks the
    # claim).
    unread = f"{text[correction.end() if correction else 0 : pos]} {rest}"
    if (found is not None and found.unresolved) or ambiguous or unclear_negation:
        covered, unread = False, ""
    elif guard is not None and (opens_guard or inherited_guard or claims):
        covered, unread = True, ""
    else:
        covered = True
    prefixes = _subject_prefixes(body, found, ctx) if claims and guard is None else ()
    return Outcome(
        claims,
        covered,
        guard,
        opens_guard,
        prefixes,
        carried_subject,
        correction=correction is not None,
        when=when,
        unread=unread,
    )


def _read_claims(
    body: str, found: Found | None, ctx: Context, *, guard: str | None
) -> tuple[tuple[Claim, ...], str, str]:
    """The claims of a body, the words left unread, and the time phrase that ends a claim of
    change, or "". "I moved to Berlin last week": the time says when the change began and
    leaves nothing unread; after a claim that is no change ("I live in Berlin last week") or a
    guarded one it stays unread."""
    if found is None:
        return (), body, ""
    claims, rest = _continue_claims(body, found, ctx)
    time = TRAILING_TIME_RE.fullmatch(rest) if claims and guard is None else None
    if time is None or not CHANGE_VERB_RE.search(body, 0, len(body) - len(rest)):
        return claims, rest, ""
    return claims, "", time.group("phrase")


def _read_negation(body: str, ctx: Context) -> tuple[Context, str, Found | None, bool]:
    """A retraction read as its claim, negated: (context, body, found, unclear negation).

    Only "anymore" or "no longer" retracts: "I'm not from Texas" is not "no longer from
    Texas", "I don't love winter" is not "no longer loves winter". Any other negation of a claim
    is the LLM's to word. The rewrite deletes words: a value that reads across a deleted
    "anymore" ("I use live anymore Berlin" -> "live Berlin") was never said, so that retraction
    defers.
    """
    negated_ctx = Context(lowercase_typing=ctx.lowercase_typing, negated=True)
    rewritten = _negation_rewrite(body)
    retraction = match_rules(rewritten, negated_ctx)
    if retraction is None:
        return ctx, body, None, False
    said = all(claim.value.lower() in body.lower() for claim in retraction.claims)
    if said and RETRACTION_RE.search(body):
        return negated_ctx, rewritten, retraction, False
    return ctx, body, None, True


_NEW_SUBJECT_RE = re.compile(
    r"(?i:the|my|our|your|his|her|their|we|he|she|they|it|this|that|there)(?![\w'-])"
)


def _prefixes(body: str, found: Found, ctx: Context) -> tuple[re.Match[str] | None, list[str]]:
    """The subject of a claim read whole, and the prefixes that carry it ("I", "I'm").

    After a retraction the scope of the negation is ambiguous ("I don't live in Berlin anymore
    and work at SAP"), so nothing carries over there.
    """
    subject = _SUBJECT_RE.match(body)
    if subject is None or found.unresolved or ctx.negated:
        return None, []
    be = _BE_SIMPLE_RE.match(body, subject.end())
    return subject, [subject.group()] + ([body[: be.end()]] if be else [])


def _subject_prefixes(body: str, found: Found | None, ctx: Context) -> tuple[str, ...]:
    """Only "I" carries into a "but ..." clause: another subject may not be the one meant."""
    if found is None:
        return ()
    subject, prefixes = _prefixes(body, found, ctx)
    return tuple(prefixes) if subject is not None and subject.group("me") else ()


# A verb phrase with no subject: lowercase, not a pronoun or determiner, not a verb that agrees
# with someone else ("... but hates wasabi" is not about "I").
_ELIDED_SUBJECT_RE = re.compile(
    r"(?!(?:the|my|our|your|his|her|their|we|he|she|they|it|this|that|there|i|you|if|when"
    r"|because|then)(?![\w'’-]))(?!\w*[^s\W]s(?![\w'’-])(?<!also)(?<!always))[a-z]"
)


def _lacks_subject(body: str) -> bool:
    """A verb phrase to read with a carried subject; "but whatever" is small talk, not one."""
    return _ELIDED_SUBJECT_RE.match(body) is not None and not content_free(body)


def _with_subject(body: str, prefixes: tuple[str, ...], ctx: Context) -> str:
    """body with the first carried prefix a rule reads ("I" + "hate wasabi"), else "I ..."."""
    for prefix in prefixes:
        extended = f"{prefix} {body}"
        if match_rules(extended, ctx) is not None:
            return extended
    return f"{prefixes[0]} {body}"


def _continue_claims(body: str, found: Found, ctx: Context) -> tuple[tuple[Claim, ...], str]:
    """'I live in Berlin and work at SAP': the subject (and its 'am') carries over each 'and'."""
    claims, rest = found.claims, body[found.end :]
    subject, prefixes = _prefixes(body, found, ctx)
    if subject is None:
        return claims, rest
    while cont := _CONTINUATION_RE.match(rest):
        tail = rest[cont.end() :]
        if _NEW_SUBJECT_RE.match(tail):
            return claims, rest  # "..., and the audit slipped": a new clause, not a continuation
        for prefix in prefixes:
            extended = f"{prefix} {tail}"
            more = match_rules(extended, ctx)
            if more is not None and not more.unresolved:
                claims, rest = (*claims, *more.claims), extended[more.end :]
                break
        else:
            return claims, rest
    return claims, rest


def _appositions(text: str, ctx: Context) -> tuple[Claim, ...]:
    return tuple(
        relation_claim(m.group("relmod"), m.group("rel"), m.group("value"), ctx)
        for m in _RELATION_APPOSITION_RE.finditer(text)
        if is_name(m.group("value"))
    )


def _end_of(pattern: re.Pattern[str], text: str, pos: int) -> int:
    m = pattern.match(text, pos)
    return m.end() if m else pos
