"""Which excluded topic a text is of, read from the topics' vocabularies, for the turns no model
reads (docs/design.md §2): offline a turn an excluded topic's vocabulary marks is dropped whole
(`ExcludedTopic{topic}`), never kept as an episode.

A vocabulary is the built-in one (`memwrite.topics.vocabularies`) plus the tenant's own terms
(`extraction.topic_terms`). Terms are matched on words, not characters ("ill" is not in
"illustrate"), in their inflected forms: each word of a term is expanded by a small English
morphology (plurals, third person, past and -ing forms with their spelling rules, and the
irregular forms the terms use), since the vocabulary is a closed list we write in base form and
generating its forms is exact where lemmatising free text would guess. Between two words of a
term one filler word may stand ("feeling really sick"), and a term inside one of the topic's
exception phrases ("sick of", "like therapy") marks nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

from memwrite.models import QueuedTurn
from memwrite.ports import TurnLedger
from memwrite.topics.vocabularies import BUILTIN_TOPICS

__all__ = ["marked_topic", "withheld_turn", "withhold_words", "word_forms"]

_WORD_RE: Final = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
# Clitics become words of their own, so "I'm sick" reads as "I 'm sick" and matches "be sick".
_CLITICS: Final = ("'m", "'re", "'ve", "'ll", "'d", "n't")
# Words that stand between two words of a term without breaking it.
_FILLERS_WORDS: Final = (
    "really", "very", "so", "pretty", "quite", "super", "still", "just", "also", "badly", "all",
    "constantly", "again", "now", "currently", "finally", "recently", "actually", "severe", "bad",
    "terrible", "mild", "chronic", "have", "has", "had", "'ve",
)  # fmt: skip
_FILLERS: Final = frozenset(_FILLERS_WORDS)
# Words never inflected in a term.
_FIXED_WORDS: Final = (
    "i", "me", "my", "a", "an", "the", "to", "in", "of", "for", "with", "on", "at", "from", "out",
    "as", "about", "and", "up", "off", "by", "this", "that", "'m", "'re", "'ve", "'ll", "'d",
    "n't",
)  # fmt: skip
_FIXED: Final = frozenset(_FIXED_WORDS)
_IRREGULAR: Final[dict[str, tuple[str, ...]]] = {
    "be": ("am", "is", "are", "was", "were", "been", "being", "'m", "'re"),
    "break": ("broke", "broken"),
    "tear": ("tore", "torn"),
    "get": ("got", "gotten"),
    "go": ("went", "gone", "goes"),
    "see": ("saw", "seen"),
    "fall": ("fell", "fallen"),
    "catch": ("caught",),
    "have": ("has", "had", "having", "'ve"),
    "take": ("took", "taken"),
    "feel": ("felt",),
    "hurt": ("hurt",),
    "say": ("said",),
    "grow": ("grew", "grown"),
    "come": ("came",),
    "do": ("did", "done", "does"),
    "put": ("put",),
    "give": ("gave", "given"),
    "tooth": ("teeth",),
    "foot": ("feet",),
    "child": ("children",),
    "kid": ("kids",),
    "wife": ("wives",),
    "calf": ("calves",),
    "vertebra": ("vertebrae",),
}
_VOWELS: Final = frozenset("aeiou")
_SENTENCE_END: Final = re.compile(r"(?<=[.!?])\s+")


def _is_cvc(word: str) -> bool:
    """A short word ending consonant-vowel-consonant doubles its last letter ("stop" ->
    "stopped"); generating both spellings costs nothing, a missed one misses a term."""
    return (
        len(word) >= 3
        and word[-1] not in _VOWELS
        and word[-1] not in "wxy"
        and word[-2] in _VOWELS
        and word[-3] not in _VOWELS
    )


def word_forms(word: str) -> frozenset[str]:
    """A term's word with its inflections: plural and third person, past, -ing."""
    if word in _FIXED or not word.isalpha():
        return frozenset({word})
    forms = {word, *_IRREGULAR.get(word, ())}
    consonant_y = word.endswith("y") and len(word) > 1 and word[-2] not in _VOWELS
    if word.endswith("sis"):
        forms.add(word[:-2] + "es")  # diagnosis -> diagnoses
    if word.endswith(("s", "x", "z", "ch", "sh")):
        forms.add(word + "es")
    elif consonant_y:
        forms.add(word[:-1] + "ies")
    else:
        forms.add(word + "s")
    if word.endswith("e"):
        forms |= {word + "d", word[:-1] + "ing"}
    elif consonant_y:
        forms |= {word[:-1] + "ied", word + "ing"}
    else:
        forms |= {word + "ed", word + "ing"}
        if _is_cvc(word):
            forms |= {word + word[-1] + "ed", word + word[-1] + "ing"}
    return frozenset(forms)


def _words(text: str) -> list[str]:
    """Lowercase words; clitics split off, a possessive "'s" dropped, hyphens split."""
    words: list[str] = []
    for token in _WORD_RE.findall(text.lower().replace("\u2019", "'")):
        if token.endswith("n't") and len(token) > 3:
            words += [token[:-3], "n't"]
            continue
        base, apostrophe, tail = token.partition("'")
        clitic = f"'{tail}"
        if apostrophe and clitic in _CLITICS:
            words += [base, clitic]
        else:
            words.append(base)  # "doctor's" -> "doctor"; "it's" -> "it"
    return words


_Term = tuple[frozenset[str], ...]


@dataclass(frozen=True)
class _Vocabulary:
    """A topic's terms and exception phrases, indexed by the forms of their first word."""

    terms: dict[str, tuple[_Term, ...]]
    exceptions: dict[str, tuple[_Term, ...]]

    def marks(self, words: Sequence[str]) -> bool:
        excepted = {
            index for start, end in _matches(words, self.exceptions) for index in range(start, end)
        }
        return any(
            not excepted.intersection(range(start, end))
            for start, end in _matches(words, self.terms)
        )


def _index(phrases: Iterable[str]) -> dict[str, tuple[_Term, ...]]:
    found: dict[str, list[_Term]] = {}
    for phrase in phrases:
        term = tuple(word_forms(word) for word in _words(phrase))
        if not term:
            continue
        for form in term[0]:
            found.setdefault(form, []).append(term)
    return {form: tuple(terms) for form, terms in found.items()}


def _matches(words: Sequence[str], index: Mapping[str, tuple[_Term, ...]]) -> list[tuple[int, int]]:
    """The word spans [start, end) at which a phrase of `index` stands."""
    spans: list[tuple[int, int]] = []
    for start, word in enumerate(words):
        for term in index.get(word, ()):
            end = _match_rest(words, start + 1, term[1:])
            if end is not None:
                spans.append((start, end))
    return spans


def _match_rest(words: Sequence[str], at: int, rest: _Term) -> int | None:
    for forms in rest:
        if at < len(words) and words[at] in forms:
            at += 1
        elif at + 1 < len(words) and words[at] in _FILLERS and words[at + 1] in forms:
            at += 2
        else:
            return None
    return at


@lru_cache(maxsize=256)
def _vocabulary(topic: str, extra: tuple[str, ...]) -> _Vocabulary:
    builtin = BUILTIN_TOPICS.get(topic)
    if builtin is None:
        # A tenant's own topic: its name and its terms.
        return _Vocabulary(_index((topic, *extra)), {})
    return _Vocabulary(_index((*builtin.terms, *extra)), _index(builtin.exceptions))


def marked_topic(
    text: str, topics: Iterable[str], extra_terms: Mapping[str, Sequence[str]]
) -> str | None:
    """The first of `topics` (in sorted order) whose vocabulary marks `text`: the built-in
    terms (a topic of the tenant's own: its name) and the tenant's `extra_terms` for it; None
    when none does."""
    words = _words(text)
    for topic in sorted(topics):
        if _vocabulary(topic, tuple(extra_terms.get(topic, ()))).marks(words):
            return topic
    return None


def withheld_turn(turn: QueuedTurn, topic: str) -> QueuedTurn:
    """The turn with its words (and the question it answered, and the end of the turn before
    it) replaced by a placeholder."""
    withheld = {"text": f"[EXCLUDED:{topic}]", "context": None, "preceding": None, "direct": None}
    return turn.model_copy(update=withheld)


def _sentences(text: str) -> list[str]:
    return [part for part in _SENTENCE_END.split(" ".join(text.split())) if part]


def _holds(content: str, text: str) -> bool:
    """Whether `content` holds `text`'s words (a recorded input, the pre-filter's kept
    sentences reassembled)."""
    flat = " ".join(content.split())
    return all(sentence in flat for sentence in _sentences(text))


def withhold_words(
    turns: Sequence[QueuedTurn],
    excluded: Mapping[str, str],
    ledger: TurnLedger,
    now: float,
) -> None:
    """Replace the words of turns of an excluded topic (`excluded`: turn id -> topic) where the
    pre-filter recorded them: in their traces' inputs (kept for replay) by a placeholder naming
    the topic, and as the session's last question (kept for a short answer)."""
    by_trace: dict[tuple[str, str], list[QueuedTurn]] = {}
    for turn in turns:
        by_trace.setdefault((turn.tenant, turn.trace_id), []).append(turn)
        question = ledger.last_question(turn.tenant, turn.user_id, turn.session_id, now)
        if question is not None and _holds(turn.text, question):
            ledger.set_last_question(
                turn.tenant, turn.user_id, turn.session_id, None, now=now, retention_secs=1
            )
    for (tenant, trace_id), dropped in by_trace.items():
        inputs = ledger.trace_inputs(tenant, trace_id)
        changed = False
        for position, recorded in enumerate(inputs):
            for turn in dropped:
                if recorded.role is turn.role and _holds(recorded.content, turn.text):
                    placeholder = f"[EXCLUDED:{excluded[turn.turn_id]}]"
                    inputs[position] = recorded.model_copy(update={"content": placeholder})
                    changed = True
        if changed:
            ledger.replace_inputs(tenant, trace_id, inputs)
