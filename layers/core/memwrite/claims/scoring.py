"""Confidence and tiers (docs/design.md §9): a sigmoid over evidence, then a tier router.

The extractor's own confidence comes first from the words of the claim's sentence
(`wording_confidence`): a direct first-person statement keeps the extractor's value; a hedge, a
question, reported speech, a plan or a wish caps it. Corroboration then raises it through
`score`, and the tier follows the result.
"""

from __future__ import annotations

import math
import re
from enum import StrEnum
from typing import Final

from memwrite.claims.candidate import MemoryType, Tier
from memwrite.config.settings import ScoringConfig

__all__ = ["CUE_CEILINGS", "WordingCue", "score", "tier_for", "wording_confidence", "wording_cues"]


class WordingCue(StrEnum):
    """How a sentence holds back from stating a claim as plain fact."""

    HEDGE = "hedge"  # "I think", "maybe", "probably", "I guess", "kind of"
    QUESTION = "question"  # "I'm allergic to nuts?"
    REPORTED = "reported"  # "my wife says I'm a workaholic", "apparently"
    PLAN = "plan"  # "I'm going to move to Denver"
    WISH = "wish"  # "I'd love to live in Lisbon"


# The most an extractor may claim for a sentence with the cue. With the default ScoringConfig a
# capped claim lands in CANDIDATE (searchable, not injected) until corroboration lifts it.
CUE_CEILINGS: Final[dict[WordingCue, float]] = {
    WordingCue.HEDGE: 0.6,
    WordingCue.QUESTION: 0.5,
    WordingCue.REPORTED: 0.5,
    WordingCue.PLAN: 0.5,
    WordingCue.WISH: 0.4,
}

_APOS = "['’]"
_CUE_PATTERNS: Final[dict[WordingCue, re.Pattern[str]]] = {
    WordingCue.HEDGE: re.compile(
        rf"\b(?:i\s+think|i\s+guess|i\s+suppose|i\s+believe|i\s+reckon|i\s+feel\s+like"
        rf"|i{_APOS}m\s+not\s+(?:sure|certain)|not\s+sure|pretty\s+sure|maybe|probably|perhaps"
        rf"|possibly|might|kind\s+of|sort\s+of|kinda|sorta|more\s+or\s+less|somewhat"
        rf"|seems?\s+like|i\s+doubt)\b",
        re.IGNORECASE,
    ),
    WordingCue.REPORTED: re.compile(
        r"\b(?:apparently|supposedly|allegedly|according\s+to|rumou?r\s+has\s+it"
        r"|(?:he|she|they|people|everyone|someone|mom|mum|dad|(?:my|his|her|their)\s+\w+)"
        r"\s+(?:says?|said|thinks?|thought|claims?|claimed|told\s+me|tells\s+me))\b",
        re.IGNORECASE,
    ),
    WordingCue.PLAN: re.compile(
        rf"\b(?:going\s+to|gonna|plan(?:ning)?\s+to|plan\s+on|about\s+to|intend\s+to"
        rf"|thinking\s+(?:about|of)|considering|will|i{_APOS}ll|we{_APOS}ll|next\s+(?:week"
        rf"|month|year|summer|spring|fall|winter))\b",
        re.IGNORECASE,
    ),
    WordingCue.WISH: re.compile(
        rf"\b(?:wish|hope\s+to|hoping\s+to|want\s+to|wanna|would\s+(?:love|like)\s+to"
        rf"|i{_APOS}d\s+(?:love|like)\s+to|dream\s+of|someday|one\s+day)\b",
        re.IGNORECASE,
    ),
}


def wording_cues(sentence: str) -> frozenset[WordingCue]:
    """The cues in one sentence (or clause) that make it less than a plain statement."""
    cues = {cue for cue, pattern in _CUE_PATTERNS.items() if pattern.search(sentence)}
    if sentence.rstrip().endswith("?"):
        cues.add(WordingCue.QUESTION)
    return frozenset(cues)


def wording_confidence(confidence: float, cues: frozenset[WordingCue]) -> float:
    """The extractor's confidence capped by the strongest cue; no cue keeps it."""
    return min([confidence, *(CUE_CEILINGS[cue] for cue in cues)])


_EPSILON = 1e-4  # keeps logit finite at confidence 0 or 1


def _logit(p: float) -> float:
    p = min(max(p, _EPSILON), 1 - _EPSILON)
    return math.log(p / (1 - p))


def score(
    *,
    extractor_confidence: float,
    source: str,
    corroboration: int,
    in_conflict: bool,
    memory_type: MemoryType,
    config: ScoringConfig,
) -> float:
    """C = sigmoid(logit(E) + a*S + b*K - g*F + d*T - bias), rounded to 4 places."""
    z = (
        _logit(extractor_confidence)
        + config.weight_source * config.source_weights.get(source, 0.0)
        + config.weight_corroboration * min(max(corroboration - 1, 0), config.max_corroboration)
        - config.weight_conflict * (1.0 if in_conflict else 0.0)
        + config.weight_kind * config.kind_bonus.get(memory_type.value, 0.0)
        - config.bias
    )
    return round(1 / (1 + math.exp(-z)), 4)


def tier_for(confidence: float, *, in_conflict: bool, config: ScoringConfig) -> Tier:
    if in_conflict:
        return Tier.CHALLENGED
    if confidence < config.tier_quarantine_below:
        return Tier.QUARANTINE
    if confidence < config.tier_candidate_below:
        return Tier.CANDIDATE
    if confidence >= config.tier_fact_at_least:
        return Tier.FACT
    return Tier.WORKING
