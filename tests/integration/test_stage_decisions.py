"""Dedupe, conflict and persist each do their own job once: one ambiguous pair costs one LLM
judge call in a clean run (counted at the HTTP level, through the real anthropic client), and
persist decides again only when what the earlier stages decided no longer holds.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from memwrite.adapters.anthropic.dedupe_judge import AnthropicDedupeJudge
from memwrite.adapters.in_memory import CountingMetrics, InMemorySpanStore
from memwrite.claims.entities import entity_id_for
from memwrite.config.settings import DedupeConfig, ExtractConfig, PipelineConfig
from memwrite.conflict import stage as conflict
from memwrite.dedupe import stage as dedupe
from memwrite.errors import StoreUnavailable
from memwrite.extract.rules import extract_with_rules
from memwrite.payloads import ExtractedTurn, Extractor, ItemsPayload, PipelineItem
from memwrite.persist import stage as persist
from memwrite.ports import MemoryStore
from memwrite.records.store import StoreItem
from memwrite.wiring import build_memory_store, build_pre_filter_function_deps
from memwrite_local.runtime.aws import LocalAws
from tests.embedders import FixedSimilarityEmbedder
from tests.recorded_api import RecordedApi
from tests.sources import record_trace

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
# 0.86 sits in the judge's band: below merge (0.92), above distinct (0.80).
CONFIG = PipelineConfig(
    dedupe=DedupeConfig(dedupe_merge_threshold=0.92, dedupe_distinct_threshold=0.80)
)
IN_BAND = FixedSimilarityEmbedder(0.86)


@pytest.fixture
def store() -> Iterator[MemoryStore]:
    with LocalAws():
        # The traces the turns t1..t3 come from (`payload_of`), recorded as ingest records them.
        ledger = build_pre_filter_function_deps().ingest.ledger
        for turn in ("t1", "t2", "t3"):
            record_trace(ledger, "acme", "u1", f"trace-{turn}")
        yield build_memory_store()


def judge_for(api: RecordedApi) -> AnthropicDedupeJudge:
    return AnthropicDedupeJudge(
        ExtractConfig(),
        api_key="test-key",
        base_url="http://testserver",
        http_client=api.client(),
        max_retries=0,
    )


def payload_of(text: str, turn: str, day: int) -> ItemsPayload:
    (candidate,) = extract_with_rules(text).candidates
    observed = T0 + timedelta(days=day)
    item = PipelineItem(
        candidate=candidate,
        entity_id=entity_id_for("acme", "u1", "user"),
        turn_id=turn,
        trace_id=f"trace-{turn}",
        observed_at=observed,
    )
    return ItemsPayload(
        tenant="acme",
        user_id="u1",
        session_id="s1",
        source="user_explicit",
        turns=[
            ExtractedTurn(
                turn_id=turn,
                trace_id=f"trace-{turn}",
                observed_at=observed,
                extractor=Extractor.RULES,
            )
        ],
        items=[item],
    )


def run_stages(
    payload: ItemsPayload, store: MemoryStore, judge: AnthropicDedupeJudge | None
) -> ItemsPayload:
    spans, metrics = InMemorySpanStore(), CountingMetrics()
    deduped = dedupe.run(payload, CONFIG, dedupe.DedupeDeps(store, IN_BAND, spans, metrics, judge))
    decided = conflict.run(deduped, CONFIG, conflict.ConflictDeps(store, spans, metrics))
    return persist.run(
        decided, CONFIG, persist.PersistDeps(store, IN_BAND, spans, metrics, judge=judge)
    )


def test_one_ambiguous_pair_asks_the_judge_once_in_a_clean_run(store: MemoryStore) -> None:
    # Given "lives in Berlin" stored, and a candidate in the judge's band ("Berlin, Germany")
    run_stages(payload_of("I live in Berlin.", "t1", day=0), store, judge=None)
    api = RecordedApi("dedupe_same")  # one recorded answer: a second call would fail
    # When the candidate goes through dedupe, conflict and persist
    out = run_stages(payload_of("I live in Berlin, Germany.", "t2", day=3), store, judge_for(api))
    # Then the judge was asked once, and persist merged exactly what dedupe decided
    assert len(api.requests) == 1
    (item,) = out.items
    assert item.dedupe is not None
    assert (item.dedupe.tier, item.outcome) == (3, "merged")
    (memory,) = store.memories_of("acme", "u1")
    assert memory.corroboration == 2


def test_persist_decides_again_only_when_the_row_moved_underneath(
    store: MemoryStore,
) -> None:
    # Given the same pair, decided by dedupe and conflict
    run_stages(payload_of("I live in Berlin.", "t1", day=0), store, judge=None)
    api = RecordedApi("dedupe_same", "dedupe_same")
    judge = judge_for(api)
    spans, metrics = InMemorySpanStore(), CountingMetrics()
    decided = conflict.run(
        dedupe.run(
            payload_of("I live in Berlin, Germany.", "t2", day=3),
            CONFIG,
            dedupe.DedupeDeps(store, IN_BAND, spans, metrics, judge),
        ),
        CONFIG,
        conflict.ConflictDeps(store, spans, metrics),
    )
    # When another writer changes the row before persist commits (a move to Lisbon)
    run_stages(payload_of("I moved to Lisbon.", "t3", day=5), store, judge=None)
    (item,) = decided.items
    result = persist.persist_candidate(
        StoreItem.of(decided, item),
        CONFIG,
        persist.PersistDeps(store, IN_BAND, spans, metrics, judge=judge),
        decided=persist.Decisions(item.dedupe, item.conflict),  # type: ignore[arg-type]
    )
    # Then persist decided again on a fresh read (one more judge call) and still merged
    assert result.decided_again
    assert len(api.requests) == 2
    assert result.outcome is persist.PersistOutcome.MERGED
    active = [m.value for m in store.memories_of("acme", "u1") if m.active]
    assert active == ["Lisbon"]


def test_a_clean_run_never_decides_again(store: MemoryStore) -> None:
    # Given nothing stored / When two facts of one row go through the stages in one batch
    first = payload_of("I live in Berlin.", "t1", day=0)
    second = payload_of("I moved to Lisbon.", "t2", day=4)
    batch = first.model_copy(
        update={"turns": first.turns + second.turns, "items": first.items + second.items}
    )
    spans, metrics = InMemorySpanStore(), CountingMetrics()
    deduped = dedupe.run(batch, CONFIG, dedupe.DedupeDeps(store, IN_BAND, spans, metrics))
    decided = conflict.run(deduped, CONFIG, conflict.ConflictDeps(store, spans, metrics))
    deps = persist.PersistDeps(store, IN_BAND, spans, metrics)
    results = [
        persist.persist_candidate(
            StoreItem.of(decided, item),
            CONFIG,
            deps,
            decided=persist.Decisions(item.dedupe, item.conflict),  # type: ignore[arg-type]
        )
        for item in decided.items
    ]
    # Then the second saw the first as conflict recorded it: nothing was decided twice
    assert [r.decided_again for r in results] == [False, False]
    assert results[1].superseded == (results[0].memory_id,)


def test_a_store_outage_leaves_error_spans_for_what_was_not_written(
    store: MemoryStore,
) -> None:
    # Given a batch of two decided candidates and a store that refuses every commit
    first = payload_of("I live in Berlin.", "t1", day=0)
    second = payload_of("I'm allergic to peanuts.", "t2", day=0)
    batch = first.model_copy(
        update={"turns": first.turns + second.turns, "items": first.items + second.items}
    )
    spans, metrics = InMemorySpanStore(), CountingMetrics()
    deduped = dedupe.run(batch, CONFIG, dedupe.DedupeDeps(store, IN_BAND, spans, metrics))
    decided = conflict.run(deduped, CONFIG, conflict.ConflictDeps(store, spans, metrics))

    class Down:
        def __getattr__(self, name: str) -> object:
            return getattr(store, name)

        def commit(self, commit: object) -> None:
            raise StoreUnavailable("DynamoDB TransactWriteItems failed: InternalServerError")

    deps = persist.PersistDeps(Down(), IN_BAND, spans, metrics)  # type: ignore[arg-type]
    # When persist runs / Then the error propagates (the state machine's Retry/Catch)
    with pytest.raises(StoreUnavailable):
        persist.run(decided, CONFIG, deps)
    # And both candidates have a persist error span naming the error, and nothing was stored
    errors = [
        (s.item_id, s.reason)
        for trace in ("trace-t1", "trace-t2")
        for s in spans.spans_of("acme", trace)
        if s.stage == "persist"
    ]
    assert [item_id for item_id, _ in errors] == [item.item_id for item in decided.items]
    assert all(r is not None and r.model_dump()["error"] == "StoreUnavailable" for _, r in errors)
    assert store.memories_of("acme", "u1") == []
