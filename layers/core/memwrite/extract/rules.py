"""Deterministic rule fast-path: the common simple first-person claims, without an LLM.

The turn is cut into sentences and clauses. Each clause is either a recognised claim (name,
age, job, employer, home, likes, dislikes, preferences, tools, allergies, diet, named
relations, standing instructions), a question, a pleasantry, a guarded statement
(hypothetical, role-play, sarcasm), or something the rules do not understand. Only in the
last case is the turn not *fully covered*, and the caller hands it to the LLM (or records it
as deferred when offline). Precision beats recall here: a clause the rules half-understand
is left to the LLM rather than guessed.

The regexes work on the original text (rewrites only delete words), so every value is a
verbatim slice of what the user wrote.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from pydantic import ValidationError

from memwrite.candidate import USER_ENTITY, Candidate, MemoryType, Quality, SourceSpan
from memwrite.relations import RELATION_SYNONYMS
from memwrite.scoring import WordingCue, wording_confidence, wording_cues

__all__ = ["RuleExtraction", "extract_with_rules"]

logger = logging.getLogger(__name__)

CONFIDENCE_EXPLICIT: Final = 0.9
# DESIGN.md section 2: hypotheticals, role-play, sarcasm and "basically" framings get <= 0.3.
CONFIDENCE_GUARDED: Final = 0.3
# A clause (or the unmatched rest of one) this long may carry knowledge the rules missed.
MIN_UNCOVERED_WORDS: Final = 4
MAX_INSTRUCTION_CHARS: Final = 200
MAX_AGE: Final = 120

REASON_EXPLICIT: Final = "explicit statement"
REASON_HYPOTHETICAL: Final = "hypothetical"
REASON_ROLE_PLAY: Final = "role_play"
REASON_SARCASM: Final = "sarcasm"


@dataclass(frozen=True)
class RuleExtraction:
    """What the rules found in one turn, and whether they understood all of it."""

    candidates: tuple[Candidate, ...]
    fully_covered: bool


# --------------------------------------------------------------------------------------------
# Vocabulary
# --------------------------------------------------------------------------------------------


def _word_set(words: str) -> frozenset[str]:
    return frozenset(words.split())


_APOS = "['’]"
_UP = "A-ZÀ-ÖØ-Þ"
_LO = "a-zß-öø-ÿ"
# Marcus, O'Neil, McDonald, Mary-Jane, José; a lone "I" is not a name.
_NAME_TOKEN = (
    rf"[{_UP}](?:[{_LO}]+(?:[{_UP}][{_LO}]+)?|{_APOS}[{_UP}][{_LO}]+)(?:-[{_UP}]?[{_LO}]+)?"
)
_TITLE_NAME = rf"{_NAME_TOKEN}(?:\s+{_NAME_TOKEN}){{0,2}}"
_TOKEN = r"[^\s,;:!?()\[\]{}\"“”]+"
_PERSON_TOKEN = r"[^\W\d_][\w'’.\-]*"

_ADVERBS = (
    r"just|recently|actually|currently|really|also|still|now|totally|truly|honestly|genuinely"
    r"|absolutely|definitely|mostly|usually|generally|finally|officially|already|even|only"
    r"|originally|kind\s+of|sort\s+of|kinda|sorta|do|does|happily|proudly|very|so"
)
# Words that end a place, employer or role: "I live in Berlin with my wife" -> "Berlin".
_PLACE_STOPS = (
    r"with|for|since|because|now|any\s?more|any|these|currently|right|at|on|in|near|by|from"
    r"|and|but|so|who|which|where|when|while|as|though|too|after|before|until|if|during|last"
    r"|this|next|ago|today|tonight|yesterday|tomorrow|recently|lately|full-time|part-time"
    r"|remotely|it|that|to|or|every|all|again|already|also|still|both|nowadays|temporarily"
    r"|permanently|alone|together|a|an|is|was|are|were|has|have|had|will|would|can|could"
    r"|i|my|our|his|her|their|btw|lol|haha|full\s+time|part\s+time|/s|originally"
)
# Words that end a liked thing, an allergen or a food: "I love jazz because ..." -> "jazz".
_THING_STOPS = (
    r"because|but|since|when|whenever|if|though|although|too|any\s?more|so|which|who|while"
    r"|whereas|as|with|for|at|on|lately|nowadays|now|honestly|actually|especially"
    r"|particularly|mainly|except|a\s+lot|so\s+much|very\s+much|more\s+than|better\s+than"
    r"|than|i|you|he|she|they|we|it|these\s+days|right|every|sometimes|anyway|is|was|are"
    r"|were|has|have|had|will|would|can|could|btw|by\s+the\s+way|lol|haha|tbh|thanks|thank"
    r"|from\s+now\s+on|these|those|ever|/s|like"
)
_PREFER_STOPS = rf"{_THING_STOPS}|over|to|rather|instead"
_TOOL_STOPS = rf"{_THING_STOPS}|to|in|daily|instead|from"

_RELATIONS = (
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
_KEPT_RELATION_MODIFIERS: Final = frozenset({"ex", "step", "late"})
# One at a time: a new wife or manager replaces the old one; sisters and friends accumulate.
_STATEFUL_RELATIONS: Final = _word_set(
    "wife husband spouse partner girlfriend boyfriend fiance mother father boss manager "
    "supervisor therapist"
)
_WORK_RELATIONS: Final = frozenset(
    {"boss", "manager", "supervisor", "coworker", "colleague", "cofounder", "mentor", "teammate"}
)
_SOCIAL_RELATIONS: Final = frozenset(
    {"friend", "best_friend", "roommate", "flatmate", "housemate", "neighbor"}
)
_PET_RELATIONS: Final = frozenset({"dog", "cat", "pet"})

_OCCUPATIONS = (
    r"nurse|doctor|physician|surgeon|dentist|pharmacist|paramedic|midwife|veterinarian|vet"
    r"|therapist|psychologist|psychiatrist|counsel(?:l)?or|teacher|professor|lecturer|tutor"
    r"|principal|librarian|student|researcher|scientist|engineer|developer|programmer|coder"
    r"|architect|designer|analyst|consultant|accountant|auditor|lawyer|attorney|paralegal"
    r"|judge|banker|broker|trader|realtor|agent|manager|director|executive|ceo|cto|cfo|coo"
    r"|founder|entrepreneur|freelancer|contractor|intern|chef|cook|baker|barista|bartender"
    r"|waiter|waitress|server|cashier|driver|pilot|mechanic|electrician|plumber|carpenter"
    r"|builder|welder|technician|firefighter|officer|detective|soldier|sailor|farmer"
    r"|writer|author|journalist|reporter|editor|photographer|artist|painter|illustrator"
    r"|animator|musician|singer|actor|actress|producer|filmmaker|translator|interpreter"
    r"|economist|statistician|mathematician|physicist|chemist|biologist|geologist"
    r"|astronomer|recruiter|salesperson|marketer|copywriter|administrator|clerk|secretary"
    r"|receptionist|assistant|caregiver|nanny|janitor|housekeeper|coach|trainer|instructor"
    r"|practitioner|specialist|technologist|surveyor|dietitian|nutritionist|optometrist"
    r"|radiologist|anesthesiologist|dermatologist|pediatrician|sysadmin|devops|streamer"
    r"|youtuber|influencer|blogger|podcaster|miner|fisherman|planner|strategist|investor"
)
_DIETS = (
    r"lacto-ovo\s+vegetarian|vegan|vegetarian|veggie|pescatarian|pescetarian|keto|paleo"
    r"|plant-based|gluten-free|dairy-free|flexitarian|kosher|halal|carnivore"
)
# "I'm a terrible cook" is a skill, "an aspiring writer" a wish: neither is a job.
_EVALUATIVE = (
    r"terrible|bad|good|great|decent|horrible|awful|amazing|excellent|poor|lousy|better|worse"
    r"|best|worst|huge|big|total|complete|natural|born|wannabe|aspiring|frustrated|failed"
    r"|closet|amateur|hobby|weekend|armchair|backseat|would-be|budding"
)
_DIET_NOUNS = (
    r"food|restaurant|place|options?|recipes?|dish|meals?|cook|chef|blogger|cooking|spot"
    r"|friendly|stall|truck|bakery|cafe|version"
)
_DEMONYMS: Final = _word_set(
    "american canadian mexican british english scottish welsh irish french german italian "
    "spanish portuguese dutch swedish norwegian danish finnish polish russian ukrainian greek "
    "turkish chinese japanese korean vietnamese thai indian pakistani brazilian argentinian "
    "colombian peruvian chilean cuban australian african nigerian kenyan egyptian israeli "
    "iranian filipino asian european latino latina hispanic catholic christian jewish muslim "
    "hindu buddhist atheist mormon texan puerto"
)
# Capitalised words that start sentences or describe states, never a person's name.
_NOT_NAMES: Final = _DEMONYMS | _word_set(
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
_BAD_PLACE_FIRST: Final = _word_set(
    "a an my our your his her their this that these those some home least fear hope denial "
    "peace it myself here there night nights free work bed school"
)
# "I'm from IT" names a department, not a hometown.
_DEPARTMENTS: Final = _word_set(
    "it hr pr qa ops sales marketing finance legal support engineering accounting"
)
# Objects that point at the conversation, not at a durable thing: "I love that".
_BAD_THINGS: Final = _word_set(
    "it it's this that these those them him her you me us how what when where why which who "
    "idea thought fact way everything anything something nothing much lot stuff one ones "
    "myself yourself enough here there doing being too so very more less out well properly "
    "late right hearing seeing helping chatting talking anymore any again often lately now to "
    "all both no not never"
)
_POINTING_WORDS: Final = _word_set("this that these those it it's idea thought way")
# A liked thing that names something of the other speaker or of a pronoun ("your garden",
# "feeding them", "her paintings") is about someone the rules cannot name.
_OTHER_OWNER_WORDS: Final = _word_set(
    "you your yours you're he him his she her hers they them their theirs it its we us our ours"
)
# A value that holds one of these is a clause cut into, not a thing ("running and its been a").
_CLAUSE_WORDS: Final = _word_set(
    "is was are were be been being am has have had do does did will would can could should "
    "might must shall going gonna wanna got get gets"
)
# A value ending on one of these was cut mid-phrase ("the jokes and gadgets of").
_DANGLING_WORDS: Final = _word_set(
    "a an the of in on at to for with from by about into onto over under and or but nor my "
    "our your his her their its this that these those some any very so really just than as "
    "like such every each all"
)
# A hedge inside the value means the phrase runs on past the thing ("jazz maybe"): defer.
_HEDGE_WORDS: Final = _word_set("maybe perhaps probably possibly idk dunno")
# Quantities and placeholders name no thing ("the following", "a lot about it").
_FILLER_WORDS: Final = _word_set(
    "following lot lots bit kind sort way ways thing things stuff part parts rest idea"
)
# Words that end a liked thing cleanly; a preposition instead means the phrase goes on.
_PHRASE_END_RE = re.compile(
    r"\s*(?:$|[,;:!?.…)\]\-–—]|(?i:because|but|since|so|though|tho|although|while|whereas"
    r"|when|whenever|if|as|too|lately|nowadays|honestly|actually|especially|anyway|anyways"
    r"|a\s+lot|so\s+much|very\s+much|more\s+than|than|sometimes|btw|lol|haha\w*|tbh|ever"
    r"|and\s+(?:i|my|we|it|that|this|they|he|she)|or\s+(?:i|my|we)|i|my|we|he|she|they|it"
    r"|it['’]s|that['’]s)(?![\w'’]))"
)
# Adverbials that qualify when or with whom, not what: "I love hiking on weekends".
_QUALIFIER_RE = re.compile(
    rf"\s+(?i:on\s+(?:the\s+)?weekends|at\s+night|in\s+the\s+(?:morning|evening|afternoon)s?"
    rf"|every\s+(?:day|morning|evening|night|week|weekend|summer|winter)"
    rf"|in\s+my\s+(?:free|spare)\s+time|as\s+a\s+hobby|all\s+the\s+time"
    rf"|with\s+(?:my\s+)?(?:family|fam|friends|kids|{_RELATIONS})s?)(?![\w'’])"
)
# A preference tied to this moment is not durable: "I love the sunshine today".
_TRANSIENT_RE = re.compile(
    r"(?i:\b(?:today|tonight|yesterday|right\s+now|at\s+the\s+moment|so\s+far"
    r"|this\s+(?:morning|afternoon|evening|week|weekend)))\b"
)
_FIRST_PERSON_WORDS: Final = _word_set("i me my myself mine i'm i've i'd i'll")
_BASE_FORM_VERBS: Final = _word_set(
    "love like enjoy adore hate dislike detest loathe despise do can cannot"
)
_COGNITION_VERBS: Final = frozenset({"think", "say", "believe", "imagine", "know", "hear", "see"})
# Verbs that describe what an assistant does; "never give up" is a motto, not an instruction.
_ASSISTANT_VERBS: Final = _word_set(
    "answer reply respond use call mention say write talk speak include add format remind ask "
    "suggest recommend show tell be keep put refer address list explain summarize summarise "
    "translate cite send sign end start begin avoid check double-check confirm spell convert "
    "round default switch assume"
)
# Verbs that only ever describe the assistant's answers; the others ("say", "keep", "be") make
# an instruction only when it is addressed or names the output: "never say never" is an idiom.
_OUTPUT_VERBS: Final = _word_set("answer reply respond format summarize summarise translate cite")
_ADDRESSEE_RE = re.compile(
    r"(?i:\b(?:me|my|i|you|your|answers?|responses?|repl(?:y|ies)|messages?|emails?|code"
    r"|summar(?:y|ies)|lists?|bullets?|bullet\s+points|emojis?|units|formatting|tone|words"
    r"|jargon|sources|citations|examples|links|dates|times|currency|language|english)\b)"
)
_ABBREVIATIONS: Final = frozenset(
    {"mr", "mrs", "ms", "dr", "st", "mt", "ft", "jr", "sr", "prof", "vs", "etc", "e.g", "i.e"}
)
# Company suffixes end a sentence only when a capital follows ("Acme Corp. I love it").
# Enough characters before a full stop to see the word it ends.
_ABBREVIATION_WINDOW: Final = 40
# An opening quote with no close this near is an apostrophe or a typo, not a quotation.
_MAX_QUOTE_CHARS: Final = 500
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

_TOPIC_FAMILY: Final = "family"

# --------------------------------------------------------------------------------------------
# Building blocks
# --------------------------------------------------------------------------------------------

_BE_SIMPLE = rf"(?:{_APOS}m|{_APOS}s|{_APOS}re|\s+am|\s+is|\s+are)"
_HAVE_BEEN = rf"(?:{_APOS}ve|\s+have|{_APOS}s|\s+has)\s+been"
_BE = rf"(?:{_HAVE_BEEN}|{_BE_SIMPLE})"
_ADV = rf"(?:\s+(?i:{_ADVERBS}))*"
_END = (
    r"(?=\s*$|\s*[,;:)]|\s+(?i:and|but|by\s+the\s+way|btw|here|now|too|though|from"
    r"|haha|lol)\b)"
)
_SUBJECT = rf"""(?:
      (?P<me>I|i)(?![\w])
    | (?P<we>(?i:we))(?![\w])
    | (?i:my)\s+(?P<relmod>(?i:{_RELATION_MODIFIERS})\s*)?(?P<rel>(?i:{_RELATIONS}))
      (?:\s+(?P<relname>{_NAME_TOKEN}(?:\s+{_NAME_TOKEN})?))?
    | (?P<name>{_NAME_TOKEN}(?:\s+{_NAME_TOKEN})?)
)"""
_RELATION = rf"(?P<relmod>(?i:{_RELATION_MODIFIERS})\s*)?(?P<rel>(?i:{_RELATIONS}))"


def _value(group: str, stops: str, max_tokens: int) -> str:
    """A run of up to max_tokens tokens that stops before a stop word or punctuation."""
    return rf"(?P<{group}>{_TOKEN}(?:\s+(?!(?i:{stops})(?![\w-])){_TOKEN}){{0,{max_tokens - 1}}})"


def _list_value(group: str, stops: str, max_tokens: int) -> str:
    """Like _value, but commas may join items: "hiking, biking, and swimming".

    An item after a comma may not open with a subject or determiner: ", and the audit slipped"
    starts a new clause, not another item.
    """
    clause = (
        r"(?!(?:(?i:and|or)\s+)?"
        r"(?i:the|my|our|your|his|her|their|we|i|he|she|they|it|this|that|there)(?![\w'-]))"
    )
    sep = rf"(?:\s*,\s*{clause}(?:(?i:and|or)\s+)?|\s+)"
    return rf"(?P<{group}>{_TOKEN}(?:{sep}(?!(?i:{stops})(?![\w-])){_TOKEN}){{0,{max_tokens - 1}}})"


def _person(group: str, max_tokens: int, extra_stops: str = "") -> str:
    """A name of up to max_tokens words, lowercase allowed ("my name is marcus")."""
    stops = _PLACE_STOPS + extra_stops
    token = _PERSON_TOKEN
    return rf"(?P<{group}>{token}(?:\s+(?!(?i:{stops})(?![\w-])){token}){{0,{max_tokens - 1}}})"


def _place(group: str) -> str:
    # "Austin, Texas" keeps its region, but only when the region ends the clause.
    region = (
        rf"(?:,\s+[{_UP}]\w+(?:\s+[{_UP}]\w+)?(?=\s*$|\s*[,;]|\s+(?i:{_PLACE_STOPS})(?![\w-])))?"
    )
    return rf"(?P<{group}>{_value(group + '_core', _PLACE_STOPS, 6)}{region})"


def _compile(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.VERBOSE)


# --------------------------------------------------------------------------------------------
# Claim patterns (anchored at the start of a clause body)
# --------------------------------------------------------------------------------------------

_SUBJECT_RE = _compile(_SUBJECT)
_BE_SIMPLE_RE = _compile(_BE_SIMPLE)
# "and" followed by a verb phrase, not by a new subject (the clause splitter took those).
_CONTINUATION_RE = re.compile(r"\s*,?\s*(?i:and)\s+(?!(?:I|i|[Mm]y|[Ww]e)\b)")

_MY_NAME_RE = _compile(
    rf"""(?i:my)\s+(?:(?i:full|real|first)\s+)?(?i:name)(?:\s+(?i:is)|{_APOS}s)\s+
    {_person("value", 4)}"""
)
_CALL_ME_RE = _compile(
    rf"""(?:(?i:you\s+can|please|just|everyone|people|friends|they)\s+)?
    (?:(?i:call|calls)\s+(?i:me)|(?:I|i)\s+(?i:go)\s+(?i:by))\s+
    {_person("value", 3, "|please|instead")}"""
)
_I_AM_NAME_RE = _compile(
    rf"""(?:I|i)(?:{_APOS}m|\s+am)\s+(?P<value>{_TITLE_NAME})
    (?:\s+(?i:from)\s+{_place("place")})?{_END}"""
)
_RELATION_NAMED_RE = _compile(
    rf"""(?i:my)\s+{_RELATION}
    (?:{_APOS}s\s+(?i:name)(?:\s+(?i:is)|{_APOS}s)|\s+(?i:is)\s+(?i:named|called)
       |\s+(?i:named|called|goes\s+by))\s+
    {_person("value", 3)}"""
)
_RELATION_IS_RE = _compile(
    rf"""(?i:my)\s+{_RELATION}(?:\s+(?i:is)|{_APOS}s)\s+(?P<value>{_TITLE_NAME}){_END}"""
)
_AGE_RE = _compile(
    rf"""{_SUBJECT}(?:{_BE_SIMPLE}{_ADV}\s+|{_ADV}\s+(?i:just\s+)?(?i:turned)\s+)
    (?P<value>\d{{1,3}})(?:\s+(?i:years?\s+old|yrs?\s+old|y/?o))?{_END}"""
)
_ALLERGY_RE = _compile(
    rf"""{_SUBJECT}{_BE}{_ADV}\s+
    (?:(?i:severely|very|deathly|highly|mildly|super|extremely|slightly)\s+)?
    (?i:allergic)\s+(?i:to)\s+{_list_value("value", _THING_STOPS, 8)}"""
)
_ALLERGY_HAVE_RE = _compile(
    rf"""{_SUBJECT}(?:{_APOS}ve\s+(?i:got)|{_ADV}\s+(?i:have|has)(?:\s+(?i:got))?)\s+(?i:an?)\s+
    (?:(?i:severe|mild|bad|serious|deadly)\s+)?(?P<value>[\w-]+(?:\s+[\w-]+)?)\s+(?i:allergy)"""
)
_INTOLERANCE_RE = _compile(rf"""{_SUBJECT}{_BE}{_ADV}\s+(?P<value>[\w-]+)\s+(?i:intolerant)""")
_DIET_IS_RE = _compile(
    rf"""{_SUBJECT}{_BE}{_ADV}\s+(?:(?i:an?)\s+)?
    (?:(?i:strict|strictly|fully|full|mostly|100%|completely)\s+)?(?P<value>(?i:{_DIETS}))
    (?![\w-])(?!\s+(?i:{_DIET_NOUNS})\b)"""
)
_DIET_ON_RE = _compile(
    rf"""{_SUBJECT}{_BE_SIMPLE}{_ADV}\s+(?i:on)\s+(?:(?i:an?)\s+)?(?:(?i:strict)\s+)?
    (?P<value>(?i:{_DIETS}|low-carb|low\s+carb|low-fat|low\s+fat|low-sodium|mediterranean
       |whole30|dash))\s+(?i:diet)"""
)
_DIET_BECAME_RE = _compile(
    rf"""{_SUBJECT}
    (?:(?:{_APOS}ve|\s+have|{_APOS}s|\s+has){_ADV}\s+(?i:gone|become|decided\s+to\s+go
         |decided\s+to\s+become)
      |{_ADV}\s+(?i:went|became|eat|eats|keep|keeps|decided\s+to\s+go|decided\s+to\s+become))
    \s+(?:(?i:fully|full|completely|100%|strictly|strict)\s+)?(?P<value>(?i:{_DIETS}))(?![\w-])"""
)
_NOT_EAT_RE = _compile(
    rf"""{_SUBJECT}{_ADV}\s+
    (?P<verb>(?i:do(?:n{_APOS}?t|\s+not)|does(?:n{_APOS}?t|\s+not)|never|can{_APOS}?t|cannot
       |can\s+not))\s+(?P<food>(?i:eat|eats|drink|drinks))\s+
    {_list_value("value", _THING_STOPS, 6)}"""
)
# "I'm not a fan of", "I'm not really into": a dislike, not a retraction of a like.
_DISLIKES_FAN_RE = _compile(
    rf"""{_SUBJECT}{_BE_SIMPLE}\s+(?i:not|no)\s+
    (?:(?i:really|that|too|very|exactly|all\s+that)\s+)?
    (?:(?i:an?)\s+)?(?:(?i:big|huge|great|real)\s+)?
    (?P<verb>(?i:fan\s+of|into|big\s+on|keen\s+on|crazy\s+about))\s+
    {_list_value("value", _THING_STOPS, 6)}"""
)
_DISLIKES_RE = _compile(
    rf"""{_SUBJECT}{_ADV}\s+
    (?P<verb>(?i:hate|hates|dislike|dislikes|detest|detests|loathe|loathes|despise|despises
       |can{_APOS}?t\s+stand|cannot\s+stand|can\s+not\s+stand
       |do(?:n{_APOS}?t|\s+not)\s+(?:really\s+)?(?:like|enjoy)
       |does(?:n{_APOS}?t|\s+not)\s+(?:really\s+)?(?:like|enjoy)))\s+
    (?P<inf>(?i:to)\s+)?{_list_value("value", _THING_STOPS, 6)}"""
)
_LIKES_FAN_RE = _compile(
    rf"""{_SUBJECT}{_BE}{_ADV}\s+
    (?P<verb>(?i:(?:an?\s+)?(?:(?:big|huge|massive|great|real|total|die-hard|diehard)\s+)?fan
       \s+of|into|obsessed\s+with|passionate\s+about|crazy\s+about|a\s+lover\s+of))\s+
    {_list_value("value", _THING_STOPS, 6)}"""
)
_LIKES_RE = _compile(
    rf"""{_SUBJECT}{_ADV}\s+(?P<verb>(?i:love|loves|like|likes|enjoy|enjoys|adore|adores))\s+
    (?P<inf>(?i:to)\s+)?{_list_value("value", _THING_STOPS, 6)}"""
)
_PREFERS_RE = _compile(
    rf"""{_SUBJECT}{_ADV}\s+(?i:prefer|prefers)\s+(?P<inf>(?i:to)\s+)?
    {_value("value", _PREFER_STOPS, 6)}
    (?P<rest>\s+(?i:over|to|rather\s+than|instead\s+of|than)\s+
       {_value("other", _THING_STOPS, 6)})?"""
)
_USES_RE = _compile(
    rf"""{_SUBJECT}
    (?:{_HAVE_BEEN}{_ADV}\s+(?i:using)|{_BE_SIMPLE}{_ADV}\s+(?i:using)
      |{_ADV}\s+(?i:use|uses|rely\s+on|relies\s+on|switched\s+to))\s+
    {_value("value", _TOOL_STOPS, 5)}"""
)
_MOVED_FROM_TO_RE = _compile(
    rf"""{_SUBJECT}{_ADV}\s+(?i:moved|relocated)\s+(?i:from)\s+{_place("old")}\s+(?i:to)\s+
    {_place("value")}"""
)
_MOVED_AWAY_RE = _compile(
    rf"""{_SUBJECT}{_ADV}\s+(?i:moved|relocated)\s+(?i:away\s+from|out\s+of)\s+{_place("value")}"""
)
_LIVES_IN_RE = _compile(
    rf"""{_SUBJECT}
    (?:{_HAVE_BEEN}{_ADV}\s+(?i:living)
      |{_BE_SIMPLE}{_ADV}\s+(?i:living|based|settled|located)
      |{_ADV}\s+(?i:live|lives|reside|resides|moved|relocated)(?:\s+(?i:back|here|over))?)
    \s+(?i:in|to|out\s+of)\s+{_place("value")}"""
)
_HOMETOWN_RE = _compile(
    rf"""{_SUBJECT}
    (?:{_BE_SIMPLE}{_ADV}\s+(?i:from)
      |{_ADV}\s+(?i:grew\s+up\s+in|was\s+born\s+in|come\s+from|comes\s+from))\s+{_place("value")}"""
)
_QUIT_JOB_RE = _compile(
    rf"""{_SUBJECT}{_ADV}\s+
    (?:(?i:quit|left)\s+(?i:my|his|her|their)\s+(?i:job)\s+(?i:at|with)
      |(?i:stopped)\s+(?i:working)\s+(?i:at|for)|(?i:quit))\s+
    {_value("value", _PLACE_STOPS, 6)}"""
)
_WORKS_AT_RE = _compile(
    rf"""{_SUBJECT}
    (?:{_HAVE_BEEN}{_ADV}\s+(?i:working|employed)
      |{_BE_SIMPLE}{_ADV}\s+(?i:working|employed|interning)
      |{_ADV}\s+(?i:work|works|intern|interns))
    \s+(?i:at|for)\s+{_value("value", _PLACE_STOPS, 6)}
    (?:\s+(?i:as)\s+(?:(?i:an?)\s+)?{_value("occ", _PLACE_STOPS, 5)})?"""
)
_WORKS_AS_RE = _compile(
    rf"""{_SUBJECT}
    (?:{_HAVE_BEEN}{_ADV}\s+(?i:working)|{_BE_SIMPLE}{_ADV}\s+(?i:working)
      |{_ADV}\s+(?i:work|works))
    \s+(?i:as)\s+(?:(?i:an?)\s+)?{_value("value", _PLACE_STOPS, 5)}
    (?:\s+(?i:at|for)\s+{_value("org", _PLACE_STOPS, 6)})?"""
)
_OCCUPATION_RE = _compile(
    rf"""{_SUBJECT}{_BE}{_ADV}\s+(?i:an?)\s+
    (?P<value>(?:(?!(?i:of|at|for|in|with|and|the|to|from|fan|{_EVALUATIVE})\b)[\w'’-]+\s+){{0,3}}
       (?i:{_OCCUPATIONS})s?)(?![\w'’-])
    (?:\s+(?i:at|for)\s+{_value("org", _PLACE_STOPS, 6)})?"""
)
_EMPLOYMENT_RE = _compile(
    rf"""{_SUBJECT}{_BE}{_ADV}\s+
    (?P<value>(?i:retired|unemployed|self-employed|between\s+jobs
       |a\s+stay-at-home\s+(?:mom|dad|parent))){_END}"""
)
_MARRIED_RE = _compile(
    rf"""{_SUBJECT}{_BE}{_ADV}\s+(?P<state>(?i:married|engaged))\s+(?i:to)\s+
    (?P<value>{_TITLE_NAME}){_END}"""
)
_FAVORITE_RE = _compile(
    rf"""(?i:my)\s+(?i:favou?rite)\s+(?P<what>[a-zA-Z]+(?:\s+[a-zA-Z]+)?)\s+(?i:is)\s+
    {_value("value", _THING_STOPS, 5)}"""
)

# Relation names found anywhere in a clause: "I had lunch with my sister Ana".
_RELATION_APPOSITION_RE = _compile(
    rf"""(?<![\w])(?i:my)\s+{_RELATION}\s+(?P<value>{_NAME_TOKEN}(?:\s+{_NAME_TOKEN})?)"""
)

# --------------------------------------------------------------------------------------------
# Clause structure, questions, guards and filler
# --------------------------------------------------------------------------------------------

_SENTENCE_BREAK_RE = re.compile(r"[.!?…]+[\"'”’)\]]*(?=\s|$)|\n+|;|\s+[-–—]+\s+|[—–]")
_WORD_BEFORE_RE = re.compile(r"([\w.]+)$")
_CLAUSE_BREAK_RE = _compile(
    r"""
      ,\s*(?:(?i:and|but|so)\s+)?(?=(?:I|i|[Mm]y|[Ww]e)\b)
    | \s+(?i:and|so)\s+(?=(?:I|i|my|we)\b)
    | ,?\s+(?i:but)\s+
    | ,\s*(?=(?i:what|where|who|how|why|when|which|do\s+you|did\s+you|can\s+you|could\s+you
              |would\s+you|will\s+you|any\s+(?:tips|ideas|suggestions))\b)
    | :\s+
    """
)
_TRIM_CHARS = " \t\r\n.,!?;:…\"'”“’‘()[]-–—*"
_INITIALS_END_RE = re.compile(r"(?:[A-Z]\.){2,}$")

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
_ROLE_PLAY_RE = re.compile(
    r"(?i:role[\s-]?play|\brp\b|in\s+character|let['’]s\s+play\s+a\s+game|\bact\s+as\b"
    r"|you\s+are\s+now|pretend\s+(?:to\s+be|you['’]re|you\s+are))"
)
_SARCASM_RE = re.compile(r"(?:^|\s)/s\b|(?i:\byeah,?\s+right\b|\bsure,?\s+jan\b)")
_SUBJUNCTIVE_RE = re.compile(
    r"\b(?P<subj>I|i|we|We)\s+(?P<verb>(?i:lived|worked|was|were|had|used|loved|liked|hated))\b"
)

_NEGATION_PRESENT_RE = re.compile(
    rf"(?i:\bdo(?:n{_APOS}?t|\s+not)\b|\bdoes(?:n{_APOS}?t|\s+not)\b|\bno\s+longer\b|\bnot\b"
    rf"|\bis(?:n{_APOS}?t)\b|\bare(?:n{_APOS}?t)\b|\bany\s?more\b)"
)
_NEGATION_DO_RE = re.compile(rf"\b(?i:do|does)(?:\s+not|n{_APOS}?t)\s+")
_NEGATION_NO_LONGER_RE = re.compile(r"\s*\b(?i:no\s+longer)\b")
_NEGATION_BE_RE = re.compile(
    rf"(?P<be>{_APOS}m|\s+am|{_APOS}s|\s+is|{_APOS}re|\s+are|{_APOS}ve\s+been|\s+has\s+been)"
    r"\s+(?i:not|no\s+longer)\b"
)
_NEGATION_BE_CONTRACTED_RE = re.compile(rf"\b(?P<be>(?i:is|are))n{_APOS}?t\b")
_NEGATION_ANYMORE_RE = re.compile(r"\s+(?i:any\s?more)\b")
_RETRACTION_RE = re.compile(r"(?i:\bno\s+longer\b|\bany\s?more\b)")

_QUESTION_START_RE = re.compile(
    r"(?i:(?:do|does|did|is|are|am|was|were|can|could|would|will|should|shall|have|has|may"
    r"|might)\s+(?:i|you|we|they|it|he|she|there|my|your|this|that|the)\b"
    r"|(?:what|where|who|how|why|when|which)(?:['’]s|\s+(?:do|does|did|is|are|was|were|can"
    r"|could|should|would|will|shall|might|may)\b))"
)
_FIRST_PERSON_START_RE = re.compile(r"(?:I|i|[Mm]y|[Ww]e)\b")
_INSTRUCTION_QUESTION_RE = re.compile(r"(?i:can|could|would|will)\s+(?i:you)\s+(?:(?i:please)\s+)?")
_INSTRUCTION_LEAD_RE = re.compile(
    r"(?i:from\s+now\s+on|going\s+forward|moving\s+forward|in\s+(?:the\s+)?future|henceforth"
    r"|for\s+future\s+reference)\s*,?\s*"
)
_INSTRUCTION_ASK_RE = re.compile(
    r"(?i:(?:i\s+want|i['’]d\s+like|i\s+would\s+like|i\s+need)\s+you\s+to|please)\s+"
)
# Cues anywhere in the clause that make an imperative standing rather than one-off.
_INSTRUCTION_DURABLE_RE = re.compile(
    r"(?i:\b(?:from\s+now\s+on|henceforth|every\s+time|in\s+(?:the\s+)?future|any\s?more)\b)"
)
_FROM_NOW_ON_RE = re.compile(r"(?i:now\s+on|forward|future)")
_INSTRUCTION_BODY_RE = re.compile(
    rf"(?:(?i:always|never|don{_APOS}?t\s+ever|do\s+not\s+ever|don{_APOS}?t|do\s+not|stop|only"
    rf"|just)\s+)*(?P<verb>[A-Za-z]+)\b"
)
_DECLARATIVE_NEXT_RE = re.compile(
    rf"(?:{_APOS}s|\s+(?i:is|are|was|were|has|have|had|will|would|can|could|should|does|did"
    r"|said|says))\b"
)
_INSTRUCTION_NEVER_RE = re.compile(rf"^(?i:don{_APOS}?t|do\s+not)(?:\s+(?i:ever))?\b")
_INSTRUCTION_TRAILER_RE = re.compile(
    r"(?:\s*,?\s*(?i:from\s+now\s+on|going\s+forward|moving\s+forward|please|thanks"
    r"|thank\s+you|any\s?more|in\s+(?:the\s+)?future))+$"
)
_FIRST_PERSON_SHIFTS: Final[tuple[tuple[re.Pattern[str], str], ...]] = (
    (re.compile(rf"\bI{_APOS}m\b|\bI\s+am\b", re.IGNORECASE), "the user is"),
    (re.compile(r"\bmy\b|\bmine\b", re.IGNORECASE), "the user's"),
    (re.compile(r"\bme\b|\bmyself\b", re.IGNORECASE), "the user"),
    (re.compile(r"\bI\b"), "the user"),
)

_SPACES_RE = re.compile(r"\s+")
_CAPITAL_I_RE = re.compile(r"\bI\b")
_CAPITAL_NEXT_RE = re.compile(r"\s+[A-Z]")
_INITIALS_RE = re.compile(r"(?:[a-z]\.)+[a-z]")
_TRAILING_CONJUNCTION_RE = re.compile(r"[\s,]+(?i:and|or)$")
_LIST_END_RE = re.compile(r"(?:,\s*|\s+)(?i:and|or)\s+[^,]+$")
_QUOTE_OPEN_RE = re.compile(r"(?<![\w])['‘\"“](?=\w)")
_QUOTE_CLOSE: Final[dict[str, re.Pattern[str]]] = {
    "'": re.compile(r"(?<=[\w.!?,])'(?![\w])"),
    "‘": re.compile(r"’(?![\w])"),
    '"': re.compile(r'"'),
    "“": re.compile(r"”"),
}
_RELATION_WORD_RE = re.compile(rf"(?i:{_RELATIONS})s?")
_FULL_NAME_RE = re.compile(rf"{_NAME_TOKEN}(?:\s+{_NAME_TOKEN}){{1,3}}")
_LIST_SPLIT_RE = re.compile(r"\s*,\s*(?:(?i:and|or)\s+)?")
_LIST_SPLIT_WORDS_RE = re.compile(r"\s*,\s*(?:(?i:and|or)\s+)?|\s+(?i:and|or)\s+")
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
# Adverbs left over around a matched claim ("I live in Berlin now"); in an unmatched clause
# they still count, so a real statement is not shrunk below the threshold.
_RESIDUAL_FILLER_RE = re.compile(
    r"(?i:\b(?:by\s+the\s+way|btw|actually|honestly|really|now|any\s?more|these\s+days|too"
    r"|as\s+well|though|currently|right\s+now|at\s+the\s+moment|also|just|so|well|oh|ah|and"
    r"|but|um+|uh+|please|from\s+now\s+on|lately|nowadays|totally|definitely|indeed"
    r"|of\s+course|for\s+sure|you\s+know|i\s+mean|like)\b)"
)


# --------------------------------------------------------------------------------------------
# Claims
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Spec:
    type: MemoryType
    topic: str
    stateful: bool
    importance: float
    questions: tuple[str, ...]


_SPECS: Final[dict[str, _Spec]] = {
    "name": _Spec(
        MemoryType.FACT,
        "identity",
        True,
        0.9,
        ("What is {s}'s name?", "What should the assistant call {s}?", "Who is {s}?"),
    ),
    "age": _Spec(
        MemoryType.FACT,
        "identity",
        True,
        0.7,
        ("How old is {s}?", "What is {s}'s age?", "What age is {s}?"),
    ),
    "lives_in": _Spec(
        MemoryType.FACT,
        "location",
        True,
        0.8,
        ("Where does {s} live?", "Which city is {s} based in?", "Has {s} moved recently?"),
    ),
    "hometown": _Spec(
        MemoryType.FACT,
        "location",
        True,
        0.6,
        ("Where is {s} from?", "Where did {s} grow up?", "What is {s}'s hometown?"),
    ),
    "works_at": _Spec(
        MemoryType.FACT,
        "work",
        True,
        0.8,
        ("Where does {s} work?", "Who is {s}'s employer?", "Which company does {s} work for?"),
    ),
    "studies_at": _Spec(
        MemoryType.FACT,
        "education",
        True,
        0.7,
        ("Where does {s} study?", "Which school does {s} attend?", "Is {s} a student?"),
    ),
    "occupation": _Spec(
        MemoryType.FACT,
        "work",
        True,
        0.8,
        ("What does {s} do for a living?", "What is {s}'s job?", "What is {s}'s occupation?"),
    ),
    "employment_status": _Spec(
        MemoryType.FACT,
        "work",
        True,
        0.7,
        ("Is {s} employed?", "What is {s}'s employment status?", "Does {s} work?"),
    ),
    "likes": _Spec(
        MemoryType.PREFERENCE,
        "interests",
        False,
        0.5,
        ("What does {s} like?", "Does {s} like {v}?", "What are {s}'s interests?"),
    ),
    "dislikes": _Spec(
        MemoryType.PREFERENCE,
        "interests",
        False,
        0.5,
        ("What does {s} dislike?", "Does {s} like {v}?", "What does {s} not enjoy?"),
    ),
    "prefers": _Spec(
        MemoryType.PREFERENCE,
        "preferences",
        True,
        0.6,
        ("What does {s} prefer?", "Does {s} prefer {v}?", "What are {s}'s preferences?"),
    ),
    "favorite": _Spec(
        MemoryType.PREFERENCE,
        "preferences",
        True,
        0.5,
        ("What is {s}'s favorite {x}?", "Which {x} does {s} like best?", "Does {s} like {v}?"),
    ),
    "uses": _Spec(
        MemoryType.PREFERENCE,
        "tools",
        False,
        0.5,
        ("What tools does {s} use?", "Does {s} use {v}?", "What software does {s} rely on?"),
    ),
    "allergic_to": _Spec(
        MemoryType.FACT,
        "health",
        False,
        0.9,
        ("What is {s} allergic to?", "Does {s} have any allergies?", "Is {s} allergic to {v}?"),
    ),
    "intolerant_to": _Spec(
        MemoryType.FACT,
        "health",
        False,
        0.8,
        (
            "What food intolerances does {s} have?",
            "Is {s} {v} intolerant?",
            "What can {s} not eat?",
        ),
    ),
    "diet": _Spec(
        MemoryType.PREFERENCE,
        "food",
        True,
        0.8,
        ("What diet does {s} follow?", "Is {s} {v}?", "What does {s} eat?"),
    ),
    "does_not_eat": _Spec(
        MemoryType.PREFERENCE,
        "food",
        False,
        0.7,
        ("What does {s} not eat?", "Does {s} eat {v}?", "What are {s}'s dietary restrictions?"),
    ),
    "does_not_drink": _Spec(
        MemoryType.PREFERENCE,
        "food",
        False,
        0.6,
        ("What does {s} not drink?", "Does {s} drink {v}?", "What are {s}'s dietary restrictions?"),
    ),
    "instruction": _Spec(
        MemoryType.INSTRUCTION,
        "instructions",
        False,
        0.9,
        (
            "How should the assistant respond to the user?",
            "What instructions has the user given the assistant?",
            "What does the user want the assistant to do?",
        ),
    ),
}
_RELATION_QUESTIONS: Final = (
    "What is the name of {s}'s {x}?",
    "Who is {s}'s {x}?",
    "Does {s} have a {x}?",
)


@dataclass(frozen=True)
class _Subject:
    """Who a claim is about, and how sentences and questions refer to them."""

    entity: str
    phrase: str
    asked: str


_USER = _Subject(USER_ENTITY, "The user", "the user")


@dataclass(frozen=True)
class _Claim:
    entity: str
    attribute: str
    value: str
    text: str
    spec: _Spec
    questions: tuple[str, ...]
    negated: bool


@dataclass(frozen=True)
class _Found:
    """What one pattern made of a clause body; unresolved means "knowledge we cannot name"."""

    claims: tuple[_Claim, ...]
    end: int
    unresolved: bool = False


@dataclass(frozen=True)
class _Context:
    lowercase_typing: bool
    negated: bool


_PLAIN = _Context(lowercase_typing=False, negated=False)


def _claim(
    subject: _Subject,
    attribute: str,
    value: str,
    phrase: str,
    ctx: _Context,
    *,
    spec: _Spec | None = None,
    extra: str = "",
    negated: bool | None = None,
) -> _Claim:
    """Build a claim; phrase is the predicate in the third person and contains the value."""
    negated = ctx.negated if negated is None else negated
    if negated:
        phrase = _retract(phrase)
    spec = spec or _SPECS[attribute]
    separator = "" if phrase.startswith("'s") else " "
    questions = tuple(
        _capitalise(q.format(s=subject.asked, v=value, x=extra)) for q in spec.questions
    )
    return _Claim(
        entity=subject.entity,
        attribute=attribute,
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


def _collapse(text: str) -> str:
    return _SPACES_RE.sub(" ", text).strip()


def _capitalise(text: str) -> str:
    return text[:1].upper() + text[1:]


def _relation_attribute(relmod: str | None, rel: str) -> tuple[str, str]:
    """('ex_wife', 'ex-wife') from the words the user wrote: the predicate and its wording."""
    base = _collapse(rel.lower())
    attribute = RELATION_SYNONYMS.get(base, base).replace(" ", "_").replace("-", "_")
    words = base
    if relmod:
        modifier = relmod.strip().lower().rstrip("-")
        words = f"{modifier}-{base}" if modifier in {"ex", "step"} else f"{modifier} {base}"
        if modifier in _KEPT_RELATION_MODIFIERS:
            attribute = f"{modifier}_{attribute}"
    return attribute, words


def _relation_spec(attribute: str) -> _Spec:
    core = attribute.split("_", 1)[-1] if attribute.startswith(("ex_", "late_")) else attribute
    if core in _WORK_RELATIONS:
        topic = "work"
    elif core in _SOCIAL_RELATIONS:
        topic = "social"
    elif core in _PET_RELATIONS:
        topic = "pets"
    elif core == "therapist":
        topic = "health"
    else:
        topic = _TOPIC_FAMILY
    stateful = attribute in _STATEFUL_RELATIONS
    return _Spec(MemoryType.FACT, topic, stateful, 0.8, _RELATION_QUESTIONS)


def _relation_claim(relmod: str | None, rel: str, name: str, ctx: _Context) -> _Claim:
    attribute, words = _relation_attribute(relmod, rel)
    return _claim(
        _USER,
        attribute,
        name,
        f"'s {words} is named {name}",
        ctx,
        spec=_relation_spec(attribute),
        extra=words,
        negated=False,
    )


def _is_name(value: str) -> bool:
    return value.split(maxsplit=1)[0].lower().strip("'’") not in _NOT_NAMES


def _subject(m: re.Match[str], *, allow_we: bool = False) -> tuple[_Subject | None, list[_Claim]]:
    """Resolve the subject group; None means a real claim about someone the rules can't name."""
    if m.group("me"):
        return _USER, []
    if m.group("we"):
        return (_USER, []) if allow_we else (None, [])
    name = m.group("name")
    if name:
        return (_Subject(name, name, name), []) if _is_name(name) else (None, [])
    relname = m.group("relname")
    if not relname or not _is_name(relname):
        # "My brother works at Tesla": knowledge, but inventing a name would be worse.
        return None, []
    _, words = _relation_attribute(m.group("relmod"), m.group("rel"))
    relation = _relation_claim(m.group("relmod"), m.group("rel"), relname, _PLAIN)
    return _Subject(relname, f"{relname}, the user's {words},", relname), [relation]


def _strip_value(value: str) -> str:
    value = value.strip()
    if _INITIALS_END_RE.search(value):
        return value
    return value.rstrip(".,!?;:'\"’”)")


def _proper_ok(value: str, ctx: _Context) -> bool:
    """Places, employers and tools must look like names unless the user types in lowercase."""
    words = value.split()
    if not words:
        return False
    if any(w[:1].isupper() or w[:1].isdigit() for w in words):
        return True
    return ctx.lowercase_typing and words[0].lower() not in _BAD_PLACE_FIRST


def _place_ok(value: str, ctx: _Context) -> bool:
    return _proper_ok(value, ctx) and not value[:1].isdigit()


def _thing_ok(value: str) -> bool:
    """A value that names a thing: not a pronoun, not something of the other speaker or of a
    named person, not a definite reference to the conversation, not a cut phrase or filler."""
    written = value.split()
    words = [w.lower().strip("'’") for w in written]
    if not words or words[0] in _BAD_THINGS or words[0] in _COGNITION_VERBS:
        return False
    if words[-1] in _DANGLING_WORDS:
        return False
    # "the message", "the host's outfit": something the listener is meant to see; "the Beatles"
    # is a name.
    if words[0] == "the" and (len(written) == 1 or not written[1][:1].isupper()):
        return False
    if any(w.endswith(("'s", "’s", "s'")) for w in written) or any(
        w in _FILLER_WORDS for w in words
    ):
        return False
    return not any(
        w in _POINTING_WORDS
        or w in _FIRST_PERSON_WORDS
        or w in _OTHER_OWNER_WORDS
        or w in _CLAUSE_WORDS
        or w in _HEDGE_WORDS
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
    while qualifier := _QUALIFIER_RE.match(rest, pos):
        pos = qualifier.end()
    if _PHRASE_END_RE.match(rest, pos) is None:
        return False
    # "I love seeing you": a gerund whose object is still to come.
    following = rest[pos:].split(maxsplit=1)
    gerund = value.endswith("ing") and rest[: m.end()].rstrip().endswith(value)
    return not (gerund and following and following[0].lower() in {"you", "it"})


def _durable_thing(m: re.Match[str], value: str) -> bool:
    """A preference worth a memory: a complete thing, not tied to this moment."""
    return _thing_ok(value) and _complete(m, value) and _TRANSIENT_RE.search(m.string) is None


def _possessive(value: str) -> tuple[str, str]:
    """'my smart home setup' -> ('smart home setup', 'their '): third person keeps the value."""
    lowered = value.lower()
    if lowered.startswith("my "):
        return value[3:].strip(), "their "
    return value, ""


# --------------------------------------------------------------------------------------------
# Builders: one per pattern, each returns None when the match is not a usable claim.
# --------------------------------------------------------------------------------------------

_Builder = Callable[[re.Match[str], _Context], _Found | None]
_SubjectBuilder = Callable[[re.Match[str], _Context, _Subject, list[_Claim]], _Found | None]


def _needs_subject(build: _SubjectBuilder) -> _Builder:
    """A claim about someone the rules cannot name is knowledge they did not understand:
    the builder is not called and the clause stays uncovered (the LLM's job)."""

    def with_subject(m: re.Match[str], ctx: _Context) -> _Found | None:
        subject, extra = _subject(m)
        if subject is None:
            return _unresolved(m)
        return build(m, ctx, subject, extra)

    return with_subject


def _unresolved(m: re.Match[str]) -> _Found:
    return _Found(claims=(), end=m.end(), unresolved=True)


def _build_my_name(m: re.Match[str], ctx: _Context) -> _Found | None:
    value = _strip_value(m.group("value"))
    if not value or not _is_name(value):
        return None
    if not (value[:1].isupper() or ctx.lowercase_typing):
        return None
    return _Found((_claim(_USER, "name", value, f"'s name is {value}", ctx),), m.end())


def _build_call_me(m: re.Match[str], ctx: _Context) -> _Found | None:
    value = _strip_value(m.group("value"))
    if not value or not _is_name(value):
        return None
    if not (value[:1].isupper() or ctx.lowercase_typing):
        return None
    return _Found((_claim(_USER, "name", value, f"goes by the name {value}", ctx),), m.end())


def _build_i_am_name(m: re.Match[str], ctx: _Context) -> _Found | None:
    value = m.group("value")
    if not _is_name(value):
        return None
    claims = [_claim(_USER, "name", value, f"'s name is {value}", ctx)]
    place = m.group("place")
    if place and _place_ok(place, ctx):
        claims.append(_claim(_USER, "hometown", place, f"is from {place}", ctx))
    return _Found(tuple(claims), m.end())


def _build_relation_named(m: re.Match[str], ctx: _Context) -> _Found | None:
    value = _strip_value(m.group("value"))
    if not value or not _is_name(value):
        return None
    if not (value[:1].isupper() or ctx.lowercase_typing):
        return None
    return _Found((_relation_claim(m.group("relmod"), m.group("rel"), value, ctx),), m.end())


def _build_relation_is(m: re.Match[str], ctx: _Context) -> _Found | None:
    value = m.group("value")
    if not _is_name(value):
        return None
    return _Found((_relation_claim(m.group("relmod"), m.group("rel"), value, ctx),), m.end())


@_needs_subject
def _build_age(
    m: re.Match[str], ctx: _Context, subject: _Subject, extra: list[_Claim]
) -> _Found | None:
    value = m.group("value")
    if not 0 < int(value) <= MAX_AGE:
        return None
    claim = _claim(subject, "age", value, f"is {value} years old", ctx)
    return _Found((*extra, claim), m.end())


def _items(value: str, splitter: re.Pattern[str]) -> list[str]:
    """Split a list value; commas only make a list when it ends "..., and Z" or "... or Z"."""
    value = _TRAILING_CONJUNCTION_RE.sub("", value)
    if "," in value and not _LIST_END_RE.search(value):
        # "a safe, inviting place": a comma that does not make a list; leave it to the LLM.
        return []
    return [item for item in (_strip_value(p) for p in splitter.split(value)) if item]


@_needs_subject
def _build_allergy(
    m: re.Match[str], ctx: _Context, subject: _Subject, extra: list[_Claim]
) -> _Found | None:
    items = _items(m.group("value"), _LIST_SPLIT_WORDS_RE)
    # "allergic to dogs with long hair" is not "allergic to dogs": a cut list defers.
    if not items or not all(_thing_ok(i) for i in items) or not _complete(m, items[-1]):
        return None
    claims = [_claim(subject, "allergic_to", i, f"is allergic to {i}", ctx) for i in items]
    return _Found((*extra, *claims), m.end())


@_needs_subject
def _build_allergy_have(
    m: re.Match[str], ctx: _Context, subject: _Subject, extra: list[_Claim]
) -> _Found | None:
    value = m.group("value")
    if not _thing_ok(value):
        return None
    claim = _claim(subject, "allergic_to", value, f"has a {value} allergy", ctx)
    return _Found((*extra, claim), m.end())


@_needs_subject
def _build_intolerance(
    m: re.Match[str], ctx: _Context, subject: _Subject, extra: list[_Claim]
) -> _Found | None:
    value = m.group("value")
    if not _thing_ok(value):
        return None
    claim = _claim(subject, "intolerant_to", value, f"is {value} intolerant", ctx)
    return _Found((*extra, claim), m.end())


@_needs_subject
def _build_diet(
    m: re.Match[str], ctx: _Context, subject: _Subject, extra: list[_Claim]
) -> _Found | None:
    value = _collapse(m.group("value"))
    claim = _claim(subject, "diet", value, f"follows a {value} diet", ctx)
    return _Found((*extra, claim), m.end())


@_needs_subject
def _build_not_eat(
    m: re.Match[str], ctx: _Context, subject: _Subject, extra: list[_Claim]
) -> _Found | None:
    items = _items(m.group("value"), _LIST_SPLIT_WORDS_RE)
    if not items or not all(_thing_ok(i) for i in items) or not _complete(m, items[-1]):
        return None
    drink = m.group("food").lower().startswith("drink")
    attribute, verb = ("does_not_drink", "drink") if drink else ("does_not_eat", "eat")
    modal = "cannot" if m.group("verb").lower().startswith("can") else "does not"
    claims = [_claim(subject, attribute, i, f"{modal} {verb} {i}", ctx) for i in items]
    return _Found((*extra, *claims), m.end())


def _preference_builder(attribute: str) -> _Builder:
    """Likes and dislikes: one claim per comma-separated item, verb kept as the user chose."""

    @_needs_subject
    def build(
        m: re.Match[str], ctx: _Context, subject: _Subject, extra: list[_Claim]
    ) -> _Found | None:
        # "Spoken like a real architect": a base-form verb after a name is a preposition.
        base_form = m.group("verb").split(maxsplit=1)[0].lower() in _BASE_FORM_VERBS
        if base_form and not (m.group("me") or m.group("we")):
            return None
        items = _items(m.group("value"), _LIST_SPLIT_RE)
        if not items:
            return None
        verb = _third_person_verb(m.group("verb"), attribute)
        infinitive = "to " if "inf" in m.re.groupindex and m.group("inf") else ""
        claims = []
        for item in items:
            value, owner = _possessive(item)
            durable = _durable_thing(m, value) if item is items[-1] else _thing_ok(value)
            if not durable or (owner and _RELATION_WORD_RE.fullmatch(value)):
                # "I love my wife" is affection, not a preference worth a memory.
                return None
            claims.append(
                _claim(subject, attribute, value, f"{verb} {infinitive}{owner}{value}", ctx)
            )
        return _Found((*extra, *claims), m.end())

    return build


def _third_person_verb(verb: str, attribute: str) -> str:
    """'love' -> 'loves', "I'm a big fan of" -> 'is a big fan of'; negations read 'dislikes'."""
    words = _collapse(verb.lower()).replace("’", "'")
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


@_needs_subject
def _build_prefers(
    m: re.Match[str], ctx: _Context, subject: _Subject, extra: list[_Claim]
) -> _Found | None:
    value, owner = _possessive(_strip_value(m.group("value")))
    rest = " " + _collapse(m.group("rest")) if m.group("rest") else ""
    other = _strip_value(m.group("other")) if rest else ""
    if not (_durable_thing(m, other) if rest else _durable_thing(m, value)):
        return None
    if rest and not _thing_ok(value):
        return None
    infinitive = "to " if m.group("inf") else ""
    claim = _claim(subject, "prefers", value, f"prefers {infinitive}{owner}{value}{rest}", ctx)
    return _Found((*extra, claim), m.end())


@_needs_subject
def _build_uses(
    m: re.Match[str], ctx: _Context, subject: _Subject, extra: list[_Claim]
) -> _Found | None:
    value = _strip_value(m.group("value"))
    if not _durable_thing(m, value) or not _proper_ok(value, ctx):
        return None
    return _Found((*extra, _claim(subject, "uses", value, f"uses {value}", ctx)), m.end())


def _build_moved_from_to(m: re.Match[str], ctx: _Context) -> _Found | None:
    subject, extra = _subject(m, allow_we=True)
    if subject is None:
        return _unresolved(m)
    old, new = _strip_value(m.group("old")), _strip_value(m.group("value"))
    if not (_place_ok(old, ctx) and _place_ok(new, ctx)):
        return None
    claims = (
        _claim(subject, "lives_in", new, f"lives in {new}", ctx),
        _claim(subject, "lives_in", old, f"lives in {old}", ctx, negated=True),
    )
    return _Found((*extra, *claims), m.end())


def _build_moved_away(m: re.Match[str], ctx: _Context) -> _Found | None:
    subject, extra = _subject(m, allow_we=True)
    if subject is None:
        return _unresolved(m)
    value = _strip_value(m.group("value"))
    if not _place_ok(value, ctx):
        return None
    claim = _claim(subject, "lives_in", value, f"lives in {value}", ctx, negated=True)
    return _Found((*extra, claim), m.end())


def _build_lives_in(m: re.Match[str], ctx: _Context) -> _Found | None:
    subject, extra = _subject(m, allow_we=True)
    if subject is None:
        return _unresolved(m)
    value = _strip_value(m.group("value"))
    if not _place_ok(value, ctx):
        return None
    return _Found((*extra, _claim(subject, "lives_in", value, f"lives in {value}", ctx)), m.end())


@_needs_subject
def _build_hometown(
    m: re.Match[str], ctx: _Context, subject: _Subject, extra: list[_Claim]
) -> _Found | None:
    value = _strip_value(m.group("value"))
    if not _place_ok(value, ctx) or value.lower() in _DEPARTMENTS:
        return None
    return _Found((*extra, _claim(subject, "hometown", value, f"is from {value}", ctx)), m.end())


@_needs_subject
def _build_married(
    m: re.Match[str], ctx: _Context, subject: _Subject, extra: list[_Claim]
) -> _Found | None:
    value = m.group("value")
    if not _is_name(value):
        return None
    state = m.group("state").lower()
    attribute = "spouse" if state == "married" else "fiance"
    spec = _relation_spec(attribute)
    claim = _claim(
        subject, attribute, value, f"is {state} to {value}", ctx, spec=spec, extra=attribute
    )
    return _Found((*extra, claim), m.end())


@_needs_subject
def _build_quit_job(
    m: re.Match[str], ctx: _Context, subject: _Subject, extra: list[_Claim]
) -> _Found | None:
    value = _strip_value(m.group("value"))
    if not _proper_ok(value, ctx) or value.split()[0].lower() in _BAD_PLACE_FIRST:
        return None
    claim = _claim(subject, "works_at", value, f"works at {value}", ctx, negated=True)
    return _Found((*extra, claim), m.end())


def _occupation_claim(subject: _Subject, role: str, ctx: _Context) -> _Claim:
    """'former nurse' is a retraction of 'nurse'; articles follow the role's first letter."""
    negated = ctx.negated
    lowered = role.lower()
    for prefix in ("former ", "ex-", "ex "):
        if lowered.startswith(prefix):
            role, negated = role[len(prefix) :].strip(), True
            break
    article = "an" if role[:1].lower() in "aeiou" else "a"
    return _claim(subject, "occupation", role, f"works as {article} {role}", ctx, negated=negated)


def _employer_claim(subject: _Subject, org: str, role: str, ctx: _Context) -> _Claim:
    if role.lower().startswith("student"):
        return _claim(subject, "studies_at", org, f"studies at {org}", ctx)
    return _claim(subject, "works_at", org, f"works at {org}", ctx)


@_needs_subject
def _build_works_at(
    m: re.Match[str], ctx: _Context, subject: _Subject, extra: list[_Claim]
) -> _Found | None:
    value = _strip_value(m.group("value"))
    if not _proper_ok(value, ctx) or value.split()[0].lower() in _BAD_PLACE_FIRST:
        return None
    claims = [*extra, _employer_claim(subject, value, "", ctx)]
    occ = m.group("occ")
    if occ:
        claims.append(_occupation_claim(subject, _strip_value(occ), ctx))
    return _Found(tuple(claims), m.end())


@_needs_subject
def _build_works_as(
    m: re.Match[str], ctx: _Context, subject: _Subject, extra: list[_Claim]
) -> _Found | None:
    role = _strip_value(m.group("value"))
    if not role or role.split()[0].lower() in _BAD_THINGS:
        return None
    claims = [*extra, _occupation_claim(subject, role, ctx)]
    org = m.group("org")
    if org and _proper_ok(_strip_value(org), ctx):
        claims.append(_employer_claim(subject, _strip_value(org), role, ctx))
    return _Found(tuple(claims), m.end())


@_needs_subject
def _build_occupation(
    m: re.Match[str], ctx: _Context, subject: _Subject, extra: list[_Claim]
) -> _Found | None:
    role = _collapse(m.group("value"))
    claims = [*extra, _occupation_claim(subject, role, ctx)]
    org = m.group("org")
    end = m.end()
    if org:
        org = _strip_value(org)
        if _proper_ok(org, ctx) and org.split()[0].lower() not in _BAD_PLACE_FIRST:
            claims.append(_employer_claim(subject, org, role, ctx))
        else:
            # "an architect at this firm": the firm is real but unnamed; leave it uncovered.
            end = m.start("org")
    return _Found(tuple(claims), end)


@_needs_subject
def _build_employment(
    m: re.Match[str], ctx: _Context, subject: _Subject, extra: list[_Claim]
) -> _Found | None:
    value = _collapse(m.group("value"))
    claim = _claim(subject, "employment_status", value, f"is {value}", ctx)
    return _Found((*extra, claim), m.end())


def _build_favorite(m: re.Match[str], ctx: _Context) -> _Found | None:
    what = _collapse(m.group("what").lower())
    value = _strip_value(m.group("value"))
    if not _durable_thing(m, value):
        return None
    attribute = "favorite_" + what.replace(" ", "_")
    claim = _claim(
        _USER,
        attribute,
        value,
        f"'s favorite {what} is {value}",
        ctx,
        spec=_SPECS["favorite"],
        extra=what,
    )
    return _Found((claim,), m.end())


# Ordered: the first pattern that yields a claim wins the clause.
_RULES: Final[tuple[tuple[re.Pattern[str], _Builder], ...]] = (
    (_RELATION_NAMED_RE, _build_relation_named),
    (_RELATION_IS_RE, _build_relation_is),
    (_MY_NAME_RE, _build_my_name),
    (_CALL_ME_RE, _build_call_me),
    (_FAVORITE_RE, _build_favorite),
    (_AGE_RE, _build_age),
    (_ALLERGY_RE, _build_allergy),
    (_ALLERGY_HAVE_RE, _build_allergy_have),
    (_INTOLERANCE_RE, _build_intolerance),
    (_DIET_IS_RE, _build_diet),
    (_DIET_ON_RE, _build_diet),
    (_DIET_BECAME_RE, _build_diet),
    (_NOT_EAT_RE, _build_not_eat),
    (_DISLIKES_FAN_RE, _preference_builder("dislikes")),
    (_DISLIKES_RE, _preference_builder("dislikes")),
    (_LIKES_FAN_RE, _preference_builder("likes")),
    (_LIKES_RE, _preference_builder("likes")),
    (_PREFERS_RE, _build_prefers),
    (_USES_RE, _build_uses),
    (_MOVED_FROM_TO_RE, _build_moved_from_to),
    (_MOVED_AWAY_RE, _build_moved_away),
    (_LIVES_IN_RE, _build_lives_in),
    (_HOMETOWN_RE, _build_hometown),
    (_MARRIED_RE, _build_married),
    (_QUIT_JOB_RE, _build_quit_job),
    (_WORKS_AT_RE, _build_works_at),
    (_WORKS_AS_RE, _build_works_as),
    (_EMPLOYMENT_RE, _build_employment),
    (_OCCUPATION_RE, _build_occupation),
    (_I_AM_NAME_RE, _build_i_am_name),
)


def _match_rules(body: str, ctx: _Context) -> _Found | None:
    for pattern, build in _RULES:
        m = pattern.match(body)
        if m is None:
            continue
        found = build(m, ctx)
        if found is not None:
            return found
    return None


_PREFERENCE_ATTRIBUTES: Final = frozenset({"likes", "dislikes", "prefers", "uses"})


def _states_preference(found: _Found) -> bool:
    return any(
        c.attribute in _PREFERENCE_ATTRIBUTES or c.attribute.startswith("favorite_")
        for c in found.claims
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
# Instructions
# --------------------------------------------------------------------------------------------


def _instruction(body: str, *, lead: bool, asked: bool = False) -> _Claim | None:
    """A standing instruction: an imperative with a durable cue ("always", "from now on"),
    addressed to the assistant ("please", "can you", "from now on") or about its output."""
    ask = _INSTRUCTION_ASK_RE.match(body)
    if ask:
        body = body[ask.end() :]
    m = _INSTRUCTION_BODY_RE.match(body)
    if m is None:
        return None
    verb = m.group("verb").lower()
    cues = set(body[: m.start("verb")].lower().split())
    # "stop by the store" is an errand; "stop using emojis" is standing.
    stop_ok = "stop" in cues and verb.endswith("ing")
    if not (verb in _ASSISTANT_VERBS or stop_ok):
        return None
    if _DECLARATIVE_NEXT_RE.match(body, m.end()):
        # "Answer is yes": a subject and its verb, not an imperative.
        return None
    trailer = _INSTRUCTION_TRAILER_RE.search(body)
    from_now_on = lead or bool(trailer and _FROM_NOW_ON_RE.search(trailer.group()))
    # A bare verb needs "from now on"; "don't" needs a cue such as "anymore" or "every time".
    negative = bool(cues & {"don't", "don’t", "dont", "not"})
    durable = (
        from_now_on
        or bool(cues & {"always", "never", "ever"})
        or stop_ok
        or (negative and _INSTRUCTION_DURABLE_RE.search(body) is not None)
    )
    value = body[: trailer.start()] if trailer else body
    addressed = (
        asked
        or ask is not None
        or from_now_on
        or verb in _OUTPUT_VERBS
        or _ADDRESSEE_RE.search(value, m.end()) is not None
    )
    value = _INSTRUCTION_NEVER_RE.sub("never", value.strip())
    if not (durable and addressed) or len(value.split()) < 2 or len(value) > MAX_INSTRUCTION_CHARS:
        return None
    for pattern, replacement in _FIRST_PERSON_SHIFTS:
        value = pattern.sub(replacement, value)
    value = value[:1].lower() + value[1:]
    suffix = " from now on" if from_now_on else ""
    return _claim(_USER, "instruction", value, f"wants the assistant to {value}{suffix}", _PLAIN)


# --------------------------------------------------------------------------------------------
# Clauses
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Clause:
    start: int
    end: int
    text: str
    terminator: str
    sentence: int


@dataclass(frozen=True)
class _Outcome:
    claims: tuple[_Claim, ...]
    covered: bool
    guard: str | None
    opens_guard: bool


def _split_clauses(text: str) -> list[_Clause]:
    clauses: list[_Clause] = []
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
    before = _WORD_BEFORE_RE.search(text, max(0, dot - _ABBREVIATION_WINDOW), dot)
    written = before.group(1) if before else ""
    word = written.lower()
    # "Dr.", "e.g.", "U.S." and the initial in "John F. Kennedy" do not end a sentence.
    initial = len(written) == 1 and written.isupper() and written != "I"
    if word in _ABBREVIATIONS or _INITIALS_RE.fullmatch(word) or initial:
        return False
    if word in _COMPANY_ABBREVIATIONS:
        return _CAPITAL_NEXT_RE.match(text, after) is not None
    return True


def _split_sentence(
    text: str, start: int, end: int, terminator: str, sentence: int
) -> list[_Clause]:
    pieces: list[tuple[int, int]] = []
    cursor = start
    for m in _CLAUSE_BREAK_RE.finditer(text, start, end):
        pieces.append((cursor, m.start()))
        cursor = m.end()
    pieces.append((cursor, end))
    clauses = []
    for index, piece in enumerate(pieces):
        a, b = _trim(text, *piece)
        if a < b:
            last = index == len(pieces) - 1
            clauses.append(_Clause(a, b, text[a:b], terminator if last else ",", sentence))
    return clauses


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start] in _TRIM_CHARS:
        start += 1
    while end > start and text[end - 1] in _TRIM_CHARS:
        if text[end - 1] == "." and _INITIALS_END_RE.search(text, start, end):
            break
        end -= 1
    return start, end


def _content_words(text: str, *, residual: bool) -> int:
    text = _PLEASANTRY_RE.sub(" ", text)
    if residual:
        text = _RESIDUAL_FILLER_RE.sub(" ", text)
    return len(_WORD_RE.findall(text))


def _is_lowercase_typing(clause: str) -> bool:
    """No capitals anywhere except a leading one, and a lowercase 'i' or a lowercase start."""
    rest = _CAPITAL_I_RE.sub("", clause[1:])
    if any(c.isupper() for c in rest):
        return False
    return clause[:1].islower() or _LOWER_TYPING_RE.search(clause) is not None


def _is_question(body: str, terminator: str) -> bool:
    if _QUESTION_START_RE.match(body):
        return True
    return terminator == "?" and not _FIRST_PERSON_START_RE.match(body)


def _analyse_clause(clause: _Clause, *, inherited_guard: str | None) -> _Outcome:
    text = clause.text
    pos = _end_of(_LEADING_FILLER_RE, text, 0)
    body = text[pos:]
    if not body:
        return _Outcome((), True, inherited_guard, False)

    lead = _INSTRUCTION_LEAD_RE.match(body)
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
        ask = _INSTRUCTION_QUESTION_RE.match(body)
        claim = _instruction(body[ask.end() :], lead=lead is not None, asked=True) if ask else None
        return _Outcome((claim,) if claim else (), True, None, False)

    ctx = _Context(lowercase_typing=_is_lowercase_typing(text), negated=False)
    found = _match_rules(body, ctx)
    if found is None and guard is None:
        claim = _instruction(body, lead=lead is not None)
        if claim:
            found = _Found((claim,), len(body))
    unclear_negation = False
    if found is None and _NEGATION_PRESENT_RE.search(body):
        negated_ctx = _Context(lowercase_typing=ctx.lowercase_typing, negated=True)
        rewritten = _negation_rewrite(body)
        retraction = _match_rules(rewritten, negated_ctx)
        # Only "anymore" or "no longer" retracts: "I'm not from Texas" is not "no longer from
        # Texas", "I don't love winter" is not "no longer loves winter". Any other negation of
        # a claim is the LLM's to word.
        # The rewrite deletes words: a value that reads across a deleted "anymore" ("I use
        # live anymore Berlin" -> "live Berlin") was never said, so that retraction defers.
        said = retraction is not None and all(
            claim.value.lower() in body.lower() for claim in retraction.claims
        )
        if retraction is not None and said and _RETRACTION_RE.search(body):
            ctx, body, found = negated_ctx, rewritten, retraction
        elif retraction is not None:
            unclear_negation = True

    claims, rest = _continue_claims(body, found, ctx) if found else ((), body)
    appositions = _appositions(rest, ctx)
    claims = (*claims, *appositions)
    rest = _RELATION_APPOSITION_RE.sub(" ", rest) if appositions else rest

    # Unnamed people and "and ..." after a retraction are knowledge the rules can't pin down.
    ambiguous = ctx.negated and _CONTINUATION_RE.match(rest) is not None
    if (found is not None and found.unresolved) or ambiguous or unclear_negation:
        covered = False
    elif guard is not None and (opens_guard or inherited_guard or claims):
        covered = True
    else:
        covered = _content_words(rest, residual=found is not None) < MIN_UNCOVERED_WORDS
    return _Outcome(claims, covered, guard, opens_guard)


_NEW_SUBJECT_RE = re.compile(
    r"(?i:the|my|our|your|his|her|their|we|he|she|they|it|this|that|there)(?![\w'-])"
)


def _continue_claims(body: str, found: _Found, ctx: _Context) -> tuple[tuple[_Claim, ...], str]:
    """'I live in Berlin and work at SAP': the subject (and its 'am') carries over each 'and'.

    After a retraction the scope of the negation is ambiguous ("I don't live in Berlin anymore
    and work at SAP"), so nothing carries over there.
    """
    claims, rest = found.claims, body[found.end :]
    subject = _SUBJECT_RE.match(body)
    if subject is None or found.unresolved or ctx.negated:
        return claims, rest
    be = _BE_SIMPLE_RE.match(body, subject.end())
    prefixes = [subject.group()] + ([body[: be.end()]] if be else [])
    while cont := _CONTINUATION_RE.match(rest):
        tail = rest[cont.end() :]
        if _NEW_SUBJECT_RE.match(tail):
            return claims, rest  # "..., and the audit slipped": a new clause, not a continuation
        for prefix in prefixes:
            extended = f"{prefix} {tail}"
            more = _match_rules(extended, ctx)
            if more is not None and not more.unresolved:
                claims, rest = (*claims, *more.claims), extended[more.end :]
                break
        else:
            return claims, rest
    return claims, rest


def _appositions(text: str, ctx: _Context) -> tuple[_Claim, ...]:
    return tuple(
        _relation_claim(m.group("relmod"), m.group("rel"), m.group("value"), ctx)
        for m in _RELATION_APPOSITION_RE.finditer(text)
        if _is_name(m.group("value"))
    )


def _end_of(pattern: re.Pattern[str], text: str, pos: int) -> int:
    m = pattern.match(text, pos)
    return m.end() if m else pos


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------


def extract_with_rules(
    text: str,
    *,
    role: str = "user",
    observed_at: datetime | None = None,
    source_turn_id: str | None = None,
) -> RuleExtraction:
    """Extract the simple claims of one turn; pure and deterministic.

    observed_at is accepted for parity with the LLM extractor; rule claims are timeless facts
    (no events), so it never becomes a valid_at.
    """
    if role != "user":
        # Assistant text restates or guesses; only the user's own words are evidence here.
        return RuleExtraction(candidates=(), fully_covered=False)

    turn_guard = (
        REASON_ROLE_PLAY
        if _ROLE_PLAY_RE.search(text)
        else REASON_SARCASM
        if _SARCASM_RE.search(text)
        else None
    )
    quotes = _quoted_spans(text)
    fully_covered = True
    sentence_guard: tuple[int, str] | None = None
    analysed: list[tuple[_Clause, _Outcome]] = []
    for clause in _split_clauses(text):
        if any(start <= clause.start < end for start, end in quotes):
            # Reported speech ("she said 'I'm Elena'") is about someone else: the LLM decides.
            quiet = _content_words(clause.text, residual=False) < MIN_UNCOVERED_WORDS
            fully_covered = fully_covered and quiet
            continue
        inherited = (
            sentence_guard[1] if sentence_guard and sentence_guard[0] == clause.sentence else None
        )
        outcome = _analyse_clause(clause, inherited_guard=inherited)
        if outcome.opens_guard and outcome.guard:
            sentence_guard = (clause.sentence, outcome.guard)
        # A role-play turn is fiction throughout; sarcasm only in the clause that marks it.
        if turn_guard == REASON_ROLE_PLAY or _SARCASM_RE.search(clause.text):
            covered = True
        else:
            covered = outcome.covered
        fully_covered = fully_covered and covered
        analysed.append((clause, outcome))

    # Short claim-free clauses of a sentence colour the wording of its claims: "Maybe, I'm
    # allergic to cats" and "I'm allergic to cats, I think" are both hedged; a longer clause
    # ("and I'll work at ...") has a claim of its own that the rules did not read.
    claim_free: dict[int, str] = {}
    for clause, outcome in analysed:
        short = _content_words(clause.text, residual=False) < MIN_UNCOVERED_WORDS
        if not outcome.claims and short:
            claim_free[clause.sentence] = f"{claim_free.get(clause.sentence, '')} {clause.text}"
    candidates: list[Candidate] = []
    seen: set[tuple[str, bool]] = set()
    for clause, outcome in analysed:
        if _restates_full_name(clause, candidates) or not outcome.claims:
            continue
        guard = outcome.guard or turn_guard
        question = "?" if clause.terminator == "?" else ""
        cues = wording_cues(f"{claim_free.get(clause.sentence, '')} {clause.text}{question}")
        for claim in outcome.claims:
            candidate = _to_candidate(claim, clause, guard, cues, source_turn_id)
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


def _restates_full_name(clause: _Clause, candidates: list[Candidate]) -> bool:
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
    claim: _Claim,
    clause: _Clause,
    guard: str | None,
    cues: frozenset[WordingCue],
    source_turn_id: str | None,
) -> Candidate | None:
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
            text=claim.text,
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
        )
    except ValidationError:
        # User text can produce a value the schema refuses (e.g. far too long); the clause
        # then counts as not understood, so the LLM sees it instead of the turn failing.
        logger.debug("rule claim refused by the candidate schema", exc_info=True)
        return None
