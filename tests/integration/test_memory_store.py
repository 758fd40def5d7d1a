"""The memory store on both backends: supersession, dedupe, contradictions, retries and races.

Candidates come from the real rule extractor (what the pipeline would produce); persist runs
against the DynamoDB adapter on moto (conditions and transactions are DynamoDB's) and against
the SQLite adapter (one `BEGIN IMMEDIATE` transaction per commit).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memwrite.adapters.in_memory import CountingMetrics, InMemorySpanStore
from memwrite.adapters.sqlite.database import SqliteDatabase
from memwrite.adapters.sqlite.embedded_index import EmbeddedIndex
from memwrite.adapters.sqlite.ledger import SqliteTurnLedger
from memwrite.adapters.sqlite.store import SqliteMemoryStore
from memwrite.claims.candidate import Candidate, Tier
from memwrite.claims.entities import entity_id_for
from memwrite.config.settings import PipelineConfig
from memwrite.embedder import HashingEmbedder
from memwrite.errors import WriteConflict
from memwrite.extract.rules import extract_with_rules
from memwrite.hype.stage import document_of
from memwrite.persist.stage import PersistDeps, PersistOutcome, persist_candidate
from memwrite.ports import MemoryStore
from memwrite.records.memory import MemoryUnit
from memwrite.records.store import Commit, StoreItem
from memwrite.wiring import build_memory_store, build_pre_filter_function_deps
from memwrite_local.runtime.aws import LocalAws
from tests.sources import record_trace

CONFIG = PipelineConfig()
T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
_turns = itertools.count()


@pytest.fixture(scope="module", params=["moto", "sqlite"])
def store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MemoryStore]:
    # One store per backend for the module; every test uses its own user, so they never meet.
    # Every candidate comes from trace-1 (`item`), recorded as ingest records it.
    if request.param == "sqlite":
        database = SqliteDatabase(tmp_path_factory.mktemp("sqlite"))
        record_trace(SqliteTurnLedger(database), "acme", "u", "trace-1")
        yield SqliteMemoryStore(database)
        database.close()
        return
    with LocalAws():
        record_trace(build_pre_filter_function_deps().ingest.ledger, "acme", "u", "trace-1")
        yield build_memory_store()


def deps_for(store: MemoryStore) -> PersistDeps:
    return PersistDeps(
        store=store,
        embedder=HashingEmbedder(),
        spans=InMemorySpanStore(),
        metrics=CountingMetrics(),
    )


def candidate(text: str) -> Candidate:
    found = extract_with_rules(text)
    assert len(found.candidates) == 1, (text, found)
    return found.candidates[0]


def item(
    user: str, text: str, day: int = 0, *, turn: str | None = None, cand: Candidate | None = None
) -> StoreItem:
    chosen = cand or candidate(text)
    entity = "user" if chosen.entity == "user" else chosen.entity
    return StoreItem(
        candidate=chosen,
        entity_id=entity_id_for("acme", user, entity),
        tenant="acme",
        user_id=user,
        session_id="s1",
        trace_id="trace-1",
        turn_id=turn or f"turn-{next(_turns)}",
        observed_at=T0 + timedelta(days=day),
        source="user_explicit",
    )


def by_value(store: MemoryStore, user: str) -> dict[str, MemoryUnit]:
    return {m.value: m for m in store.memories_of("acme", user)}


def active(store: MemoryStore, user: str, attribute: str) -> list[str]:
    return sorted(
        m.value for m in store.memories_of("acme", user) if m.attribute == attribute and m.active
    )


def test_moving_supersedes_the_old_city_and_keeps_it(store: MemoryStore) -> None:
    # Given the user lived in Berlin
    persist_candidate(item("u-move", "I live in Berlin.", day=0), CONFIG, deps_for(store))
    # When they say they moved to Lisbon later
    result = persist_candidate(
        item("u-move", "I moved to Lisbon.", day=30), CONFIG, deps_for(store)
    )
    # Then Lisbon is the one active location, Berlin is kept with a forward pointer
    memories = by_value(store, "u-move")
    assert active(store, "u-move", "lives_in") == ["Lisbon"]
    assert memories["Berlin"].superseded_by == memories["Lisbon"].memory_id
    assert memories["Berlin"].valid_until == T0 + timedelta(days=30)
    assert result.superseded == (memories["Berlin"].memory_id,)


def test_a_late_older_fact_is_stored_already_superseded(store: MemoryStore) -> None:
    # Given the newer fact arrived first
    persist_candidate(item("u-late", "I moved to Lisbon.", day=30), CONFIG, deps_for(store))
    # When the older one arrives late
    result = persist_candidate(item("u-late", "I live in Berlin.", day=0), CONFIG, deps_for(store))
    # Then it is stored, already superseded by the newer one
    memories = by_value(store, "u-late")
    assert result.born_superseded
    assert memories["Berlin"].superseded_by == memories["Lisbon"].memory_id
    assert active(store, "u-late", "lives_in") == ["Lisbon"]


def test_a_retraction_ends_the_fact_it_names(store: MemoryStore) -> None:
    persist_candidate(item("u-neg", "I live in Berlin.", day=0), CONFIG, deps_for(store))
    persist_candidate(
        item("u-neg", "I don't live in Berlin anymore.", day=10), CONFIG, deps_for(store)
    )
    assert active(store, "u-neg", "lives_in") == []
    berlin = next(m for m in store.memories_of("acme", "u-neg") if not m.negated)
    assert berlin.valid_until == T0 + timedelta(days=10)


def test_redelivery_of_the_same_turn_changes_nothing(store: MemoryStore) -> None:
    # Given a candidate persisted once
    once = item("u-redeliver", "I live in Berlin.", turn="turn-fixed")
    persist_candidate(once, CONFIG, deps_for(store))
    before = store.memories_of("acme", "u-redeliver")
    # When the same message is processed again
    again = persist_candidate(once, CONFIG, deps_for(store))
    # Then nothing is written twice
    assert again.outcome is PersistOutcome.ALREADY_APPLIED
    assert store.memories_of("acme", "u-redeliver") == before


def test_the_same_fact_from_another_turn_corroborates(store: MemoryStore) -> None:
    # Given a fact said once (WORKING) / When said again in another turn
    persist_candidate(item("u-corr", "I live in Berlin.", day=0), CONFIG, deps_for(store))
    result = persist_candidate(item("u-corr", "I live in Berlin.", day=3), CONFIG, deps_for(store))
    # Then it is one memory, corroborated, promoted to FACT
    [memory] = store.memories_of("acme", "u-corr")
    assert result.outcome is PersistOutcome.MERGED
    assert result.dedupe.tier == 1
    assert memory.corroboration == 2
    assert memory.tier is Tier.FACT
    assert memory.last_seen == T0 + timedelta(days=3)


def near_identical_events() -> tuple[Candidate, Candidate]:
    base = candidate("I live in Berlin.")  # a valid shape to derive events from
    event = {
        **base.model_dump(),
        "type": "event",
        "topic": "sport",
        "text": "The user ran the Berlin marathon on 29 September 2024.",
        "attribute": "ran",
        "value": "Berlin marathon",
        "predicate_is_stateful": False,
    }
    first = Candidate.model_validate(event)
    second = Candidate.model_validate(
        {**event, "text": "The user ran the Berlin Marathon on 29 September 2024!"}
    )
    return first, second


def test_near_identical_events_in_one_batch_give_one_memory(store: MemoryStore) -> None:
    # Given two events worded almost the same, persisted back to back (nothing indexed yet)
    first, second = near_identical_events()
    deps = deps_for(store)
    persist_candidate(item("u-event", "", cand=first), CONFIG, deps)
    result = persist_candidate(item("u-event", "", cand=second), CONFIG, deps)
    # Then the second is a tier-2 duplicate merged into the first
    assert result.outcome is PersistOutcome.MERGED
    assert result.dedupe.tier == 2
    assert len(store.memories_of("acme", "u-event")) == 1


def test_an_event_repeated_after_it_was_indexed_is_still_one_memory(
    store: MemoryStore, tmp_path: Path
) -> None:
    # Given an event persisted, indexed, and no longer pending in the outbox
    first, second = near_identical_events()
    index = EmbeddedIndex(tmp_path / "index.sqlite3", dimension=HashingEmbedder().dimension)

    class Indexed:
        """The store once hype has indexed everything: no pending outbox rows."""

        def __getattr__(self, name: str) -> object:
            return getattr(store, name)

        def pending_memories(self, tenant: str, user_id: str, limit: int) -> list[MemoryUnit]:
            return []

    deps = deps_for(Indexed())  # type: ignore[arg-type]
    stored = persist_candidate(item("u-event-late", "", cand=first), CONFIG, deps)
    (memory,) = store.get_memories("acme", "u-event-late", [stored.memory_id]).values()
    index.upsert(document_of(memory.memory))
    # When the same event is told again in a later batch
    with_index = replace(deps, index=index)
    result = persist_candidate(item("u-event-late", "", cand=second, day=3), CONFIG, with_index)
    # Then dedupe finds it through the index and merges, instead of storing a duplicate
    assert (result.outcome, result.dedupe.tier) == (PersistOutcome.MERGED, 2)
    assert len(store.memories_of("acme", "u-event-late")) == 1


def test_idempotent_predicates_contradict_instead_of_superseding(store: MemoryStore) -> None:
    # Given the user likes cilantro / When they later say they dislike it
    persist_candidate(item("u-contra", "I love cilantro.", day=0), CONFIG, deps_for(store))
    result = persist_candidate(item("u-contra", "I hate cilantro.", day=5), CONFIG, deps_for(store))
    # Then both stay, linked as contradicting, both CHALLENGED, neither superseded
    memories = store.memories_of("acme", "u-contra")
    assert len(memories) == 2
    assert all(m.tier is Tier.CHALLENGED for m in memories)
    assert all(m.superseded_by is None for m in memories)
    ids = {m.memory_id for m in memories}
    assert {link.memory_id for m in memories for link in m.links} == ids
    assert len(result.contradicts) == 1


def test_a_lost_race_is_retried_from_a_fresh_read_and_converges(
    store: MemoryStore,
) -> None:
    # Given a competing writer that commits Lisbon between our read and our commit
    class Racing:
        def __init__(self) -> None:
            self.raced = False

        def __getattr__(self, name: str) -> object:
            return getattr(store, name)

        def commit(self, commit: Commit) -> None:
            if not self.raced:
                self.raced = True
                persist_candidate(
                    item("u-race", "I moved to Lisbon.", day=30), CONFIG, deps_for(store)
                )
            store.commit(commit)

    racing = deps_for(Racing())  # type: ignore[arg-type]
    # When we persist Berlin (older)
    result = persist_candidate(item("u-race", "I live in Berlin.", day=0), CONFIG, racing)
    # Then our first commit lost, the retry re-read and both writes converged
    assert result.attempts == 2
    assert active(store, "u-race", "lives_in") == ["Lisbon"]
    assert len(store.memories_of("acme", "u-race")) == 2


def test_a_stale_commit_is_refused_whole(store: MemoryStore) -> None:
    # Given a plan made before another write moved the row's version
    from memwrite.decisions.candidate_reads import read_candidate
    from memwrite.persist.stage import decide, plan

    berlin = item("u-stale", "I live in Berlin.", day=0)
    decided, reads, _ = decide(berlin, read_candidate(store, berlin), CONFIG, deps_for(store))
    stale = plan(berlin, decided, reads, CONFIG, T0)
    persist_candidate(item("u-stale", "I moved to Lisbon.", day=9), CONFIG, deps_for(store))
    before = store.memories_of("acme", "u-stale")
    # When the stale plan is committed / Then nothing of it is applied
    assert stale.commit is not None
    with pytest.raises(WriteConflict):
        store.commit(stale.commit)
    assert store.memories_of("acme", "u-stale") == before


CITIES = ["Berlin", "Lisbon", "Paris", "Rome", "Oslo"]
_users = itertools.count()


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    changes=st.lists(
        st.tuples(st.sampled_from(CITIES), st.integers(min_value=0, max_value=365)),
        min_size=1,
        max_size=5,
        unique_by=lambda change: change[1],
    ),
    order=st.randoms(use_true_random=False),
)
def test_any_order_and_any_redelivery_converge(
    store: MemoryStore, changes: list[tuple[str, int]], order: object
) -> None:
    # Given timestamped moves, each delivered three times in a random order
    user = f"u-prop-{next(_users)}"
    deliveries = [(city, day, f"turn-{day}") for city, day in changes] * 3
    order.shuffle(deliveries)  # type: ignore[attr-defined]
    # When all are persisted
    for city, day, turn in deliveries:
        persist_candidate(
            item(user, f"I live in {city}.", day=day, turn=turn), CONFIG, deps_for(store)
        )
    # Then the active city is the latest one, and each city is one memory
    latest = max(changes, key=lambda change: change[1])[0]
    assert active(store, user, "lives_in") == [latest]
    memories = store.memories_of("acme", user)
    assert sorted(m.value for m in memories) == sorted({city for city, _ in changes})
