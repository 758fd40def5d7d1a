"""What a keyed candidate does to its entity_facts row: conflict's decision (stage 5), which
persist makes again on a fresh read when its transaction is refused (`decide_row`), and the
row's derived state applied to one of its memories (`apply_state`: persist, patch and rollback
write memories with it).

A row's state is derived from the set of its observations (`memwrite.records.entity_facts.derive`):
stateful predicates supersede by `observed_at`, idempotent ones link contradictions.
"""

from __future__ import annotations

from memwrite.claims.scoring import score, tier_for
from memwrite.config.settings import PipelineConfig
from memwrite.payloads import ConflictNote, DedupeNote
from memwrite.records.entity_facts import DerivedState, FactObservation, canonical_predicate, derive
from memwrite.records.memory import DIRECT_SOURCE, MemoryLink, MemoryUnit, normalise
from memwrite.records.store import FactRow, StoreItem

__all__ = ["apply_state", "decide_row"]


def decide_row(item: StoreItem, dedupe: DedupeNote, row: FactRow) -> ConflictNote | None:
    """The row's state once this candidate is in it; None for unkeyed types."""
    fact_key = item.fact_key
    if fact_key is None:
        return None
    candidate = item.candidate
    target = dedupe.written_id
    prior = row.facts.get(target)
    direct = item.source == DIRECT_SOURCE
    # A direct write states the fact as explicitly as a correction: either may replace a pin.
    corrected_at = item.observed_at if candidate.correction or direct else None
    if prior is not None:  # a merge: the memory's own value and polarity, seen again
        corrections = [at for at in (prior.corrected_at, corrected_at) if at is not None]
        observation = prior.model_copy(
            update={
                "observed_at": max(prior.observed_at, item.observed_at),
                "direct": prior.direct or direct,
                "pinned": prior.pinned or item.pinned,
                "corrected_at": max(corrections, default=None),
            }
        )
    else:
        _, negated = canonical_predicate(candidate.attribute, candidate.negated)
        observation = FactObservation(
            memory_id=target,
            value=normalise(candidate.value),
            negated=negated,
            observed_at=item.observed_at,
            direct=direct,
            pinned=item.pinned,
            corrected_at=corrected_at,
        )
    stateful = candidate.predicate_is_stateful
    before = derive(row.facts, stateful=stateful)
    state = derive({**row.facts, target: observation}, stateful=stateful)
    return ConflictNote(
        fact_key=fact_key,
        row_version=row.version,
        observation=observation,
        state=state,
        supersedes=sorted(
            mid for mid in state.superseded_by if mid != target and mid not in before.superseded_by
        ),
        contradicts=sorted(state.contradicts.get(target, ())),
        born_superseded=target in state.superseded_by,
    )


def apply_state(memory: MemoryUnit, state: DerivedState, config: PipelineConfig) -> MemoryUnit:
    """Re-derive what conflict and scoring decide for one memory of the row."""
    in_conflict = memory.memory_id in state.challenged
    confidence = score(
        extractor_confidence=memory.extractor_confidence,
        source=memory.source,
        corroboration=memory.corroboration,
        in_conflict=in_conflict,
        memory_type=memory.type,
        config=config.scoring,
    )
    return memory.model_copy(
        update={
            "superseded_by": state.superseded_by.get(memory.memory_id),
            "valid_until": state.valid_until.get(memory.memory_id),
            "links": [
                MemoryLink(kind="contradicts", memory_id=other)
                for other in sorted(state.contradicts.get(memory.memory_id, ()))
            ],
            "confidence": confidence,
            "tier": tier_for(confidence, in_conflict=in_conflict, config=config.scoring),
        }
    )
