"""The rule engine: what a rule is, how its claim is built and vetted, and the shared helpers.

A rule is a pattern anchored at the start of a clause body and a builder that turns its match
into claims (or None when the match is not a usable claim, so the next rule is tried). The
topic modules hold the rules themselves; `table.py` puts them in order.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from memwrite.claims.candidate import USER_ENTITY, MemoryType
from memwrite.claims.relations import RELATION_SYNONYMS
from memwrite.extract.rules.vocabulary import (
    BAD_PLACE_FIRST,
    BAD_THINGS,
    CHAT_FILLER,
    CHAT_SHORTHAND,
    CLAUSE_WORDS,
    COGNITION_VERBS,
    DANGLING_WORDS,
    FILLER_WORDS,
    FIRST_PERSON_WORDS,
    HEDGE_WORDS,
    KEPT_RELATION_MODIFIERS,
    NOT_NAMES,
    OTHER_OWNER_WORDS,
    PET_RELATIONS,
    PHRASE_END_RE,
    POINTING_WORDS,
    QUALIFIER_RE,
    SOCIAL_RELATIONS,
    STATEFUL_RELATIONS,
    STRETCHED_RE,
    TRANSIENT_RE,
    WORK_RELATIONS,
)

# --------------------------------------------------------------------------------------------
# Claims
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Spec:
    """How the claims of one attribute are stored: type, topic, statefulness, importance, and
    the questions a later search asks ({s} subject, {v} value, {x} extra wording)."""

    attribute: str
    type: MemoryType
    topic: str
    stateful: bool
    importance: float
    questions: tuple[str, ...]


@dataclass(frozen=True)
class Subject:
    """Who a claim is about, and how sentences and questions refer to them."""

    entity: str
    phrase: str
    asked: str


USER = Subject(USER_ENTITY, "The user", "the user")


@dataclass(frozen=True)
class Claim:
    entity: str
    attribute: str
    value: str
    text: str
    spec: Spec
    questions: tuple[str, ...]
    negated: bool


@dataclass(frozen=True)
class Found:
    """What one pattern made of a clause body; unresolved means "knowledge we cannot name"."""

    claims: tuple[Claim, ...]
    end: int
    unresolved: bool = False


@dataclass(frozen=True)
class Context:
    lowercase_typing: bool
    negated: bool


PLAIN = Context(lowercase_typing=False, negated=False)


def make_claim(
    subject: Subject,
    spec: Spec,
    value: str,
    phrase: str,
    ctx: Context,
    *,
    attribute: str | None = None,
    extra: str = "",
    negated: bool | None = None,
) -> Claim:
    """Build a claim; phrase is the predicate in the third person and contains the value.

    The attribute is the spec's unless given ("favorite_color" under the "favorite" spec).
    """
    negated = ctx.negated if negated is None else negated
    if negated:
        phrase = _retract(phrase)
    separator = "" if phrase.startswith("'s") else " "
    questions = tuple(
        _capitalise(q.format(s=subject.asked, v=value, x=extra)) for q in spec.questions
    )
    return Claim(
        entity=subject.entity,
        attribute=attribute or spec.attribute,
        value=value,
        text=f"{subject.phrase}{separator}{phrase}{'' if phrase.endswith('.') else '.'}",
        spec=spec,
        questions=questions,
        negated=negated,
    )


def _retract(phrase: str) -> str:
    """'lives in X' -> 'no longer lives in X'; "'s name is X" -> "'s name is no longer X"."""
    if phrase.startswith("'s "):
        return phrase.replace(" is ", " is no longer ", 1)
    if phrase.startswith("is "):
        return "is no longer " + phrase.removeprefix("is ")
    return "no longer " + phrase


def collapse(text: str) -> str:
    return _SPACES_RE.sub(" ", text).strip()


_SPACES_RE = re.compile(r"\s+")


def _capitalise(text: str) -> str:
    return text[:1].upper() + text[1:]


# --------------------------------------------------------------------------------------------
# Relations (also the subject of "my sister Ana works at ...")
# --------------------------------------------------------------------------------------------

_RELATION_QUESTIONS: Final = (
    "What is the name of {s}'s {x}?",
    "Who is {s}'s {x}?",
    "Does {s} have a {x}?",
)

_TOPIC_FAMILY: Final = "family"


def _relation_attribute(relmod: str | None, rel: str) -> tuple[str, str]:
    """('ex_wife', 'ex-wife') from the words the user wrote: the predicate and its wording."""
    base = collapse(rel.lower())
    attribute = RELATION_SYNONYMS.get(base, base).replace(" ", "_").replace("-", "_")
    words = base
    if relmod:
        modifier = relmod.strip().lower().rstrip("-")
        words = f"{modifier}-{base}" if modifier in {"ex", "step"} else f"{modifier} {base}"
        if modifier in KEPT_RELATION_MODIFIERS:
            attribute = f"{modifier}_{attribute}"
    return attribute, words


def relation_spec(attribute: str) -> Spec:
    core = attribute.split("_", 1)[-1] if attribute.startswith(("ex_", "late_")) else attribute
    if core in WORK_RELATIONS:
        topic = "work"
    elif core in SOCIAL_RELATIONS:
        topic = "social"
    elif core in PET_RELATIONS:
        topic = "pets"
    elif core == "therapist":
        topic = "health"
    else:
        topic = _TOPIC_FAMILY
    stateful = attribute in STATEFUL_RELATIONS
    return Spec(attribute, MemoryType.FACT, topic, stateful, 0.8, _RELATION_QUESTIONS)


def relation_claim(relmod: str | None, rel: str, name: str, ctx: Context) -> Claim:
    attribute, words = _relation_attribute(relmod, rel)
    return make_claim(
        USER,
        relation_spec(attribute),
        name,
        f"'s {words} is named {name}",
        ctx,
        extra=words,
        negated=False,
    )


# --------------------------------------------------------------------------------------------
# Subjects and values
# --------------------------------------------------------------------------------------------

INITIALS_END_RE = re.compile(r"(?:[A-Z]\.){2,}$")
_TRAILING_CONJUNCTION_RE = re.compile(r"[\s,]+(?i:and|or)$")
_LIST_END_RE = re.compile(r"(?:,\s*|\s+)(?i:and|or)\s+[^,]+$")
LIST_SPLIT_RE = re.compile(r"\s*,\s*(?:(?i:and|or)\s+)?")
_LIST_SPLIT_WORDS_RE = re.compile(r"\s*,\s*(?:(?i:and|or)\s+)?|\s+(?i:and|or)\s+")


def is_name(value: str) -> bool:
    return value.split(maxsplit=1)[0].lower().strip("'’") not in NOT_NAMES


def resolve_subject(
    m: re.Match[str], *, allow_we: bool = False
) -> tuple[Subject | None, list[Claim]]:
    """Resolve the subject group; None means a real claim about someone the rules can't name."""
    if m.group("me"):
        return USER, []
    if m.group("we"):
        return (USER, []) if allow_we else (None, [])
    name = m.group("name")
    if name:
        return (Subject(name, name, name), []) if is_name(name) else (None, [])
    relname = m.group("relname")
    if not relname or not is_name(relname):
        # "My brother works at Tesla": knowledge, but inventing a name would be worse.
        return None, []
    _, words = _relation_attribute(m.group("relmod"), m.group("rel"))
    relation = relation_claim(m.group("relmod"), m.group("rel"), relname, PLAIN)
    return Subject(relname, f"{relname}, the user's {words},", relname), [relation]


def strip_value(value: str) -> str:
    value = value.strip()
    if INITIALS_END_RE.search(value):
        return value
    return value.rstrip(".,!?;:'\"’”)")


def verbatim(value: str) -> str:
    """The value group as written, for patterns whose group cannot carry punctuation."""
    return value


def written_name(m: re.Match[str], ctx: Context) -> str | None:
    """The value group as a person's name, capitalised unless the user types in lowercase."""
    value = strip_value(m.group("value"))
    if not value or not is_name(value):
        return None
    if not (value[:1].isupper() or ctx.lowercase_typing):
        return None
    return value


def proper_ok(value: str, ctx: Context) -> bool:
    """Places, employers and tools must look like names unless the user types in lowercase."""
    words = value.split()
    if not words:
        return False
    if any(w[:1].isupper() or w[:1].isdigit() for w in words):
        return True
    return ctx.lowercase_typing and words[0].lower() not in BAD_PLACE_FIRST


def place_ok(value: str, ctx: Context) -> bool:
    return proper_ok(value, ctx) and not value[:1].isdigit()


def thing_ok(value: str) -> bool:
    """A value that names a thing: not a pronoun, not something of the other speaker or of a
    named person, not a definite reference to the conversation, not a cut phrase or filler."""
    written = value.split()
    words = [w.lower().strip("'’") for w in written]
    if not words or words[0] in BAD_THINGS or words[0] in COGNITION_VERBS:
        return False
    if words[-1] in DANGLING_WORDS:
        return False
    # "the message", "the host's outfit": something the listener is meant to see; "the Beatles"
    # is a name.
    if words[0] == "the" and (len(written) == 1 or not written[1][:1].isupper()):
        return False
    if any(w.endswith(("'s", "’s", "s'")) for w in written) or any(
        w in FILLER_WORDS for w in words
    ):
        return False
    return not any(
        w in POINTING_WORDS
        or w in FIRST_PERSON_WORDS
        or w in OTHER_OWNER_WORDS
        or w in CLAUSE_WORDS
        or w in HEDGE_WORDS
        for w in words
    )


def _is_proper(value: str) -> bool:
    """Every word capitalised or a number: "WUFI Passive", "99% Invisible"."""
    return all(w[:1].isupper() or w[:1].isdigit() for w in value.split())


def _complete(m: re.Match[str], value: str) -> bool:
    """The value ends where its clause ends (qualifiers of time or company aside), not at a
    preposition or a word limit that cut the phrase; a name is complete by itself."""
    if _is_proper(value):
        return True
    rest, pos = m.string, m.end()
    while qualifier := QUALIFIER_RE.match(rest, pos):
        pos = qualifier.end()
    if PHRASE_END_RE.match(rest, pos) is None:
        return False
    # "I love seeing you": a gerund whose object is still to come.
    following = rest[pos:].split(maxsplit=1)
    gerund = value.endswith("ing") and rest[: m.end()].rstrip().endswith(value)
    return not (gerund and following and following[0].lower() in {"you", "it"})


_CHAT_WORD_RE = re.compile(rf"(?i:{CHAT_FILLER})")
_WORD_OF_VALUE_RE = re.compile(r"[^\s,;:!?()\[\]{}\"“”]+")


# Suffixes of manner and frequency adverbs ("religiously", "constantly", "weekly"); nouns in
# -ly ("family", "Italy", "rally") end otherwise or are capitalised.
_ADVERB_SUFFIXES: Final = (
    "ously", "ively", "ently", "antly", "ately", "fully", "lessly", "edly", "ingly", "ically",
    "ularly", "ibly", "ably", "ctly", "rtly", "stly", "ghtly", "kly", "hly", "nthly", "rly",
)  # fmt: skip


def _is_adverb(word: str) -> bool:
    low = word.strip(".'’")
    return low.islower() and len(low) > 4 and low.endswith(_ADVERB_SUFFIXES)


def bounded_value(value: str) -> bool:
    """Whether a claim's value is a whole, clean phrase: every rule's last check. A value that
    ends on a preposition, article, conjunction or determiner was cut mid-phrase ("the lead
    designer of"); one holding chat filler ("peppers tho", "sooo"), stretched letters
    ("pizzaaa") or a word without a letter or digit (an emoji) is chat, not a name for a thing;
    one holding a lowercase "not" ran on into a contrast ("Porto not Lisbon"), one holding
    "or" names alternatives, not a thing ("ramen or sushi").
    Either way the rule is not sure, and the turn is left whole to the model."""
    words = _WORD_OF_VALUE_RE.findall(value)
    if not words:
        return False
    last = words[-1].lower().strip(".'’")
    if last in DANGLING_WORDS or _is_adverb(words[-1]):
        return False  # "the lead designer of", "Notion religiously"
    for word in words:
        bare = word.strip(".'’\"")
        if not any(c.isalnum() for c in bare) or STRETCHED_RE.search(bare):
            return False
        if _CHAT_WORD_RE.fullmatch(bare) and not bare[:1].isupper():
            return False
        if word.lower() in CHAT_SHORTHAND:
            return False
        if word == "not":
            return False  # "Porto not Lisbon": a contrast ran into the value
        if word == "or":
            return False  # "ramen or sushi": one of them, or both? not one thing
    return True


def durable_thing(m: re.Match[str], value: str) -> bool:
    """A preference worth a memory: a complete thing, not tied to this moment."""
    return thing_ok(value) and _complete(m, value) and TRANSIENT_RE.search(m.string) is None


def possessive(value: str) -> tuple[str, str]:
    """'my smart home setup' -> ('smart home setup', 'their '): third person keeps the value."""
    lowered = value.lower()
    if lowered.startswith("my "):
        return value[3:].strip(), "their "
    return value, ""


def split_items(value: str, splitter: re.Pattern[str]) -> list[str]:
    """Split a list value; commas only make a list when it ends "..., and Z" or "... or Z"."""
    value = _TRAILING_CONJUNCTION_RE.sub("", value)
    if "," in value and not _LIST_END_RE.search(value):
        # "a safe, inviting place": a comma that does not make a list; leave it to the LLM.
        return []
    return [item for item in (strip_value(p) for p in splitter.split(value)) if item]


def listed_things(m: re.Match[str]) -> list[str]:
    """The value group as a list of things ("cats, dogs and pollen"); empty when an item is not
    a thing or the last one is cut: "allergic to dogs with long hair" is not "to dogs"."""
    items = split_items(m.group("value"), _LIST_SPLIT_WORDS_RE)
    if not items or not all(thing_ok(i) for i in items) or not _complete(m, items[-1]):
        return []
    return items


# --------------------------------------------------------------------------------------------
# Rules and builders: a builder returns None when the match is not a usable claim.
# --------------------------------------------------------------------------------------------

Builder = Callable[[re.Match[str], Context], Found | None]
_SubjectBuilder = Callable[[re.Match[str], Context, Subject, list[Claim]], Found | None]


@dataclass(frozen=True)
class Rule:
    """A pattern anchored at the start of a clause body, and what its match means."""

    pattern: re.Pattern[str]
    build: Builder


def needs_subject(build: _SubjectBuilder) -> Builder:
    """A claim about someone the rules cannot name is knowledge they did not understand:
    the builder is not called and the clause stays uncovered (the LLM's job)."""

    def with_subject(m: re.Match[str], ctx: Context) -> Found | None:
        subject, extra = resolve_subject(m)
        if subject is None:
            return unresolved_match(m)
        return build(m, ctx, subject, extra)

    return with_subject


def unresolved_match(m: re.Match[str]) -> Found:
    return Found(claims=(), end=m.end(), unresolved=True)


def one_claim(
    spec: Spec,
    phrase: str,
    *,
    clean: Callable[[str], str] = strip_value,
    accept: Callable[[str, re.Match[str], Context], bool] = lambda value, m, ctx: True,
    negated: bool | None = None,
    allow_we: bool = False,
) -> Builder:
    """A rule with one claim about its subject: `clean` the value group, `accept` it, and word
    it as `phrase` ("lives in {value}"). An unnamed subject leaves the clause uncovered."""

    def build(m: re.Match[str], ctx: Context) -> Found | None:
        subject, extra = resolve_subject(m, allow_we=allow_we)
        if subject is None:
            return unresolved_match(m)
        value = clean(m.group("value"))
        if not accept(value, m, ctx):
            return None
        claim = make_claim(subject, spec, value, phrase.format(value=value), ctx, negated=negated)
        return Found((*extra, claim), m.end())

    return build
