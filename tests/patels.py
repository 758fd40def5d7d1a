"""Two known Patels and a claim about "Mr. Patel": a reference only the resolve judge can settle
(the recorded reply `resolve_decision` picks Raj, the manager)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memwrite.claims.candidate import Candidate, MemoryType, Quality
from memwrite.claims.entities import Entity, EntityKind

TENANT, USER = "acme", "u-1"
AT = datetime(2025, 3, 14, 10, 0, tzinfo=UTC)
TURN = "Mr. Patel from work approved my leave for May."


def patels() -> list[Entity]:
    """Two known Patels: "Mr. Patel" is a variant of both, so only the judge can tell."""
    seen = AT - timedelta(days=3)
    return [
        Entity.create(
            TENANT, USER, "Raj Patel", kind=EntityKind.PERSON, at=seen, aliases=["my manager"]
        ),
        Entity.create(
            TENANT, USER, "Nina Patel", kind=EntityKind.PERSON, at=seen, aliases=["my neighbor"]
        ),
    ]


def leave_claim() -> Candidate:
    """The claim of `TURN`, from turn "turn-1"."""
    return Candidate(
        text="Mr. Patel approved the user's leave for May.",
        type=MemoryType.EVENT,
        topic="work",
        entity="Mr. Patel",
        attribute="approved_leave",
        value="May",
        predicate_is_stateful=False,
        importance=0.5,
        confidence=0.9,
        grounded=True,
        quality=Quality(verdict="keep", reason="explicit statement"),
        search_questions=["Who approved the leave?", "When is the leave?", "Is leave approved?"],
        source_turn_id="turn-1",
    )
