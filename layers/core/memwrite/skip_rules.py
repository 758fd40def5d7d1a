"""Named skip rules of the pre-filter, evaluated in order on each segment (first match wins).

They judge *forms* (a greeting, a request to the assistant, an emoji, a code block), never
content: a rule matches only when the whole sentence is of that form, so "Thanks! I moved to
Lisbon." keeps its second sentence and a question that also carries a fact keeps the fact.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from memwrite.config import UserSkipPattern
from memwrite.segment import Segment, SegmentKind

__all__ = ["BUILTIN_RULE_NAMES", "SkipMatch", "compile_user_patterns", "match_skip_rule"]

# Whole phrases, matched longest first so "thank you" wins over "thank".
_GREETING_ACK_PHRASES: tuple[str, ...] = tuple(
    sorted(
        (
            "hi",
            "that was helpful",
            "that's helpful",
            "that helps",
            "very helpful",
            "good call",
            "good point",
            "good idea",
            "fair enough",
            "will do",
            "sorry",
            "my bad",
            "hey",
            "hey there",
            "hi there",
            "hello there",
            "hi all",
            "hey all",
            "hey everyone",
            "hello",
            "hiya",
            "heya",
            "yo",
            "sup",
            "howdy",
            "morning",
            "evening",
            "gm",
            "gn",
            "thanks",
            "thank you",
            "thanks so much",
            "thx",
            "ty",
            "tysm",
            "cheers",
            "ok",
            "okay",
            "okey",
            "k",
            "kk",
            "sure",
            "cool",
            "great",
            "nice",
            "awesome",
            "amazing",
            "perfect",
            "alright",
            "all right",
            "got it",
            "gotcha",
            "sounds good",
            "sounds great",
            "makes sense",
            "yes",
            "yeah",
            "yep",
            "yup",
            "yea",
            "no",
            "nope",
            "nah",
            "lol",
            "lmao",
            "rofl",
            "haha",
            "hahaha",
            "hehe",
            "wow",
            "oh",
            "ah",
            "oops",
            "bye",
            "goodbye",
            "see you",
            "see ya",
            "later",
            "ttyl",
            "np",
            "no problem",
            "no worries",
            "you're welcome",
            "welcome",
            "much appreciated",
            "appreciate it",
            "well done",
            "good job",
            "good morning",
            "good afternoon",
            "good evening",
            "good night",
            "nice to meet you",
            "good to see you",
            "great to see you",
            "how are you",
            "how have you been",
            "how's it going",
            "what's up",
            "same here",
            "that's great",
            "that's awesome",
            "that's cool",
            "that's amazing",
            "that's nice",
            "love it",
            "indeed",
            "true",
            "definitely",
            "absolutely",
            "totally",
            "exactly",
            "right",
            "fine",
            "agreed",
            "you too",
            "and you",
            "so",
            "very",
            "really",
            "much",
            "a lot",
        ),
        key=len,
        reverse=True,
    )
)
_PHRASE_WORDS = frozenset(" ".join(_GREETING_ACK_PHRASES).split())
_GREETING_ACK = re.compile(
    r"(?:(?:" + "|".join(re.escape(p) for p in _GREETING_ACK_PHRASES) + r") )+"
)
_NON_WORD = re.compile(r"[^\w\s']+", re.UNICODE)
_CAPITALISED = re.compile(r"^[A-Z][a-z]+$")

_SHORT_META_OPENERS = re.compile(
    r"(?:can|could|would|will) you\b|please\b|tell me\b|what(?:'s| is| are)\b|how(?:'s| is)\b"
    r"|show me\b|give me\b|explain\b|define\b",
    re.IGNORECASE,
)
_META_TALK = re.compile(
    r"(?:(?:can|could|would|will) you |please )?"
    r"(?:summari[sz]e|repeat|rephrase|reword|shorten|expand on|elaborate on|explain|simplify"
    r"|clarify|translate|continue|redo|retry|regenerate|rewrite|proofread|reformat|list)"
    r"(?: (?:that|this|it|the above|your (?:last )?(?:answer|response|message|reply)|again"
    r"|please|more|for me|in bullet points))*"
    r"|(?:please )?(?:go on|keep going|try again|say that again|one more time|start over)"
    r"(?: please)?"
    r"|what do you mean|what did you mean|i don'?t (?:understand|get it)"
    r"|that'?s not what i (?:asked|meant)|never ?mind|nvm|tell me more|more details?|go ahead"
    r"|as an ai\b.*|you'?re (?:just )?(?:an? )?(?:ai|bot|chatbot|language model)"
    r"|let'?s (?:start over|change the subject|move on)|anything else|any(?:thing)? more",
    re.IGNORECASE,
)
_UI_COMMAND = re.compile(
    r"/[a-z][\w-]*|(?:clear|reset|restart|stop|regenerate|retry|undo|help|new chat|exit|quit)",
    re.IGNORECASE,
)
_ALPHANUMERIC = re.compile(r"[^\W_]")
# Greetings, meta talk and UI commands are short forms; a longer sentence is none of them.
_MAX_FORM_CHARS = 120
_TRAILING_CHARS = " \t\n.?!…,;:~"

BUILTIN_RULE_NAMES = (
    "greeting_ack",
    "short_meta_request",
    "reaction",
    "tool_call",
    "code_block",
    "meta_talk",
    "ui_command",
)


@dataclass(frozen=True, slots=True)
class SkipMatch:
    """A segment matched a rule; `user_rule` tells a tenant rule from a built-in one."""

    name: str
    user_rule: bool = False


def _is_greeting_ack(text: str) -> bool:
    words = _NON_WORD.sub(" ", text).split()
    if not words:
        return False
    # Cheap rejection first: a sentence with two words outside the vocabulary cannot match.
    outside = 0
    for word in words:
        if word.lower() not in _PHRASE_WORDS:
            outside += 1
            if outside > 1:
                return False
    # One capitalised name may follow a greeting: "Hey Mel!", "Thanks, Priya".
    names = [w for w in words if _CAPITALISED.match(w) and w.lower() not in _PHRASE_WORDS]
    if len(names) > 1:
        return False
    rest = " ".join(w.lower() for w in words if w not in names)
    return bool(rest) and _GREETING_ACK.fullmatch(rest + " ") is not None


def _is_short_meta_request(text: str, max_chars: int) -> bool:
    return len(text) <= max_chars and _SHORT_META_OPENERS.match(text) is not None


def _is_reaction(text: str) -> bool:
    return _ALPHANUMERIC.search(text) is None


def _builtin_rule(segment: Segment, short_meta_max_chars: int) -> str | None:
    """The first built-in rule, in DESIGN.md's order, that the whole segment matches."""
    if segment.kind is SegmentKind.TOOL_CALL:
        return "tool_call"
    if segment.kind is SegmentKind.CODE:
        return "code_block"
    text = segment.text
    bare = text.rstrip(_TRAILING_CHARS)
    short_form = len(text) <= _MAX_FORM_CHARS
    if short_form and _is_greeting_ack(bare):
        return "greeting_ack"
    if _is_short_meta_request(text, short_meta_max_chars):
        return "short_meta_request"
    if _is_reaction(text):
        return "reaction"
    if short_form and _META_TALK.fullmatch(bare):
        return "meta_talk"
    if short_form and _UI_COMMAND.fullmatch(bare):
        return "ui_command"
    return None


def compile_user_patterns(
    patterns: Sequence[UserSkipPattern],
) -> tuple[tuple[str, re.Pattern[str]], ...]:
    """Tenant patterns, compiled once per config (they match the whole sentence, any case)."""
    return tuple((p.name, re.compile(p.pattern, re.IGNORECASE)) for p in patterns)


def match_skip_rule(
    segment: Segment,
    *,
    short_meta_max_chars: int,
    user_patterns: tuple[tuple[str, re.Pattern[str]], ...] = (),
) -> SkipMatch | None:
    """The first rule the whole segment matches, or None when the segment is kept."""
    builtin = _builtin_rule(segment, short_meta_max_chars)
    if builtin is not None:
        return SkipMatch(builtin)
    text = segment.text
    bare = text.rstrip(_TRAILING_CHARS)
    for name, pattern in user_patterns:
        if pattern.fullmatch(text) or pattern.fullmatch(bare):
            return SkipMatch(name, user_rule=True)
    return None
