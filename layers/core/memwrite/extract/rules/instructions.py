"""Standing instructions to the assistant: "always answer in English", "from now on, no emojis".

Not a rule of the table: the clause analysis tries an instruction when no claim rule matched,
and on polite questions ("Can you always reply in French?").
"""

from __future__ import annotations

import re
from typing import Final

from memwrite.claims.candidate import MemoryType
from memwrite.extract.rules.engine import PLAIN, USER, Claim, Spec, make_claim
from memwrite.extract.rules.vocabulary import APOS, word_set

MAX_INSTRUCTION_CHARS: Final = 200

_INSTRUCTION_SPEC: Final = Spec(
    "instruction",
    MemoryType.INSTRUCTION,
    "instructions",
    False,
    0.9,
    (
        "How should the assistant respond to the user?",
        "What instructions has the user given the assistant?",
        "What does the user want the assistant to do?",
    ),
)

# Verbs that describe what an assistant does; "never give up" is a motto, not an instruction.
_ASSISTANT_VERBS: Final = word_set(
    "answer reply respond use call mention say write talk speak include add format remind ask "
    "suggest recommend show tell be keep put refer address list explain summarize summarise "
    "translate cite send sign end start begin avoid check double-check confirm spell convert "
    "round default switch assume"
)
# Verbs that only ever describe the assistant's answers; the others ("say", "keep", "be") make
# an instruction only when it is addressed or names the output: "never say never" is an idiom.
_OUTPUT_VERBS: Final = word_set("answer reply respond format summarize summarise translate cite")
_ADDRESSEE_RE = re.compile(
    r"(?i:\b(?:me|my|i|you|your|answers?|responses?|repl(?:y|ies)|messages?|emails?|code"
    r"|summar(?:y|ies)|lists?|bullets?|bullet\s+points|emojis?|units|formatting|tone|words"
    r"|jargon|sources|citations|examples|links|dates|times|currency|language|english)\b)"
)
INSTRUCTION_QUESTION_RE = re.compile(r"(?i:can|could|would|will)\s+(?i:you)\s+(?:(?i:please)\s+)?")
INSTRUCTION_LEAD_RE = re.compile(
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
    rf"(?:(?i:always|never|don{APOS}?t\s+ever|do\s+not\s+ever|don{APOS}?t|do\s+not|stop|only"
    rf"|just)\s+)*(?P<verb>[A-Za-z]+)\b"
)
_DECLARATIVE_NEXT_RE = re.compile(
    rf"(?:{APOS}s|\s+(?i:is|are|was|were|has|have|had|will|would|can|could|should|does|did"
    r"|said|says))\b"
)
_INSTRUCTION_NEVER_RE = re.compile(rf"^(?i:don{APOS}?t|do\s+not)(?:\s+(?i:ever))?\b")
_INSTRUCTION_TRAILER_RE = re.compile(
    r"(?:\s*,?\s*(?i:from\s+now\s+on|going\s+forward|moving\s+forward|please|thanks"
    r"|thank\s+you|any\s?more|in\s+(?:the\s+)?future))+$"
)
_FIRST_PERSON_SHIFTS: Final[tuple[tuple[re.Pattern[str], str], ...]] = (
    (re.compile(rf"\bI{APOS}m\b|\bI\s+am\b", re.IGNORECASE), "the user is"),
    (re.compile(r"\bmy\b|\bmine\b", re.IGNORECASE), "the user's"),
    (re.compile(r"\bme\b|\bmyself\b", re.IGNORECASE), "the user"),
    (re.compile(r"\bI\b"), "the user"),
)


def instruction_claim(body: str, *, lead: bool, asked: bool = False) -> Claim | None:
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
    return make_claim(
        USER, _INSTRUCTION_SPEC, value, f"wants the assistant to {value}{suffix}", PLAIN
    )
