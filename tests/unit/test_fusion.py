"""`fuse_hybrid`: reciprocal-rank fusion (the default) and min_max, as both backends fuse."""

from __future__ import annotations

import pytest

from memwrite.config.settings import PipelineConfig
from memwrite.index import Fusion, FusionMethod, IndexHit, MatchSource, fuse_hybrid
from memwrite.read.query import episode_fusion, memory_fusion

BM25, CONTENT = frozenset({MatchSource.BM25}), frozenset({MatchSource.CONTENT})


def hits(*ids: str, matched: frozenset[MatchSource] = BM25) -> list[IndexHit]:
    # Scores far apart, best first: RRF must not care how far
    return [IndexHit(memory_id, 100.0 / (i + 1), matched) for i, memory_id in enumerate(ids)]


def test_rrf_ranks_agreement_first_whatever_the_score_gaps() -> None:
    # Given a memory first by BM25 alone, and another second in both lists
    lexical = [IndexHit("alone", 1000.0, BM25), IndexHit("both", 0.001, BM25)]
    semantic = hits("other", "both", matched=CONTENT)
    # When they are fused with equal weights
    fused = fuse_hybrid(lexical, semantic, 3, Fusion(bm25_weight=0.5))
    # Then the memory both lists found comes first, and it says both matched
    assert [h.memory_id for h in fused] == ["both", "alone", "other"]
    assert fused[0].matched == BM25 | CONTENT
    # And its score is its share of the best possible: second in both, 61/62
    assert fused[0].score == pytest.approx(61 / 62)


def test_rrf_first_in_both_lists_scores_one_and_weights_split_the_rest() -> None:
    # Given one memory first in both lists and one found by kNN only
    fused = fuse_hybrid(hits("a"), hits("a", "b", matched=CONTENT), 5, Fusion(bm25_weight=0.3))
    # Then the first scores 1.0, the other its kNN weight times its reciprocal rank
    assert [(h.memory_id, h.score) for h in fused] == [
        ("a", pytest.approx(1.0)),
        ("b", pytest.approx(0.7 * 61 / 62)),
    ]


def test_min_max_fusion_is_kept_for_who_chooses_it() -> None:
    # Given a BM25 list whose top score dwarfs the rest
    lexical = [IndexHit("x", 10.0, BM25), IndexHit("y", 1.0, BM25)]
    semantic = [IndexHit("y", 0.9, CONTENT), IndexHit("x", 0.1, CONTENT)]
    # When fused by min_max with BM25 weighing 0.3
    fused = fuse_hybrid(lexical, semantic, 2, Fusion(FusionMethod.MIN_MAX, bm25_weight=0.3))
    # Then the scores are the weighted normalised scores (y: 0.001 * 0.3 + 1.0 * 0.7)
    assert [h.memory_id for h in fused] == ["y", "x"]
    assert fused[0].score == pytest.approx(0.3 * 0.001 + 0.7)


def test_a_fusion_refuses_weights_and_constants_out_of_range() -> None:
    with pytest.raises(ValueError, match="bm25_weight"):
        Fusion(bm25_weight=1.5)
    with pytest.raises(ValueError, match="rank_constant"):
        Fusion(rank_constant=0)


def test_memories_and_episodes_take_their_fusion_from_their_own_sections() -> None:
    # Given a config fusing memories by min_max and episodes by RRF with its own weight
    config = PipelineConfig.model_validate(
        {
            "search": {"fusion": "min_max", "bm25_weight": 0.4, "rank_constant": 20},
            "episodes": {"fusion": "rrf", "bm25_weight": 0.6},
        }
    )
    # Then each kind gets its own, and both share the rank constant
    assert memory_fusion(config) == Fusion(FusionMethod.MIN_MAX, 0.4, 20)
    assert episode_fusion(config) == Fusion(FusionMethod.RRF, 0.6, 20)
