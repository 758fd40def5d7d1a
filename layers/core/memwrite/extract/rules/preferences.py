"""Preference rules: favourites, likes and dislikes, what the user prefers, the tools they use."""

from __future__ import annotations

import re
from typing import Final

from memwrite.claims.candidate import MemoryType
from memwrite.extract.rules.engine import (
    LIST_SPLIT_RE,
    USER,
    Builder,
    Claim,
    Context,
    Found,
    Rule,
    Spec,
    Subject,
    collapse,
    durable_thing,
    make_claim,
    needs_subject,
    one_claim,
    possessive,
    proper_ok,
    split_items,
    strip_value,
    thing_ok,
)
from memwrite.extract.rules.vocabulary import (
    ADV,
    APOS,
    BE,
    BE_SIMPLE,
    HAVE_BEEN,
    PREFER_STOPS,
    RELATIONS,
    SUBJECT,
    THING_STOPS,
    TOOL_STOPS,
    list_run,
    token_run,
    verbose,
    word_set,
)

_BASE_FORM_VERBS: Final = word_set(
    "love like enjoy adore hate dislike detest loathe despise do can cannot"
)
_RELATION_WORD_RE = re.compile(rf"(?i:{RELATIONS})s?")

# Activities that are no thing without their object or company: "likes to play" (play what?),
# "loves hanging out" (with whom?). Alone, or cut before "with ...", they defer.
_NEEDS_COMPLEMENT: Final = word_set(
    """play playing make making do doing watch watching try trying build building collect
    collecting get getting have having take taking see seeing find finding use using go going
    hang hanging spend spending meet meeting visit visiting listen listening look looking help
    helping keep keeping give giving share sharing put putting bring bringing start starting
    chill chilling relax relaxing"""
)
_SOCIAL_PHRASES: Final = frozenset(
    {
        "hang out", "hanging out", "go out", "going out", "spend time", "spending time",
        "get together", "getting together", "chill out", "chilling out", "catch up",
        "catching up", "hang around", "hanging around",
    }
)  # fmt: skip
# Words in -ing that are things, not activities: "wedding planning" is one thing.
_ING_NOUNS: Final = word_set(
    "wedding morning evening building clothing pudding ceiling string spring thing king ring "
    "wing sibling dumpling stuffing icing frosting bedding"
)
_GERUND_RE = re.compile(r"[a-z]{2,}ing")
# "painting and reading novels": the "and" that joins two activities, not a thing's name.
_AND_GERUND_RE = re.compile(r"\s+(?i:and)\s+(?=[a-z]{2,}ing(?![\w'’-]))")


def _is_gerund(word: str) -> bool:
    return _GERUND_RE.fullmatch(word) is not None and word not in _ING_NOUNS


def _activities(item: str) -> list[str]:
    """ "painting and reading novels" -> two activities; "fish and chips" stays one thing."""
    words = item.split()
    if not words or not _is_gerund(words[0]):
        return [item]
    return [part for part in _AND_GERUND_RE.split(item) if part]


def _whole_activity(value: str) -> bool:
    """Not a verb without its object or company ("play", "hanging out"), and not two
    activities typed as one ("hiking biking")."""
    lowered = value.lower()
    if lowered in _NEEDS_COMPLEMENT or lowered in _SOCIAL_PHRASES:
        return False
    words = lowered.split()
    glued = len(words) > 1 and _is_gerund(words[0]) and _is_gerund(words[1])
    return not glued


_FAVORITE_SPEC: Final = Spec(
    "favorite",
    MemoryType.PREFERENCE,
    "preferences",
    True,
    0.5,
    ("What is {s}'s favorite {x}?", "Which {x} does {s} like best?", "Does {s} like {v}?"),
)
_LIKES_SPEC: Final = Spec(
    "likes",
    MemoryType.PREFERENCE,
    "interests",
    False,
    0.5,
    ("What does {s} like?", "Does {s} like {v}?", "What are {s}'s interests?"),
)
_DISLIKES_SPEC: Final = Spec(
    "dislikes",
    MemoryType.PREFERENCE,
    "interests",
    False,
    0.5,
    ("What does {s} dislike?", "Does {s} like {v}?", "What does {s} not enjoy?"),
)
_PREFERS_SPEC: Final = Spec(
    "prefers",
    MemoryType.PREFERENCE,
    "preferences",
    True,
    0.6,
    ("What does {s} prefer?", "Does {s} prefer {v}?", "What are {s}'s preferences?"),
)
_USES_SPEC: Final = Spec(
    "uses",
    MemoryType.PREFERENCE,
    "tools",
    False,
    0.5,
    ("What tools does {s} use?", "Does {s} use {v}?", "What software does {s} rely on?"),
)

# "My favorite band is Radiohead": the attribute names what ("favorite_band").
_FAVORITE_RE = verbose(
    rf"""(?i:my)\s+(?i:favou?rite)\s+(?P<what>[a-zA-Z]+(?:\s+[a-zA-Z]+)?)\s+(?i:is)\s+
    {token_run("value", THING_STOPS, 5)}"""
)


def _build_favorite(m: re.Match[str], ctx: Context) -> Found | None:
    what = collapse(m.group("what").lower())
    value = strip_value(m.group("value"))
    if not durable_thing(m, value):
        return None
    claim = make_claim(
        USER,
        _FAVORITE_SPEC,
        value,
        f"'s favorite {what} is {value}",
        ctx,
        attribute="favorite_" + what.replace(" ", "_"),
        extra=what,
    )
    return Found((claim,), m.end())


FAVORITE: Final = Rule(_FAVORITE_RE, _build_favorite)


def _preference_builder(spec: Spec) -> Builder:
    """Likes and dislikes: one claim per comma-separated item, verb kept as the user chose."""

    @needs_subject
    def build(m: re.Match[str], ctx: Context, subject: Subject, extra: list[Claim]) -> Found | None:
        # "Spoken like a real architect": a base-form verb after a name is a preposition.
        base_form = m.group("verb").split(maxsplit=1)[0].lower() in _BASE_FORM_VERBS
        if base_form and not (m.group("me") or m.group("we")):
            return None
        items = [
            activity
            for item in split_items(m.group("value"), LIST_SPLIT_RE)
            for activity in _activities(item)
        ]
        if not items:
            return None
        verb = _third_person_verb(m.group("verb"), spec.attribute)
        infinitive = "to " if "inf" in m.re.groupindex and m.group("inf") else ""
        claims = []
        for item in items:
            value, owner = possessive(item)
            durable = durable_thing(m, value) if item is items[-1] else thing_ok(value)
            if not durable or not _whole_activity(value):
                return None
            if owner and _RELATION_WORD_RE.fullmatch(value):
                # "I love my wife" is affection, not a preference worth a memory.
                return None
            claims.append(
                make_claim(subject, spec, value, f"{verb} {infinitive}{owner}{value}", ctx)
            )
        return Found((*extra, *claims), m.end())

    return build


def _third_person_verb(verb: str, attribute: str) -> str:
    """'love' -> 'loves', "I'm a big fan of" -> 'is a big fan of'; negations read 'dislikes'."""
    words = collapse(verb.lower()).replace("’", "'")
    if attribute == "dislikes":
        if words.startswith(("do", "does", "can", "cannot")) and "stand" not in words:
            return "dislikes"
        if "stand" in words:
            return "cannot stand"
        if words.startswith("fan"):
            return "is not a fan of"
        if words in {"into", "big on", "keen on", "crazy about"}:
            return f"is not {words}"
    if " " in words or words in {"into"}:
        return f"is {words}"
    return words if words.endswith("s") else f"{words}s"


_build_dislikes = _preference_builder(_DISLIKES_SPEC)
_build_likes = _preference_builder(_LIKES_SPEC)

# "I'm not a fan of", "I'm not really into": a dislike, not a retraction of a like.
_DISLIKES_FAN_RE = verbose(
    rf"""{SUBJECT}{BE_SIMPLE}\s+(?i:not|no)\s+
    (?:(?i:really|that|too|very|exactly|all\s+that)\s+)?
    (?:(?i:an?)\s+)?(?:(?i:big|huge|great|real)\s+)?
    (?P<verb>(?i:fan\s+of|into|big\s+on|keen\s+on|crazy\s+about))\s+
    {list_run("value", THING_STOPS, 6)}"""
)
DISLIKES_FAN: Final = Rule(_DISLIKES_FAN_RE, _build_dislikes)

# "I hate mornings", "I don't really like jazz", "I can't stand cilantro".
_DISLIKES_RE = verbose(
    rf"""{SUBJECT}{ADV}\s+
    (?P<verb>(?i:hate|hates|dislike|dislikes|detest|detests|loathe|loathes|despise|despises
       |can{APOS}?t\s+stand|cannot\s+stand|can\s+not\s+stand
       |do(?:n{APOS}?t|\s+not)\s+(?:really\s+)?(?:like|enjoy)
       |does(?:n{APOS}?t|\s+not)\s+(?:really\s+)?(?:like|enjoy)))\s+
    (?P<inf>(?i:to)\s+)?{list_run("value", THING_STOPS, 6)}"""
)
DISLIKES: Final = Rule(_DISLIKES_RE, _build_dislikes)

# "I'm a huge fan of Radiohead", "I'm really into climbing".
_LIKES_FAN_RE = verbose(
    rf"""{SUBJECT}{BE}{ADV}\s+
    (?P<verb>(?i:(?:an?\s+)?(?:(?:big|huge|massive|great|real|total|die-hard|diehard)\s+)?fan
       \s+of|into|obsessed\s+with|passionate\s+about|crazy\s+about|a\s+lover\s+of))\s+
    {list_run("value", THING_STOPS, 6)}"""
)
LIKES_FAN: Final = Rule(_LIKES_FAN_RE, _build_likes)

# "I love hiking, biking and swimming", "my sister Ana likes to paint".
_LIKES_RE = verbose(
    rf"""{SUBJECT}{ADV}\s+(?P<verb>(?i:love|loves|like|likes|enjoy|enjoys|adore|adores))\s+
    (?P<inf>(?i:to)\s+)?{list_run("value", THING_STOPS, 6)}"""
)
LIKES: Final = Rule(_LIKES_RE, _build_likes)

# "I prefer tea over coffee", "I prefer to work mornings".
_PREFERS_RE = verbose(
    rf"""{SUBJECT}{ADV}\s+(?i:prefer|prefers)\s+(?P<inf>(?i:to)\s+)?
    {token_run("value", PREFER_STOPS, 6)}
    (?P<rest>\s+(?i:over|to|rather\s+than|instead\s+of|than)\s+
       {token_run("other", THING_STOPS, 6)})?"""
)


@needs_subject
def _build_prefers(
    m: re.Match[str], ctx: Context, subject: Subject, extra: list[Claim]
) -> Found | None:
    value, owner = possessive(strip_value(m.group("value")))
    rest = " " + collapse(m.group("rest")) if m.group("rest") else ""
    other = strip_value(m.group("other")) if rest else ""
    if not (durable_thing(m, other) if rest else durable_thing(m, value)):
        return None
    if rest and not thing_ok(value):
        return None
    infinitive = "to " if m.group("inf") else ""
    claim = make_claim(
        subject, _PREFERS_SPEC, value, f"prefers {infinitive}{owner}{value}{rest}", ctx
    )
    return Found((*extra, claim), m.end())


PREFERS: Final = Rule(_PREFERS_RE, _build_prefers)

# "I use Neovim", "I've been using Obsidian".
_USES_RE = verbose(
    rf"""{SUBJECT}
    (?:{HAVE_BEEN}{ADV}\s+(?i:using)|{BE_SIMPLE}{ADV}\s+(?i:using)
      |{ADV}\s+(?i:use|uses|rely\s+on|relies\s+on|switched\s+to))\s+
    {token_run("value", TOOL_STOPS, 5)}"""
)
USES: Final = Rule(
    _USES_RE,
    one_claim(
        _USES_SPEC,
        "uses {value}",
        accept=lambda value, m, ctx: durable_thing(m, value) and proper_ok(value, ctx),
    ),
)
