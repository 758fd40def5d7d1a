"""Confidence from the words of a claim, then the sigmoid and the tier that follow from it."""

from __future__ import annotations

import pytest

from memwrite.claims.candidate import MemoryType, Tier
from memwrite.claims.scoring import WordingCue, score, tier_for, wording_confidence, wording_cues
from memwrite.config.settings import ScoringConfig

CONFIG = ScoringConfig()


@pytest.mark.parametrize(
    ("sentence", "cues"),
    [
        ("I work at a bakery in Leeds.", set()),
        ("I'm a pharmacist.", set()),
        ("I think I work best in the mornings.", {WordingCue.HEDGE}),
        ("I'm kind of a night owl.", {WordingCue.HEDGE}),
        ("Probably Thai food is my favourite.", {WordingCue.HEDGE}),
        ("I guess I'm a cat person.", {WordingCue.HEDGE}),
        ("Am I lactose intolerant?", {WordingCue.QUESTION}),
        ("My sister says I'm stubborn.", {WordingCue.REPORTED}),
        ("Apparently I snore.", {WordingCue.REPORTED}),
        ("I'm planning to learn Portuguese.", {WordingCue.PLAN}),
        ("We're going to move to Porto.", {WordingCue.PLAN}),
        ("I'd love to live by the sea.", {WordingCue.WISH}),
        ("Maybe I'll move to Porto?", {WordingCue.HEDGE, WordingCue.PLAN, WordingCue.QUESTION}),
    ],
)
def test_wording_cues_name_how_a_sentence_holds_back(sentence: str, cues: set[WordingCue]) -> None:
    # Given a sentence stating something plainly or with a hedge, question, report, plan or wish
    # When its cues are read
    found = wording_cues(sentence)
    # Then exactly those cues are found
    assert found == cues


def test_the_strongest_cue_sets_the_ceiling_and_no_cue_keeps_the_confidence() -> None:
    # Given an extractor confidence of 0.9
    # When it is capped by no cue, a hedge, and a hedge with a wish
    plain = wording_confidence(0.9, frozenset())
    hedged = wording_confidence(0.9, frozenset({WordingCue.HEDGE}))
    wished = wording_confidence(0.9, frozenset({WordingCue.HEDGE, WordingCue.WISH}))
    # Then plain stays, the hedge caps at 0.6 and the wish, stronger, at 0.4
    assert (plain, hedged, wished) == (0.9, 0.6, 0.4)


def _final(extractor_confidence: float, corroboration: int = 1) -> float:
    return score(
        extractor_confidence=extractor_confidence,
        source="user_explicit",
        corroboration=corroboration,
        in_conflict=False,
        memory_type=MemoryType.FACT,
        config=CONFIG,
    )


def test_a_hedged_fact_is_not_injected_until_it_is_corroborated() -> None:
    # Given the same fact stated plainly and hedged, from the user
    plain, hedged = _final(0.9), _final(wording_confidence(0.9, frozenset({WordingCue.HEDGE})))
    # When both are scored and tiered
    # Then the plain one is WORKING and the hedged one only a searchable CANDIDATE
    assert tier_for(plain, in_conflict=False, config=CONFIG) is Tier.WORKING
    assert tier_for(hedged, in_conflict=False, config=CONFIG) is Tier.CANDIDATE
    # And hearing the hedged fact twice more lifts it to WORKING through the sigmoid
    corroborated = _final(0.6, corroboration=3)
    assert corroborated > hedged
    assert tier_for(corroborated, in_conflict=False, config=CONFIG) is Tier.WORKING
