"""Named skip rules of the pre-filter, evaluated in order on each segment (first match wins).

They judge *forms* (a greeting, a request to the assistant, an emoji, a code block), never
content: a rule matches only when the whole sentence is of that form, so "Thanks! I moved to
Lisbon." keeps its second sentence and a question that also carries a fact keeps the fact.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from typing import NamedTuple

from memwrite.config.tenant_overrides import UserSkipPattern
from memwrite.guards.linear_regex import SentencePattern, compile_linear
from memwrite.pre_filter.patterns import by_first_char
from memwrite.pre_filter.skip_phrases import (
    ENCOURAGEMENT_PHRASES,
    FAREWELL_PHRASES,
    GREETING_ACK_PHRASES,
    SEE_YOU,
    THANKS,
    WELL_WISH,
    WISH,
)
from memwrite.segment import Segment, SegmentKind

__all__ = [
    "BUILTIN_RULE_NAMES",
    "CONTEXT_QUESTION_RULES",
    "NOT_ANSWERABLE_RULES",
    "SkipMatch",
    "compile_user_patterns",
    "is_answer_word",
    "match_skip_rule",
    "plainly_kept",
]


def _pattern_words(pattern: re.Pattern[str]) -> frozenset[str]:
    """The words a phrase pattern like `WISH` can match (its `an?` spells "a" too)."""
    return frozenset(re.findall(r"[a-z]+(?:'[a-z]+)?", pattern.pattern)) | {"a"}


class _PhraseRule:
    """A sentence that is nothing but a sequence of known phrases (one name allowed)."""

    def __init__(self, *phrase_lists: tuple[str, ...], extra: re.Pattern[str] | None = None):
        phrases = sorted({p for phrases in phrase_lists for p in phrases}, key=len, reverse=True)
        self._words = frozenset(" ".join(phrases).split())
        # Every word a match can hold; a capitalised word outside `_words` is still a name.
        self._vocabulary = self._words
        # Grouped by first character: a full match exists or not whatever the order of the
        # alternatives, and the engine no longer tries every phrase at each word.
        alternatives = by_first_char(phrases)
        if extra is not None:
            alternatives = f"{extra.pattern}|{alternatives}"
            self._vocabulary |= _pattern_words(extra)
        self._sequence = re.compile(r"(?:(?:" + alternatives + r") )+")

    @property
    def vocabulary(self) -> frozenset[str]:
        return self._vocabulary

    def matches(self, words: list[str], lowered: list[str]) -> bool:
        """Whether `words` (and `lowered`, the same lower-cased) are a sequence of phrases."""
        if not words:
            return False
        # Cheap rejection first: two words outside the vocabulary cannot match (one is a name).
        if len([low for low in lowered if low not in self._vocabulary]) > 1:
            return False
        # Every word a phrase's, a capitalised one too ("Hope you had a nice weekend").
        if self._sequence.fullmatch(" ".join(lowered) + " ") is not None:
            return True
        # One capitalised name may follow a greeting: "Hey Mel!", "Thanks, Priya".
        names = [
            w
            for w, low in zip(words, lowered, strict=True)
            if low not in self._words and _CAPITALISED.match(w)
        ]
        if len(names) != 1:
            return False
        rest = " ".join(low for w, low in zip(words, lowered, strict=True) if w not in names)
        return bool(rest) and self._sequence.fullmatch(rest + " ") is not None


# Thanks for the talk and wishes for the other's well-being are greetings; a farewell may
# also wish them a good time or name where they meet next.
_GREETINGS = re.compile(f"{THANKS.pattern}|{WELL_WISH.pattern}")
_GREETING_ACK = _PhraseRule(GREETING_ACK_PHRASES, extra=_GREETINGS)
_FAREWELL = _PhraseRule(
    FAREWELL_PHRASES,
    GREETING_ACK_PHRASES,
    extra=re.compile(f"{WISH.pattern}|{SEE_YOU.pattern}|{_GREETINGS.pattern}"),
)
_ENCOURAGEMENT = _PhraseRule(ENCOURAGEMENT_PHRASES, GREETING_ACK_PHRASES, extra=_GREETINGS)
# A sentence with two words outside all three vocabularies matches none of the phrase rules.
_PHRASE_WORDS = _GREETING_ACK.vocabulary | _FAREWELL.vocabulary | _ENCOURAGEMENT.vocabulary


def _vocabulary(words: str) -> frozenset[str]:
    return frozenset(words.split())


_CAPITALISED = re.compile(r"^[A-Z][a-z]+(?:'s)?$")

# A first-person word makes a sentence a claim by the speaker: no form rule below drops it.
_FIRST_PERSON = _vocabulary(
    "i i'm im i've ive i'd i'll me my mine myself we we're we've we'd we'll our ours us ourselves"
)
_SECOND_PERSON = _vocabulary(
    "you you're youre you've you'd you'll your yours yourself u ur ya y'all"
)

# Evaluations of what the other said: "That sounds awesome", "Oh haha, that makes sense now",
# "that's so sad!", "Cool setup!". Every word must come from this vocabulary (one name allowed);
# an evaluative opener ("Cool", "What a") may take one noun of its own ("Cool setup!").
_EVALUATIVE = _vocabulary(
    """great awesome amazing cool nice good fun lovely beautiful wonderful fantastic incredible
    impressive inspiring exciting interesting sad terrible awful tough hard rough scary crazy
    wild insane neat sweet cute adorable brilliant perfect gorgeous stunning epic rad fabulous
    hilarious funny weird strange sick dope unbelievable unreal touching heartwarming special
    powerful meaningful excellent superb marvelous delightful charming stressful frustrating
    annoying exhausting helpful fascinating intense relaxing peaceful cozy delicious yummy tasty
    beautifully impressed fun-filled heartbreaking bummer shame pity rough lucky smart clever
    inspirational admirable remarkable magical dreamy fab gr8 wicked solid legit huge kind
    talented brave thoughtful generous hilarious"""
)
_EVALUATION_FILLER = _vocabulary(
    """oh ah aw aww wow woah whoa omg yay ooh haha hahaha hehe lol lmao yeah yes yep yup no
    nope man dude gosh geez ugh damn hmm hm well so such a an the that that's thats this this's
    it it's its is are be been sounds sound sounded looks look looked seems seem seemed
    must feels feel felt like really very super pretty totally truly absolutely just too quite
    kinda sooo soo all and but indeed sure definitely now makes make made sense to hear see glad
    happy sorry for what how idea news plan one thing things stuff time choice job work pic
    photo photos picture pictures shot view advice point story experience moment day way
    great awesome rly lots much more most of those these"""
)
_EVALUATION_FILLER |= _vocabulary(" ".join(GREETING_ACK_PHRASES))
_DEMONSTRATIVES = _vocabulary("that this")
# A noun after these is something the other party showed or told ("that dress", "your garden").
_POINTING_DETERMINERS = _vocabulary("that this those these your ur")
# What makes the word before them the subject of an evaluation ("Tacos are great").
_LINKING_VERBS = _vocabulary(
    "is are was were tastes taste smells smell sounds sound looks look seems seem feels feel"
)
_THIRD_PERSON = _vocabulary("he she he's she's hes shes")
# Without one of these words nothing is evaluated ("that's so sad", "makes sense").
_EVALUATES = _EVALUATIVE | {"sense"}
_EVALUATION_OPENERS = _EVALUATIVE | frozenset({"what", "such", "so"})
_MAX_EVALUATION_WORDS = 12

# Questions that are only about the other party, and verbs that smuggle a fact into one
# ("did you hear that Priya quit?").
_QUESTION_END = re.compile(r"\?[\s\"')\]!?.…]*$")
_CLAUSE_VERBS = _vocabulary(
    """know knew hear heard think thought believe remember notice noticed realize realise
    realized guess imagine tell told say said see saw read mean"""
)
# A first-person word or a clause verb: the question carries a claim.
_CLAIMS = _FIRST_PERSON | _CLAUSE_VERBS
_WH_OPENERS = _vocabulary(
    """what what's whats how how's hows how'd how're where where's when when's who who's which
    why why'd did does do was were is are have has had any anything anyone"""
)
# A question with its "you" left out: "Got any pets?", "Seen it yet?", "Any plans for May?"
_ELLIPTICAL_OPENERS = _vocabulary("got seen been ever tried watched done doing going planning any")
_MAX_QUESTION_WORDS = 20
_MAX_OPEN_QUESTION_WORDS = 10
_DIGIT = re.compile(r"\d")

_SHORT_META_OPENERS = re.compile(
    r"(?:can|could|would|will) you\b|please\b|tell me\b|what(?:'s| is| are)\b|how(?:'s| is)\b"
    r"|show me\b|give me\b|explain\b|define\b",
    re.IGNORECASE,
)
_META_TALK = re.compile(
    r"(?:(?:ok|okay|wait|hmm|sorry|oh|so|right|hold on|hang on),? )?(?:"
    r"(?:(?:can|could|would|will) you |please )?"
    r"(?:summari[sz]e|repeat|rephrase|reword|shorten|expand on|elaborate on|explain|simplify"
    r"|clarify|translate|continue|redo|retry|regenerate|rewrite|proofread|reformat|list)"
    r"(?: (?:that|this|it|the above|your (?:last |earlier |previous )?(?:answer|response|message"
    r"|reply|point)|again|please|more|for me|in bullet points))*"
    r"|(?:(?:can|could|would|will) you |please )?(?:go on|keep going|try again|say that again"
    r"|one more time|start over)"
    r"(?: please)?"
    r"|what do you mean|what did you mean|i don'?t (?:understand|get it)"
    r"|that'?s not what i (?:asked|meant)|never ?mind|nvm|tell me more|more details?|go ahead"
    r"|as an ai\b.*|you'?re (?:just )?(?:an? )?(?:ai|bot|chatbot|language model)"
    r"|let'?s (?:start over|change the subject|move on)|anything else|any(?:thing)? more"
    # talk about the conversation itself
    r"|(?:ok(?:ay)?,? )?(?:let me|lemme|i'?ll|i need to|i have to) (?:re-?read|read|look at"
    r"|think about|check|scroll (?:back|up)(?: to)?) (?:that|this|it|your (?:last |earlier )?"
    r"(?:answer|message|reply|point))(?: again)?"
    r"|(?:let me|lemme) think(?: about it)?|(?:hold on|hang on|wait|one sec(?:ond)?|just a sec"
    r"(?:ond)?|give me a (?:sec(?:ond)?|minute|moment)|brb)(?: a (?:sec(?:ond)?|minute|moment))?"
    r"|(?:going|getting|coming) back to (?:your|my|the|what you said|what i said)"
    r"(?: (?:earlier|last|previous|first|other|original))?(?: (?:point|question|message|topic"
    r"|comment|idea))?(?: (?:earlier|before|from before))?"
    r"|(?:to|re|regarding|about) your (?:earlier |last |previous |first )?(?:point|question"
    r"|message)|where were we|as (?:i|you) (?:said|mentioned)(?: (?:before|earlier))?"
    r"|that answers my question|i see what you mean|(?:sorry,? )?(?:typo|autocorrect))",
    re.IGNORECASE,
)
_UI_COMMAND = re.compile(
    r"/[a-z][\w-]*|(?:clear|reset|restart|stop|regenerate|retry|undo|redo|help|new chat|exit|quit"
    r"|cancel|refresh|reload|next|previous|back|go back|scroll (?:up|down)|log ?out|sign ?out"
    r"|log ?in|sign ?in|(?:please )?(?:open|close|show|hide|toggle|expand|collapse|go to)"
    r"(?: me)?(?: the| my)? (?:settings|menu|preferences|options|sidebar|history|profile|home"
    r"(?: ?page)?|dashboard|chat|chats|inbox|notifications|help|account|page|tab|window|panel"
    r"|app|list|results|details|previous page|next page|last one|first one)"
    r"(?: (?:menu|page|tab|panel|screen|window))?"
    r"|(?:please )?(?:show|give) me(?: the| that)? (?:list|results|details|options|next one"
    r"|previous one|last one|first one|rest|more))",
    re.IGNORECASE,
)
_ALPHANUMERIC = re.compile(r"[^\W_]")
# Greetings, meta talk and UI commands are short forms; a longer sentence is none of them.
_MAX_FORM_CHARS = 120
_TRAILING_CHARS = " \t\n.?!…,;:~"
# Words that answer a yes/no question: alone they are facts once the question is attached.
_KNOWN_WORDS = (
    _vocabulary(" ".join(GREETING_ACK_PHRASES + FAREWELL_PHRASES + ENCOURAGEMENT_PHRASES))
    | _EVALUATIVE
    | _EVALUATION_FILLER
)
# An evaluative word answers too ("How was the concert?" "Amazing!"): the speaker's opinion
# of what was asked about, once the question is attached.
_ANSWER_WORDS = _vocabulary(
    """yes yeah yep yup yea ya no nope nah not sure definitely absolutely totally never always
    sometimes maybe probably rarely often usually kinda sorta mostly once twice"""
)
# A question that asks for an opinion ("How was the concert?", "Did you like Rome?"): an
# evaluative word answers it ("Amazing!"), the speaker's opinion of what was asked about.
_ASKS_OPINION = re.compile(
    r"^\W*how\b|\b(?:like|liked|enjoy|enjoyed|think|thought|feel|felt|love|loved|rate|worth"
    r"|good|fun|find)\b",
    re.IGNORECASE,
)

BUILTIN_RULE_NAMES = (
    "greeting_ack",
    "short_meta_request",
    "reaction",
    "tool_call",
    "code_block",
    "meta_talk",
    "ui_command",
    "farewell",
    "encouragement",
    "evaluation",
    "other_party_question",
    "open_question",
)
# A question dropped by this rule stays when a kept sentence follows it in the same turn: it
# is the context of that sentence ("who runs the project? I think it's Priya").
CONTEXT_QUESTION_RULES = frozenset({"open_question"})
# A question of these forms ("How are you?", "Can you say that again?") asks for no fact: a
# short turn after it is not kept as its answer.
NOT_ANSWERABLE_RULES = frozenset(
    {"greeting_ack", "reaction", "tool_call", "code_block", "meta_talk", "ui_command", "farewell"}
)


class SkipMatch(NamedTuple):
    """A segment matched a rule; `user_rule` tells a tenant rule from a built-in one. A named
    tuple: built for every dropped sentence, cheaper than a frozen dataclass."""

    name: str
    user_rule: bool = False


# Contractions typed without their apostrophe ("thats", "youre"); "im" too, so that the
# first-person guard sees it.
_APOSTROPHE_FREE = {
    word.replace("'", ""): word
    for word in [
        "that's",
        "what's",
        "how's",
        "it's",
        "i'm",
        "i've",
        "i'd",
        "i'll",
        "you're",
        "you've",
        "you'll",
        "don't",
        "can't",
        "won't",
        "didn't",
        "doesn't",
        "isn't",
        "wasn't",
        "let's",
        "they're",
        "we're",
        "there's",
    ]
    if word.replace("'", "") not in ("its", "well", "were", "ill", "id", "lets", "cant", "wont")
}
_ELONGATED = re.compile(r"(\w)\1{2,}")
_LAUGHTER = re.compile(r"(?:h?[ae]h)+[ae]?h?|(?:ha){2,}h?|l+o+l+|lmf?a+o+|rofl+", re.IGNORECASE)
# A word is a run of word characters and apostrophes; chat spelling is a letter written three
# times or a word that is all laughter.
_WORD = re.compile(r"[\w']+")
# Searched in the lower-cased sentence; it may fire on more than chat spelling (the exact
# check is `_canonical`), never on less.
_CHAT_SPELLING = re.compile(rf"(\w)\1\1|\b(?=[haelr])(?:{_LAUGHTER.pattern})\b")

# Every word a greeting, farewell, encouragement or evaluation can be made of, as typed.
_FORM_WORDS = (
    _KNOWN_WORDS
    | _SECOND_PERSON
    | _vocabulary("was were")
    | _pattern_words(WISH)
    | _pattern_words(SEE_YOU)
    | _pattern_words(_GREETINGS)
    | frozenset(_APOSTROPHE_FREE)
)
_MAX_UNKNOWN_FORM_WORDS = 2  # a name, and one noun after an evaluative opener ("Cool setup!")


def _canonical(word: str) -> str:
    """ "sooo" -> "so", "yesss" -> "yes", "hahahah" -> "haha": chat spelling to the vocabulary."""
    if _LAUGHTER.fullmatch(word):
        return "haha"
    lowered = word.lower()
    if lowered in _APOSTROPHE_FREE:
        return _APOSTROPHE_FREE[lowered]
    if not _ELONGATED.search(word):
        return word
    single = _ELONGATED.sub(r"\1", word)
    return single if single.lower() in _KNOWN_WORDS else _ELONGATED.sub(r"\1\1", word)


def _tokens(text: str) -> list[str]:
    return _WORD.findall(text.replace("’", "'"))


def _canonical_words(tokens: list[str]) -> list[str]:
    if _CHAT_SPELLING.search(" ".join(tokens).lower()):
        return [_canonical(w) for w in tokens]
    # The common case, no chat spelling: only apostrophe-free contractions to restore.
    return [_APOSTROPHE_FREE.get(w.lower(), w) for w in tokens]


def _words(text: str) -> list[str]:
    return _canonical_words(_tokens(text))


def _may_be_made_of_form_words(lowered_tokens: list[str]) -> bool:
    """False when three words outside `_FORM_WORDS` rule out a greeting, farewell,
    encouragement or evaluation: the common sentence, which then skips their per-word checks.
    Unknown words in chat spelling ("sooo") may still be known ones, so they keep it True."""
    unknown = [w for w in lowered_tokens if w not in _FORM_WORDS]
    if len(unknown) <= _MAX_UNKNOWN_FORM_WORDS:
        return True
    return _CHAT_SPELLING.search(" ".join(unknown)) is not None


def _rule_words(bare: str) -> tuple[list[str], list[str], list[str]]:
    """A short sentence's tokens, the canonical `words` the word rules read and `lowered`, the
    same lower-cased; `words` and `lowered` stay empty when no word rule can match."""
    if not bare.isascii():
        tokens = _tokens(bare)
        if not _may_be_made_of_form_words([w.lower() for w in tokens]):
            return tokens, [], []
        words = _canonical_words(tokens)
        return tokens, words, [w.lower() for w in words]
    # ASCII: lower-casing keeps every character in place and a token holds no space, so the
    # tokens joined, lower-cased once and split again are the tokens lower-cased.
    tokens = _WORD.findall(bare)
    joined = " ".join(tokens).lower()
    lowered_tokens = joined.split(" ") if tokens else []
    if not _may_be_made_of_form_words(lowered_tokens):
        return tokens, [], []
    if _CHAT_SPELLING.search(joined):
        words = [_canonical(w) for w in tokens]
        return tokens, words, [w.lower() for w in words]
    if _APOSTROPHE_FREE.keys().isdisjoint(lowered_tokens):
        return tokens, tokens, lowered_tokens  # no contraction to restore: the words as typed
    words = [_APOSTROPHE_FREE.get(low, w) for w, low in zip(tokens, lowered_tokens, strict=True)]
    return tokens, words, [w.lower() for w in words]


def _is_evaluation(words: list[str], lowered: list[str], text: str) -> bool:
    """Whether the sentence only reacts to what the other party said or showed ("that's so
    sad", "Cool setup!", "Wow, Caroline, that looks amazing"). What it evaluates must be the
    conversation itself (that, this, it, you, a deictic "that photo"), never a named subject:
    "Tacos are great", "Lisbon is gorgeous", "She's brilliant" are the speaker's opinions."""
    if not words or len(words) > _MAX_EVALUATION_WORDS:
        return False
    if _EVALUATES.isdisjoint(lowered):
        return False  # an evaluation evaluates: "that's so sad", "makes sense"
    allowance = 1 if lowered[0] in _EVALUATION_OPENERS else 0  # "Cool setup!", "What a view"
    names = 0
    previous = ""
    for index, (word, low) in enumerate(zip(words, lowered, strict=True)):
        if low in _FIRST_PERSON:
            return False
        past = low in ("was", "were")
        if past and previous not in _DEMONSTRATIVES:
            return False  # "It was amazing" tells the speaker's own experience; keep it
        pointing = previous in _POINTING_DETERMINERS
        previous = low
        if past or low in _EVALUATIVE or low in _EVALUATION_FILLER or low in _SECOND_PERSON:
            continue
        if pointing and not _DIGIT.search(word):
            continue  # "that dress is stunning", "your garden looks amazing": theirs
        if _names_a_subject(word, lowered[index + 1 : index + 2], text):
            return False  # "Tacos are great", "Oliver's hilarious": an opinion of the speaker
        if _CAPITALISED.match(word) and names == 0:
            names += 1  # "Wow, Caroline!"
            continue
        if allowance and not _DIGIT.search(word):
            allowance -= 1
            continue
        return False
    return True


def _names_a_subject(word: str, following: list[str], text: str) -> bool:
    """A word outside the evaluation vocabulary that is the subject of the evaluation: a
    third-person pronoun ("He's been great"), contracted with "is" ("Mel's so talented") or
    followed by a linking verb with no comma between ("Paris is lovely", "Adoption sounds
    awesome"). A name addressed is not ("Wow, Caroline, that looks amazing")."""
    low = word.lower()
    if low in _THIRD_PERSON or low.endswith(("'s", "’s")):
        return True
    if not following or following[0] not in _LINKING_VERBS:
        return False
    return re.search(rf"(?<![\w']){re.escape(word)}\s+{following[0]}\b", text, re.I) is not None


def _question_rule(text: str, words: list[str], lowered: list[str]) -> str | None:
    """`other_party_question` for a question wholly about the other party; `open_question` for
    a short question naming no one ("How was the trip?", "What did it look like?"). Neither may
    hold a first-person word, a digit or a verb that carries a fact inside ("did you hear...").
    The caller has checked that `text` ends with a question mark."""
    if not words or len(words) > _MAX_QUESTION_WORDS:
        return None
    if not _CLAIMS.isdisjoint(lowered) or _DIGIT.search(text):
        return None
    if not _SECOND_PERSON.isdisjoint(lowered) or lowered[0] in _ELLIPTICAL_OPENERS:
        return "other_party_question"  # "What are you studying?", "Got any pets?"
    names_someone = any(_CAPITALISED.match(w) for w in words[1:])
    if len(words) <= _MAX_OPEN_QUESTION_WORDS and lowered[0] in _WH_OPENERS and not names_someone:
        return "open_question"
    return None


def _is_short_meta_request(text: str, max_chars: int) -> bool:
    return len(text) <= max_chars and _SHORT_META_OPENERS.match(text) is not None


# Emoticons typed with a letter or digit ("<3", ":D", "xD"): a reaction like an emoji.
_EMOTICON = re.compile(r"</?3+|(?<!\w)[:;=][-'^]?[DdPpOo3]+(?!\w)|(?<!\w)[xX][dD]+(?!\w)")


_TRAILING_EMOTICONS = re.compile(rf"(?:\s*(?:{_EMOTICON.pattern}))+$")
_EMOTICON_ENDS = frozenset("3DdPpOo")


def _without_emoticons(bare: str) -> str:
    """ "Appreciate the kind words <3" -> "Appreciate the kind words"."""
    if bare[-1:] not in _EMOTICON_ENDS:
        return bare
    return _TRAILING_EMOTICONS.sub("", bare).rstrip(_TRAILING_CHARS) or bare


def _is_reaction(text: str) -> bool:
    return _ALPHANUMERIC.search(_EMOTICON.sub("", text)) is None


# `_META_TALK` then `_UI_COMMAND` in one case-sensitive pattern for lower-cased ASCII text,
# where it matches exactly what the two IGNORECASE patterns match (no Unicode case folding).
_META_OR_UI_LOWER = re.compile(f"(?:{_META_TALK.pattern})|(?:{_UI_COMMAND.pattern})")


def _is_meta_talk_or_ui_command(bare: str) -> bool:
    if bare.isascii():
        return _META_OR_UI_LOWER.fullmatch(bare.lower()) is not None
    return _META_TALK.fullmatch(bare) is not None or _UI_COMMAND.fullmatch(bare) is not None


# A long sentence's tokens, words and lowered words (read, never changed).
_NO_WORDS: tuple[list[str], list[str], list[str]] = ([], [], [])


def _may_be_phrases(words: list[str], lowered: list[str]) -> bool:
    """False when no phrase rule can match: a phrase rule's words all come from its phrases but
    one, which must be a capitalised name ("Hey Mel!"), and `_PHRASE_WORDS` holds them all."""
    outside = [w for w, low in zip(words, lowered, strict=True) if low not in _PHRASE_WORDS]
    if not outside:
        return bool(words)
    return len(outside) == 1 and _CAPITALISED.match(outside[0]) is not None


def _builtin_rule(segment: Segment, short_meta_max_chars: int) -> str | None:
    """The first built-in rule, in the order of docs/design.md §1, the whole segment matches."""
    if segment.kind is SegmentKind.TOOL_CALL:
        return "tool_call"
    if segment.kind is SegmentKind.CODE:
        return "code_block"
    text = segment.text
    bare = _without_emoticons(text.rstrip(_TRAILING_CHARS))
    short_form = len(text) <= _MAX_FORM_CHARS
    # `words` stays empty when no rule made of words can match: they all fail on it.
    tokens, words, lowered = _rule_words(bare) if short_form else _NO_WORDS
    phrases = _may_be_phrases(words, lowered)  # one check for the three phrase rules
    if phrases and _GREETING_ACK.matches(words, lowered):
        return "greeting_ack"
    if _is_short_meta_request(text, short_meta_max_chars):
        return "short_meta_request"
    if _is_reaction(text):
        return "reaction"
    if short_form and _is_meta_talk_or_ui_command(bare):
        return "meta_talk" if _META_TALK.fullmatch(bare) else "ui_command"
    if phrases and _FAREWELL.matches(words, lowered):
        return "farewell"
    if phrases and _ENCOURAGEMENT.matches(words, lowered):
        return "encouragement"
    if _is_evaluation(words, lowered, bare):
        return "evaluation"
    if not short_form or not _QUESTION_END.search(text):
        return None
    split = _trailing_question(bare)
    if split is not None:
        # "Been busy, started a new job - how are things?": the statement keeps the sentence
        # and the question is its context; "Wow, that's great, how did it go?" is two forms.
        head, tail = split, text[len(split) :].lstrip(_CLAUSE_SEPARATORS)
        head_rule = _builtin_rule(Segment(head, 0, len(head)), short_meta_max_chars)
        if head_rule is None and _carries_statement(head):
            return None
        return _builtin_rule(Segment(tail, 0, len(tail)), short_meta_max_chars)
    if words:
        return _question_rule(text, words, lowered)
    words = _canonical_words(tokens)
    return _question_rule(text, words, [w.lower() for w in words])


# A clause break inside a sentence: comma, semicolon, colon, ellipsis, a dash between words.
_CLAUSE_SEPARATORS = " \t,;:….-–—"
_CLAUSE_BREAK = re.compile(r"\s*(?:[,;:…]|\.{2,}|\s[-–—]+|[–—])\s*")
# Words that open the trailing question of a statement ("..., how are things?", "..., you?").
_QUESTION_OPENERS = (
    _WH_OPENERS
    | _ELLIPTICAL_OPENERS
    | _SECOND_PERSON
    | _vocabulary(
        """can could would will should shall may might am isn't aren't don't didn't doesn't
        wasn't won't wouldn't right eh huh and or thoughts wanna want heard"""
    )
)
# A head that opens like these is a question left without its mark ("Any tips on running,
# what gear do you need?"); "Been busy, ..." and "Had a blast, ..." are statements.
_HEAD_QUESTION_OPENERS = (
    _vocabulary(
        """what what's whats how how's hows how'd where where's when who who's which why do does
    is are can could would will should any anything anyone"""
    )
    | _SECOND_PERSON
)
# Words that carry nothing on their own in front of a question ("So anyway, how was it?").
_DISCOURSE_WORDS = _vocabulary(
    "anyway anyways btw also actually honestly um uhm uh hmm hm well so oh and but plus"
)


def _trailing_question(bare: str) -> str | None:
    """The statement before the trailing question of a sentence ("Been busy, started a new job
    last week" in "... - how are things"), or None when the sentence is one question. `bare` is
    the sentence without its end marks; the split is at the last clause break that a question
    word follows."""
    head = None
    for m in _CLAUSE_BREAK.finditer(bare):
        following = _WORD.match(bare, m.end())
        if m.start() > 0 and following and following.group().lower() in _QUESTION_OPENERS:
            head = bare[: m.start()]
    return head


def _carries_statement(head: str) -> bool:
    """Whether the words before a trailing question say something: two words or more, one of
    them outside the forms' vocabulary, and not a question of their own."""
    lowered = [w.lower() for w in _words(head)]
    if len(lowered) < 2 or lowered[0] in _HEAD_QUESTION_OPENERS:
        return False
    return any(w not in _FORM_WORDS and w not in _DISCOURSE_WORDS for w in lowered)


_NO_WORD_RULE_UNKNOWN_WORDS = 3  # one more than any word rule tolerates
# A whole `_WORD` token that is a first-person word, in lower-cased text.
_FIRST_PERSON_TOKEN = re.compile(rf"(?<![\w'])(?:{by_first_char(_FIRST_PERSON)})(?![\w'])")
_NON_WORD_PUNCTUATION = "".join(c for c in string.punctuation if c not in "_'")


def plainly_kept(text: str, short_meta_max_chars: int) -> bool:
    """True only when no built-in rule can match this prose sentence: the common one, decided
    without the per-rule checks; False means judge it with `match_skip_rule`.

    ASCII only (lower-casing then keeps every token as it is), longer than a short meta
    request, no "?" (no question rule), not a meta-talk or UI command, and three words that are
    whole tokens outside `_FORM_WORDS` with no chat spelling (so `_canonical` keeps them): then
    greeting, farewell, encouragement and evaluation all fail (none allows three unknown
    words), and a letter is there (no reaction). Two such words do for a sentence with a
    first-person word: the phrase rules allow one unknown word, an evaluation no first person
    ("I'm swamped with the kids"). A longer sentence only needs that letter."""
    if len(text) <= short_meta_max_chars or "?" in text or not text.isascii():
        return False
    if len(text) > _MAX_FORM_CHARS:
        return not _is_reaction(text)
    lowered = text.lower()
    unknown = 0
    for chunk in lowered.split():
        # Between spaces and without its punctuation, an alphanumeric chunk is one `_WORD`.
        word = chunk.strip(_NON_WORD_PUNCTUATION)
        if (
            word not in _FORM_WORDS
            and word.isalnum()
            and not _CHAT_SPELLING.search(word)
            and not _EMOTICON.fullmatch(chunk)
        ):
            unknown += 1
            if unknown == _NO_WORD_RULE_UNKNOWN_WORDS:
                break
    else:
        if unknown < _NO_WORD_RULE_UNKNOWN_WORDS - 1 or not _FIRST_PERSON_TOKEN.search(lowered):
            return False
    return _META_OR_UI_LOWER.fullmatch(lowered.rstrip(_TRAILING_CHARS)) is None


def is_answer_word(text: str, question: str) -> bool:
    """Whether a short turn holds an answer to `question`: a yes/no-style word ("Yeah", "nope,
    never", "not really"), or an evaluative one when the question asks for an opinion ("How
    was the trip?" "Pretty rough")."""
    lowered = {word.lower() for word in _words(text)}
    if not lowered.isdisjoint(_ANSWER_WORDS):
        return True
    return not lowered.isdisjoint(_EVALUATIVE) and _ASKS_OPINION.search(question) is not None


def compile_user_patterns(
    patterns: Sequence[UserSkipPattern],
) -> tuple[tuple[str, SentencePattern], ...]:
    """Tenant patterns, compiled once per config on RE2 (linear time whatever the pattern);
    they match the whole sentence, any case."""
    return tuple((p.name, compile_linear(p.pattern)) for p in patterns)


def match_skip_rule(
    segment: Segment,
    *,
    short_meta_max_chars: int,
    user_patterns: tuple[tuple[str, SentencePattern], ...] = (),
) -> SkipMatch | None:
    """The first rule the whole segment matches, or None when the segment is kept."""
    builtin = _builtin_rule(segment, short_meta_max_chars)
    if builtin is not None:
        return SkipMatch(builtin)
    text = segment.text
    for name, pattern in user_patterns:
        if pattern(text) or pattern(text.rstrip(_TRAILING_CHARS)):
            return SkipMatch(name, user_rule=True)
    return None
