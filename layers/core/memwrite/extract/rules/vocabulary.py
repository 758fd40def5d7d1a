"""The rules' vocabulary: word lists and the regex fragments the topic patterns are built from.

Data only, apart from the few functions that assemble a fragment. Words that serve a single
topic (occupations, diets, assistant verbs) live with that topic's rules instead.
"""

from __future__ import annotations

import re
from typing import Final

from memwrite.extract.rules.times import TIME_STOPS


def word_set(words: str) -> frozenset[str]:
    return frozenset(words.split())


APOS = "['’]"
_UP = "A-ZÀ-ÖØ-Þ"
_LO = "a-zß-öø-ÿ"
# Marcus, O'Neil, McDonald, Mary-Jane, José; a lone "I" is not a name.
NAME_TOKEN = rf"[{_UP}](?:[{_LO}]+(?:[{_UP}][{_LO}]+)?|{APOS}[{_UP}][{_LO}]+)(?:-[{_UP}]?[{_LO}]+)?"
TITLE_NAME = rf"{NAME_TOKEN}(?:\s+{NAME_TOKEN}){{0,2}}"
_TOKEN = r"[^\s,;:!?()\[\]{}\"“”]+"
_PERSON_TOKEN = r"[^\W\d_][\w'’.\-]*"


def elongated(phrase: str) -> str:
    """A phrase as a pattern that also matches it typed with stretched letters: "so much" ->
    "s+o+\\s+m+u+c+h+", which reads "sooo muuuch" as well."""
    parts = []
    for char in phrase:
        if char.isalpha():
            parts.append(re.escape(char) + "+")
        elif char == " ":
            parts.append(r"\s+")
        elif char == "'":
            parts.append(APOS)
        else:
            parts.append(re.escape(char))
    return "".join(parts)


def by_first_letter(phrases: tuple[str, ...]) -> str:
    """`elongated` phrases as one alternation for a (?i:...) group, grouped by the ASCII letter
    they open with, each group behind a lookahead of its letter: at a position only that
    letter's phrases are tried (Python's re otherwise tries every branch at every position).
    It matches what their plain alternation matches: no character matches two letters, and
    a letter's phrases keep their order."""
    groups: dict[str, list[str]] = {}
    for phrase in phrases:
        letter = phrase[:1].lower()
        if not (letter.isascii() and letter.isalpha()):
            raise ValueError(f"{phrase!r} does not open with a letter")
        groups.setdefault(letter, []).append(elongated(phrase))
    return "|".join(f"(?={letter})(?:{'|'.join(group)})" for letter, group in groups.items())


# Chat filler: words and phrases that trail or pad a claim in chat and are never part of what
# the claim names ("I like grilled peppers tho", "I love cycling sooo much lol"). Three kinds:
# discourse tags and abbreviations, laughter, and intensifiers of the verb. Matched with their
# letters stretched or not ("thooo", "lolll", "sooo much").
CHAT_TAGS: Final = (
    "tho", "though", "tbh", "tbf", "ngl", "imo", "imho", "fr", "frfr", "btw", "idk", "af",
    "asf", "rn", "atm", "srsly", "lowkey", "highkey", "omg", "smh", "jk", "fyi", "lol", "lmao",
    "lmfao", "rofl", "xd", "ikr", "istg", "bruh", "fml", "ugh", "yay", "woo", "yeah", "yup",
    "yep", "ok", "okay", "you know", "ya know", "y'know", "i guess", "i think", "or something",
    "and stuff", "and all", "and everything", "or whatever", "haha", "hehe", "heh", "sm",
    "rly", "srs", "nvm", "tbqh", "ily", "xoxo",
)  # fmt: skip
# Small talk: reactions to what the other speaker said ("wow, that's gorgeous", "sounds fun"),
# agreement, cheering and sign-offs, and the empty tail of a list ("and that's it", "but
# whatever"). None of it names a thing; a clause made only of small talk, pleasantries and chat
# filler holds no knowledge whatever its length. Reactions also mark a name beside them as the
# person addressed ("Wow, Caroline!").
SMALL_TALK_REACTIONS: Final = (
    "wow", "whoa", "woah", "omg", "aw", "aww", "yay", "woohoo", "oh no", "oh", "ah", "ooh",
    "awesome", "amazing", "great", "cool", "nice", "lovely", "gorgeous", "beautiful",
    "wonderful", "fantastic", "incredible", "impressive", "brilliant", "sweet", "neat", "fun",
    "cute", "adorable", "stunning", "inspiring", "congrats", "congratulations", "agreed",
    "absolutely", "totally", "definitely", "exactly", "indeed", "true", "fair", "whatever",
    "anyway", "anyways", "alright", "all right", "good to see you", "nice to meet you",
    "missed you", "can't wait", "keep it up", "lucky you", "sorry to hear that",
    "glad to hear that", "glad to hear it", "happy for you", "proud of you", "me too",
    "you too", "same here", "of course", "good luck", "take care", "wish me luck",
    "no problem", "no way", "what's up", "just curious", "nothing much", "nothing specific",
    "not much",
    "and stuff", "and all that", "that's all", "that's it", "nice one", "good call",
    "good idea", "great idea", "that's the spirit", "see ya", "appreciate your help",
    "appreciate your support", "appreciate the help", "appreciate the support",
    "thanks for the support", "thanks for your support", "big news", "good news",
    "great news", "guess what",
)  # fmt: skip
# Words that only hold small talk together ("that's so", "it was", "sounds", "to") or hedge
# nothing in particular ("Maybe.").
SMALL_TALK_GLUE: Final = word_set(
    "that that's thats this it it's its is was a an the so such very super pretty quite too "
    "sounds sound looks look seems to maybe perhaps probably again"
)
# Chat shorthand for a joining word ("coffee w oat milk", "yoga n stuff", "bc it's cheap"): a
# value that holds one runs on past the thing, so the rule is not sure where it ends.
CHAT_SHORTHAND: Final = word_set("w w/ n bc b/c cuz coz cos esp bout abt wit")
INTENSIFIERS: Final = (
    "so", "so much", "so so much", "very much", "too", "a lot", "alot", "a ton", "tons",
    "big time", "like crazy", "to death", "to bits", "to pieces", "really", "literally",
    "honestly", "seriously", "totally", "truly", "madly", "like",
)  # fmt: skip
LAUGHTER = r"(?:h+[aeiou]+){2,}h*|a*(?:h+a+){2,}h*|l+o+l+(?:o+l+)*|l+m+f*a+o+|r+o+f+l+"
_CHAT_FILLER_PHRASES: Final = tuple(sorted(CHAT_TAGS + INTENSIFIERS, key=len, reverse=True))
CHAT_FILLER = "|".join([elongated(w) for w in _CHAT_FILLER_PHRASES] + [LAUGHTER])
# The same, quicker to search for (`by_first_letter`).
CHAT_FILLER_BY_LETTER = f"{by_first_letter(_CHAT_FILLER_PHRASES)}|{LAUGHTER}"
# A word of chat spelling: a letter typed three times or more ("sooo", "pizzaaa").
STRETCHED_RE = re.compile(r"([a-z])\1\1")

_ADVERBS = (
    r"just|recently|actually|currently|really|also|still|now|totally|truly|honestly|genuinely"
    r"|absolutely|definitely|mostly|usually|generally|finally|officially|already|even|only"
    r"|originally|kind\s+of|sort\s+of|kinda|sorta|do|does|happily|proudly|very|so"
)
# Words that end a place, employer or role: "I live in Berlin with my wife" -> "Berlin".
PLACE_STOPS = (
    r"with|for|since|because|now|any\s?more|any|these|currently|right|at|on|in|near|by|from"
    r"|and|but|so|who|which|where|when|while|as|though|too|after|before|until|if|during|last"
    r"|this|next|ago|today|tonight|yesterday|tomorrow|recently|lately|full-time|part-time"
    r"|remotely|it|that|to|or|every|all|again|already|also|still|both|nowadays|temporarily"
    r"|permanently|alone|together|a|an|is|was|are|were|has|have|had|will|would|can|could"
    r"|i|my|our|his|her|their|btw|lol|haha|full\s+time|part\s+time|/s|originally|yet|then|nor"
    rf"|{TIME_STOPS}|{CHAT_FILLER}"
)
# Words that end a liked thing, an allergen or a food: "I love jazz because ..." -> "jazz".
THING_STOPS = (
    r"because|but|since|when|whenever|if|though|although|too|any\s?more|so|which|who|while"
    r"|whereas|as|with|for|at|on|lately|nowadays|now|honestly|actually|especially"
    r"|particularly|mainly|except|a\s+lot|so\s+much|very\s+much|more\s+than|better\s+than"
    r"|than|i|you|he|she|they|we|it|these\s+days|right|every|sometimes|anyway|is|was|are"
    r"|were|has|have|had|will|would|can|could|btw|by\s+the\s+way|lol|haha|tbh|thanks|thank"
    r"|from\s+now\s+on|these|those|ever|/s|like|yet|then|nor"
    rf"|{TIME_STOPS}|{CHAT_FILLER}"
)
PREFER_STOPS = rf"{THING_STOPS}|over|to|rather|instead"
TOOL_STOPS = rf"{THING_STOPS}|to|in|daily|instead|from"

RELATIONS = (
    r"mother-in-law|father-in-law|sister-in-law|brother-in-law|daughter-in-law|son-in-law"
    r"|best\s+friend|wife|husband|hubby|spouse|partner|girlfriend|boyfriend|fianc[ée]e?"
    r"|son|daughter|kid|child|brother|sister|twin|mom|mum|mother|mommy|mama|dad|father"
    r"|daddy|papa|stepmom|stepdad|stepson|stepdaughter|grandma|grandmother|granny|nana"
    r"|grandpa|grandfather|grandson|granddaughter|aunt|uncle|cousin|niece|nephew|friend"
    r"|bestie|buddy|pal|roommate|flatmate|housemate|boss|manager|supervisor|coworker"
    r"|co-worker|colleague|cofounder|co-founder|mentor|therapist|neighbou?r|teammate"
    r"|dog|cat|puppy|kitten|pet"
)
_RELATION_MODIFIERS = (
    r"older|younger|little|big|baby|twin|eldest|oldest|youngest|new|dear|late|ex-?|step-?"
)
# Modifiers that change who the person is; "older" or "little" do not.
KEPT_RELATION_MODIFIERS: Final = frozenset({"ex", "step", "late"})
# One at a time: a new wife or manager replaces the old one; sisters and friends accumulate.
STATEFUL_RELATIONS: Final = word_set(
    "wife husband spouse partner girlfriend boyfriend fiance mother father boss manager "
    "supervisor therapist"
)
WORK_RELATIONS: Final = frozenset(
    {"boss", "manager", "supervisor", "coworker", "colleague", "cofounder", "mentor", "teammate"}
)
SOCIAL_RELATIONS: Final = frozenset(
    {"friend", "best_friend", "roommate", "flatmate", "housemate", "neighbor"}
)
PET_RELATIONS: Final = frozenset({"dog", "cat", "pet"})

_DEMONYMS: Final = word_set(
    "american canadian mexican british english scottish welsh irish french german italian "
    "spanish portuguese dutch swedish norwegian danish finnish polish russian ukrainian greek "
    "turkish chinese japanese korean vietnamese thai indian pakistani brazilian argentinian "
    "colombian peruvian chilean cuban australian african nigerian kenyan egyptian israeli "
    "iranian filipino asian european latino latina hispanic catholic christian jewish muslim "
    "hindu buddhist atheist mormon texan puerto"
)
# Capitalised words that start sentences or describe states, never a person's name.
NOT_NAMES: Final = _DEMONYMS | word_set(
    "the this that these those it he she they we you there here what who where when why how "
    "which everyone everybody someone somebody nobody people mom dad mum mother father "
    "grandma grandpa my our your his her their its one nothing something everything today "
    "tomorrow yesterday monday tuesday wednesday thursday friday saturday sunday january "
    "february march april may june july august september october november december also and "
    "but so yes no yeah ok okay well just thanks honestly actually maybe apparently now then "
    "still life work home both each most all some any many few another every either neither "
    "sure right hey hi hello please sorry fine good great back done ready busy tired happy "
    "sad glad excited afraid not in on at crazy old new going sick hungry exhausted proud dr "
    "mr mrs ms god kids"
)
# First words that make a place or employer slot something else: "I live in fear".
BAD_PLACE_FIRST: Final = word_set(
    "a an my our your his her their this that these those some home least fear hope denial "
    "peace it myself here there night nights free work bed school"
)
# Objects that point at the conversation, not at a durable thing: "I love that".
BAD_THINGS: Final = word_set(
    "it it's this that these those them him her you me us how what when where why which who "
    "idea thought fact way everything anything something nothing much lot stuff one ones "
    "myself yourself enough here there doing being too so very more less out well properly "
    "late right hearing seeing helping chatting talking anymore any again often lately now to "
    "all both no not never u ya em 'em dem dat dis yall y'all"
)
POINTING_WORDS: Final = word_set("this that these those it it's idea thought way")
# A liked thing that names something of the other speaker or of a pronoun ("your garden",
# "feeding them", "her paintings") is about someone the rules cannot name.
OTHER_OWNER_WORDS: Final = word_set(
    "you your yours you're he him his she her hers they them their theirs it its we us our ours "
    "u ur ya em 'em dem yall y'all"
)
# A value that holds one of these is a clause cut into, not a thing ("running and its been a").
CLAUSE_WORDS: Final = word_set(
    "is was are were be been being am has have had do does did will would can could should "
    "might must shall going gonna wanna got get gets"
)
# A value ending on one of these was cut mid-phrase ("the jokes and gadgets of").
DANGLING_WORDS: Final = word_set(
    "a an the of in on at to for with from by about into onto over under and or but nor my "
    "our your his her their its this that these those some any very so really just than as "
    "like such every each all"
)
# A hedge inside the value means the phrase runs on past the thing ("jazz maybe"): defer.
HEDGE_WORDS: Final = word_set("maybe perhaps probably possibly idk dunno")
# Quantities and placeholders name no thing ("the following", "a lot about it").
FILLER_WORDS: Final = word_set(
    "following lot lots bit kind sort way ways thing things stuff part parts rest idea"
)
# Words that end a liked thing cleanly; a preposition instead means the phrase goes on.
PHRASE_END_RE = re.compile(
    r"\s*(?:$|[,;:!?.…)\]\-–—]|(?i:because|but|since|so|though|tho|although|while|whereas"
    r"|when|whenever|if|as|too|lately|nowadays|honestly|actually|especially|anyway|anyways"
    r"|a\s+lot|so\s+much|very\s+much|more\s+than|than|sometimes|btw|lol|haha\w*|tbh|ever"
    r"|and\s+(?:i|my|we|it|that|this|they|he|she)|or\s+(?:i|my|we)|i|my|we|he|she|they|it"
    rf"|it['’]s|that['’]s|{CHAT_FILLER})(?![\w'’]))"
)
# Adverbials that qualify when or with whom, not what: "I love hiking on weekends".
QUALIFIER_RE = re.compile(
    rf"\s+(?i:on\s+(?:the\s+)?weekends|at\s+night|in\s+the\s+(?:morning|evening|afternoon)s?"
    rf"|every\s+(?:day|morning|evening|night|week|weekend|summer|winter)"
    rf"|in\s+my\s+(?:free|spare)\s+time|as\s+a\s+hobby|all\s+the\s+time"
    rf"|with\s+(?:my\s+)?(?:family|fam|friends|kids|{RELATIONS})s?)(?![\w'’])"
)
# Explicit correction wording (`corrections`): a correction replaces even a pinned memory, so
# only words that say an earlier statement was wrong, never "actually" or "sorry" alone.
# Words that may come before a cue without changing it: "Oh sorry, I misspoke".
_CORRECTION_BEFORE = (
    r"(?:(?:oh|oops|sorry|wait|sorry\s+about\s+that|apologies|ugh|um+|uh+)[\s,!.]*)*"
)
_CORRECTION_CUE = (
    r"(?:(?:a\s+|one\s+|quick\s+|small\s+|tiny\s+)?correction|i\s+misspoke|i\s+mis-?typed"
    r"|(?:that\s+was\s+a\s+)?typo|to\s+correct\s+myself|let\s+me\s+correct\s+(?:that|myself)"
    r"|scratch\s+that|actually\s*,?\s*no|no\s*,?\s*actually|no\s*,?\s*wait|wait\s*,?\s*no)"
)
# A clause that is only a cue; the split into clauses took the comma or colon after it.
CORRECTION_CUE_RE = re.compile(
    rf"(?i:{_CORRECTION_BEFORE}{_CORRECTION_CUE}(?:\s+(?:earlier|before))?)"
)
# A cue that opens the clause of its claim ("I meant I live in ...", "actually no my ..."), or
# is all of it.
CORRECTION_LEAD_RE = re.compile(
    rf"(?i:{_CORRECTION_BEFORE}(?:{_CORRECTION_CUE}|(?:what\s+)?i\s+meant(?:\s+to\s+say"
    r"|\s+was|\s+is)?))(?![\w'’])[\s,:]*(?:(?i:that)\s+)?(?=(?:I|i|[Mm]y|[Ww]e)\b|$)"
)
# A preference tied to this moment is not durable: "I love the sunshine today".
TRANSIENT_RE = re.compile(
    r"(?i:\b(?:today|tonight|yesterday|right\s+now|at\s+the\s+moment|so\s+far"
    r"|this\s+(?:morning|afternoon|evening|week|weekend)))\b"
)
FIRST_PERSON_WORDS: Final = word_set("i me my myself mine i'm i've i'd i'll")
COGNITION_VERBS: Final = frozenset({"think", "say", "believe", "imagine", "know", "hear", "see"})

# --------------------------------------------------------------------------------------------
# Building blocks
# --------------------------------------------------------------------------------------------

BE_SIMPLE = rf"(?:{APOS}m|{APOS}s|{APOS}re|\s+am|\s+is|\s+are)"
HAVE_BEEN = rf"(?:{APOS}ve|\s+have|{APOS}s|\s+has)\s+been"
BE = rf"(?:{HAVE_BEEN}|{BE_SIMPLE})"
ADV = rf"(?:\s+(?i:{_ADVERBS}))*"
END = (
    r"(?=\s*$|\s*[,;:)]|\s+(?i:and|but|by\s+the\s+way|btw|here|now|too|though|from"
    rf"|haha|lol|{CHAT_FILLER})\b)"
)
SUBJECT = rf"""(?:
      (?P<me>I|i)(?![\w])
    | (?P<we>(?i:we))(?![\w])
    | (?i:my)\s+(?P<relmod>(?i:{_RELATION_MODIFIERS})\s*)?(?P<rel>(?i:{RELATIONS}))
      (?:\s+(?P<relname>{NAME_TOKEN}(?:\s+{NAME_TOKEN})?))?
    | (?P<name>{NAME_TOKEN}(?:\s+{NAME_TOKEN})?)
)"""
RELATION = rf"(?P<relmod>(?i:{_RELATION_MODIFIERS})\s*)?(?P<rel>(?i:{RELATIONS}))"


def token_run(group: str, stops: str, max_tokens: int) -> str:
    """A run of up to max_tokens tokens that stops before a stop word or punctuation."""
    return rf"(?P<{group}>{_TOKEN}(?:\s+(?!(?i:{stops})(?![\w-])){_TOKEN}){{0,{max_tokens - 1}}})"


def list_run(group: str, stops: str, max_tokens: int) -> str:
    """Like token_run, but commas may join items: "hiking, biking, and swimming".

    An item after a comma may not open with a subject or determiner: ", and the audit slipped"
    starts a new clause, not another item.
    """
    clause = (
        r"(?!(?:(?i:and|or)\s+)?"
        r"(?i:the|my|our|your|his|her|their|we|i|he|she|they|it|this|that|there)(?![\w'-]))"
    )
    sep = rf"(?:\s*,\s*{clause}(?:(?i:and|or)\s+)?|\s+)"
    return rf"(?P<{group}>{_TOKEN}(?:{sep}(?!(?i:{stops})(?![\w-])){_TOKEN}){{0,{max_tokens - 1}}})"


def person_run(group: str, max_tokens: int, extra_stops: str = "") -> str:
    """A name of up to max_tokens words, lowercase allowed ("my name is marcus")."""
    stops = PLACE_STOPS + extra_stops
    token = _PERSON_TOKEN
    return rf"(?P<{group}>{token}(?:\s+(?!(?i:{stops})(?![\w-])){token}){{0,{max_tokens - 1}}})"


def place_run(group: str) -> str:
    # "Austin, Texas" keeps its region, but only when the region ends the clause.
    region = (
        rf"(?:,\s+[{_UP}]\w+(?:\s+[{_UP}]\w+)?(?=\s*$|\s*[,;]|\s+(?i:{PLACE_STOPS})(?![\w-])))?"
    )
    return rf"(?P<{group}>{token_run(group + '_core', PLACE_STOPS, 6)}{region})"


def verbose(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.VERBOSE)
