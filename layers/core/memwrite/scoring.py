"""Confidence and tiers (DESIGN.md section 2): a sigmoid over evidence, then a tier router."""

from __future__ import annotations

import math

from memwrite.candidate import MemoryType
from memwrite.config import ScoringConfig
from memwrite.memory import Tier

__all__ = ["score", "tier_for"]

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
