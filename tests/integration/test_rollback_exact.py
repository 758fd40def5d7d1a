"""A rollback undoes a trace exactly, on both backends: whatever the order of the moves and
whichever trace is rolled back, the user's memories end as if that trace had never been sent
(a property test with hypothesis; persist and the rollback run against the real stores)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memwrite.adapters.in_memory import CountingMetrics, InMemorySpanStore
from memwrite.adapters.sqlite.database import SqliteDatabase
from memwrite.adapters.sqlite.embedded_index import EmbeddedIndex
from memwrite.adapters.sqlite.ledger import SqliteTurnLedger
from memwrite.adapters.sqlite.rollback import SqliteTraceRollback
from memwrite.adapters.sqlite.store import SqliteMemoryStore
from memwrite.edit.rollback import RollbackDeps, rollback_trace
from memwrite.models import SpanResult, StageSpan
from memwrite.persist.stage import STAGE as PERSIST
from memwrite.persist.stage import persist_candidate
from memwrite.ports import MemoryStore, TraceRecord, TraceRollback, TurnLedger
from memwrite.stages import stream_stages
from memwrite.wiring import build_api_function_deps
from memwrite_local.runtime.aws import LocalAws
from tests.integration.test_memory_store import CITIES, CONFIG, deps_for, item


@dataclass
class Backend:
    store: MemoryStore
    ledger: TurnLedger
    rollbacks: TraceRollback


@pytest.fixture(scope="module", params=["moto", "sqlite"])
def backend(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Backend]:
    if request.param == "sqlite":
        database = SqliteDatabase(tmp_path_factory.mktemp("sqlite"))
        yield Backend(
            SqliteMemoryStore(database), SqliteTurnLedger(database), SqliteTraceRollback(database)
        )
        database.close()
        return
    with LocalAws():
        deps = build_api_function_deps()
        yield Backend(deps.query.store, deps.ledger, deps.rollback.rollbacks)


_users = itertools.count()


def send(backend: Backend, user: str, moves: list[tuple[int, str, int]]) -> None:
    """Each (trace number, city, day) as its own trace, persisted and complete."""
    for number, city, day in moves:
        trace_id, turn = f"{user}-trace-{number}", f"{user}-turn-{number}"
        stored = replace(item(user, f"I live in {city}.", day=day, turn=turn), trace_id=trace_id)
        backend.ledger.put_trace(
            TraceRecord(trace_id, "acme", user, "s1", None, "user_explicit", "", (turn,))
        )
        persist_candidate(stored, CONFIG, deps_for(backend.store))


def done_spans(backend: Backend, user: str, trace_id: str, turn_id: str) -> list[StageSpan]:
    """The spans of a complete trace: its turn persisted, and what it wrote indexed."""
    span = StageSpan(
        trace_id=trace_id,
        tenant="acme",
        user_id=user,
        stage=PERSIST,
        item_id=turn_id,
        result=SpanResult.PASS,
        latency_ms=0,
        at=datetime.now(UTC),
    )
    indexed = [
        span.model_copy(update={"stage": stream_stages()[0].name, "item_id": f"{memory_id}#1"})
        for memory_id, _ in backend.ledger.memories_of_trace("acme", trace_id)
    ]
    return [span, *indexed]


def state(backend: Backend, user: str) -> dict[str, tuple[Any, ...]]:
    """Each city's memory as a reader sees it, its links by city (ids differ per user)."""
    memories = backend.store.memories_of("acme", user)
    city = {m.memory_id: m.value for m in memories}
    return {
        m.value: (
            city.get(m.superseded_by or ""),
            m.valid_until,
            m.tier,
            m.confidence,
            m.corroboration,
            m.active,
        )
        for m in memories
    }


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    moves=st.lists(
        st.tuples(st.sampled_from(CITIES), st.integers(min_value=0, max_value=365)),
        min_size=1,
        max_size=4,
        unique_by=(lambda move: move[0], lambda move: move[1]),
    ),
    order=st.randoms(use_true_random=False),
    chosen=st.integers(min_value=0),
)
def test_a_rolled_back_trace_leaves_the_store_as_if_it_was_never_sent(
    backend: Backend,
    moves: list[tuple[str, int]],
    order: Any,
    chosen: int,
) -> None:
    # Given moves of one user, each its own trace, sent in any order
    sent = [(number, city, day) for number, (city, day) in enumerate(moves)]
    order.shuffle(sent)
    user, reference = f"u-{next(_users)}", f"u-{next(_users)}"
    send(backend, user, sent)
    rolled_back = sent[chosen % len(sent)]
    # When one of them is rolled back
    spans = InMemorySpanStore()
    trace_id = f"{user}-trace-{rolled_back[0]}"
    spans.put_spans(done_spans(backend, user, trace_id, f"{user}-turn-{rolled_back[0]}"))
    deps = RollbackDeps(
        ledger=backend.ledger,
        spans=spans,
        store=backend.store,
        rollbacks=backend.rollbacks,
        index=EmbeddedIndex(),
        metrics=CountingMetrics(),
    )
    record = rollback_trace("acme", trace_id, CONFIG, deps, requested_via="api")
    # Then the store is what the other moves alone give another user
    send(backend, reference, [move for move in sent if move != rolled_back])
    assert state(backend, user) == state(backend, reference)
    assert len(record.removed) == 1
    # And a second rollback returns the record and changes nothing
    before = state(backend, user)
    assert rollback_trace("acme", trace_id, CONFIG, deps, requested_via="api") == record
    assert state(backend, user) == before
