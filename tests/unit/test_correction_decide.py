"""`memwrite.decisions.fact_row.decide_row` with explicit corrections: a candidate the user
states as a correction replaces a pinned memory, as a new memory or merged into one that was
challenged, and the trace's reason is the ordinary `Supersedes`."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from memwrite.claims.candidate import Candidate, MemoryType, Quality
from memwrite.conflict.stage import _reason
from memwrite.decisions.fact_row import decide_row
from memwrite.payloads import DedupeNote
from memwrite.reasons import PinnedMemory, Supersedes
from memwrite.records.entity_facts import FactObservation
from memwrite.records.memory import DIRECT_SOURCE
from memwrite.records.store import FactRow, StoreItem


def day(number: int) -> datetime:
    return datetime(2025, 1, number, tzinfo=UTC)


def item(value: str, on: int, *, correction: bool) -> StoreItem:
    candidate = Candidate(
        text=f"The user lives in {value}.",
        type=MemoryType.FACT,
        topic="location",
        entity="user",
        attribute="lives_in",
        value=value,
        predicate_is_stateful=True,
        importance=0.8,
        confidence=0.9,
        grounded=True,
        quality=Quality(verdict="keep", reason="explicit statement"),
        search_questions=["Where does the user live?", "Which city?", "Home town?"],
        correction=correction,
    )
    return StoreItem(
        candidate=candidate,
        entity_id="user",
        tenant="t",
        user_id="u",
        session_id="s",
        trace_id="trace",
        turn_id=f"turn-{on}",
        observed_at=day(on),
        source="chat",
    )


def pinned_berlin(on: int = 1) -> FactObservation:
    return FactObservation(
        memory_id="berlin", value="berlin", negated=False, observed_at=day(on), pinned=True
    )


def new(memory_id: str) -> DedupeNote:
    return DedupeNote(memory_id=memory_id, target=None, tier=None)


def test_a_correction_supersedes_a_pinned_memory_and_says_so() -> None:
    # Given a row with Berlin pinned
    row = FactRow(facts={"berlin": pinned_berlin()}, version=3)

    # When a later turn corrects it
    note = decide_row(item("Lisbon", 2, correction=True), new("lisbon"), row)

    # Then Lisbon is current, Berlin ends at it, and the reason is the ordinary supersession
    assert note is not None
    assert note.observation.corrected_at == day(2)
    assert note.state.current == "lisbon"
    assert note.supersedes == ["berlin"]
    assert _reason(note) == Supersedes(count=1)


def test_a_plain_statement_is_challenged_beside_the_pinned_memory() -> None:
    row = FactRow(facts={"berlin": pinned_berlin()}, version=3)

    note = decide_row(item("Lisbon", 2, correction=False), new("lisbon"), row)

    assert note is not None
    assert note.observation.corrected_at is None
    assert note.state.current == "berlin" and note.supersedes == []
    assert _reason(note) == PinnedMemory(memory_id="berlin")


def test_a_correction_merged_into_a_challenged_memory_replaces_the_pin() -> None:
    # Given Lisbon said plainly on day 2, challenged beside pinned Berlin
    lisbon = FactObservation(memory_id="lisbon", value="lisbon", negated=False, observed_at=day(2))
    row = FactRow(facts={"berlin": pinned_berlin(), "lisbon": lisbon}, version=4)

    # When the user corrects Berlin to Lisbon on day 3 (dedupe merges it into the same memory)
    merged = DedupeNote(memory_id="lisbon", target="lisbon", tier=1)
    note = decide_row(item("Lisbon", 3, correction=True), merged, row)

    # Then the merged observation carries the correction and Lisbon takes over
    assert note is not None
    assert note.observation.corrected_at == day(3)
    assert note.state.current == "lisbon"
    assert note.state.challenged == set()
    assert note.supersedes == ["berlin"]


def test_a_plain_restatement_keeps_the_time_of_the_correction() -> None:
    # Given Lisbon, stated as a correction on day 2
    lisbon = FactObservation(
        memory_id="lisbon", value="lisbon", negated=False, observed_at=day(2), corrected_at=day(2)
    )
    row = FactRow(facts={"lisbon": lisbon}, version=1)

    # When it is restated plainly on day 5 (merged)
    later = decide_row(
        item("Lisbon", 5, correction=False),
        DedupeNote(memory_id="lisbon", target="lisbon", tier=1),
        row,
    )

    # Then the observation moves to day 5 but the correction stays dated day 2
    assert later is not None
    assert later.observation.observed_at == day(5)
    assert later.observation.corrected_at == day(2)


def test_a_direct_write_restated_plainly_after_a_newer_pin_is_challenged() -> None:
    # Given Lisbon written directly on day 2 (a new memory), then Berlin pinned on day 3
    direct = replace(item("Lisbon", 2, correction=False), source=DIRECT_SOURCE)
    first = decide_row(direct, new("lisbon"), FactRow(facts={}, version=0))
    assert first is not None and first.observation.corrected_at == day(2)
    row = FactRow(facts={"lisbon": first.observation, "berlin": pinned_berlin(3)}, version=2)

    # When a turn on day 4 restates Lisbon plainly (merged into the direct memory)
    merged = DedupeNote(memory_id="lisbon", target="lisbon", tier=None)
    note = decide_row(item("Lisbon", 4, correction=False), merged, row)

    # Then the pin holds: the direct write came before it, the restatement is inferred
    assert note is not None
    assert note.state.current == "berlin"
    assert _reason(note) == PinnedMemory(memory_id="berlin")
