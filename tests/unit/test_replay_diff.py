"""The replay diff: which items a changed config drops or keeps, at which stage, and what that
does to the memories written."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from memwrite.models import LlmUsageSummary, SpanResult, StageSpan
from memwrite.reasons import DuplicateConfirmed, NoCandidates, Reason, TooShort
from memwrite.replay.diff import FateKind, RunOutcome, Write, diff_runs, replayed_stages

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def span(
    stage: str,
    item_id: str,
    result: SpanResult = SpanResult.PASS,
    reason: Reason | None = None,
    *,
    kind: Literal["turn", "candidate"] = "turn",
    llm: LlmUsageSummary | None = None,
) -> StageSpan:
    return StageSpan(
        trace_id="trace",
        tenant="acme",
        user_id="dana",
        stage=stage,
        item_id=item_id,
        result=result,
        reason=reason,
        latency_ms=0.1,
        at=T0,
        kind=kind,
        llm=llm,
    )


def kept_turn(turn_id: str, candidate: str) -> list[StageSpan]:
    """A turn that passes every stage and yields one candidate."""
    item = f"{turn_id}:{candidate}"
    return [
        span("pre_filter", turn_id),
        span("extract", turn_id),
        *(
            span(stage, item, kind="candidate")
            for stage in ("resolve_refs", "dedupe", "conflict", "persist")
        ),
    ]


def test_a_turn_a_stricter_prefilter_drops_is_newly_dropped_with_both_reasons() -> None:
    # Given a turn kept to the end with min_words 3, writing memory m1
    before = RunOutcome(kept_turn("t1", "k1"), [Write("m1", "stored", "The user likes jazz.")])
    # When min_words 6 drops it at the pre-filter
    too_short = TooShort(word_count=3, min_words=6)
    after = RunOutcome([span("pre_filter", "t1", SpanResult.REJECT, too_short)], [])

    diff = diff_runs("trace", before, after)

    # Then the pre-filter lists it as newly dropped, kept before, with the new reason
    [change] = diff.stages["pre_filter"].newly_dropped
    assert (change.item_id, change.kind) == ("t1", "turn")
    assert change.before.fate is FateKind.KEPT
    assert (change.after.fate, change.after.stage, change.after.reason) == (
        FateKind.DROPPED,
        "pre_filter",
        too_short,
    )
    # And its candidate, absent now, is not reported as dropped anywhere
    assert all(not s.newly_dropped for name, s in diff.stages.items() if name != "pre_filter")
    # And the memory it wrote is no longer written
    assert [(m.memory_id, m.text, m.before, m.after) for m in diff.memories.no_longer_written] == [
        ("m1", "The user likes jazz.", "stored", None)
    ]
    assert diff.memories.added == diff.memories.merged == []
    assert (diff.before.stored, diff.after.stored, diff.after.discarded) == (1, 0, 1)
    assert diff.changed


def test_a_turn_dropped_at_one_stage_and_now_at_a_later_one_is_listed_at_both() -> None:
    # Given a turn the pre-filter dropped, which a looser one lets through to extraction,
    # where it holds nothing
    before = RunOutcome(
        [span("pre_filter", "t1", SpanResult.REJECT, TooShort(word_count=2, min_words=3))], []
    )
    after = RunOutcome(
        [
            span("pre_filter", "t1"),
            span("extract", "t1", SpanResult.REJECT, NoCandidates(extractor="rules")),
        ],
        [],
    )

    diff = diff_runs("trace", before, after)

    # Then the pre-filter newly keeps it and extract newly drops it, each with both fates
    [kept] = diff.stages["pre_filter"].newly_kept
    [dropped] = diff.stages["extract"].newly_dropped
    assert kept == dropped
    assert (kept.before.stage, kept.after.stage) == ("pre_filter", "extract")
    assert kept.after.reason == NoCandidates(extractor="rules")
    assert not diff.memories.added and not diff.memories.no_longer_written


def test_a_candidate_now_merged_into_an_existing_memory_is_reported_merged() -> None:
    # Given a candidate stored as a new memory m2 with the current dedupe threshold
    before = RunOutcome(kept_turn("t1", "k1"), [Write("m2", "stored", "The user lives in Berlin.")])
    # When a lower merge threshold merges it into the existing m1
    merged_spans = [
        *kept_turn("t1", "k1")[:-1],
        span("persist", "t1:k1", reason=DuplicateConfirmed(tier=2), kind="candidate"),
    ]
    after = RunOutcome(merged_spans, [Write("m1", "merged", "The user lives in Berlin.")])

    diff = diff_runs("trace", before, after)

    # Then m1 is merged into, m2 no longer written, and no item changed its fate
    assert [(m.memory_id, m.before, m.after) for m in diff.memories.merged] == [
        ("m1", None, "merged")
    ]
    assert [m.memory_id for m in diff.memories.no_longer_written] == ["m2"]
    assert all(not s.newly_dropped and not s.newly_kept for s in diff.stages.values())
    assert (diff.after.stored, diff.after.merged) == (0, 1)


def test_a_newly_kept_turn_adds_its_memory_and_its_llm_cost_counts_after() -> None:
    # Given a turn the pre-filter dropped, which the override keeps and extracts from with a
    # model call
    usage = LlmUsageSummary(calls=1, input_tokens=900, output_tokens=120, cost_usd=0.0015)
    before = RunOutcome(
        [span("pre_filter", "t1", SpanResult.REJECT, TooShort(word_count=1, min_words=3))], []
    )
    spans = kept_turn("t1", "k1")
    spans[1] = span("extract", "t1", llm=usage)
    after = RunOutcome(spans, [Write("m1", "stored", "The user has a dog named Pixel.")])

    diff = diff_runs("trace", before, after)

    # Then the memory is added, and only the replay with the override paid for the call
    assert [(m.memory_id, m.before, m.after) for m in diff.memories.added] == [
        ("m1", None, "stored")
    ]
    assert (diff.before.llm_calls, diff.after.llm_calls) == (0, 1)
    assert (diff.after.input_tokens, diff.after.output_tokens) == (900, 120)
    assert diff.after.cost_usd == 0.0015


def test_identical_runs_differ_in_nothing_and_every_replayed_stage_is_listed() -> None:
    # Given the same run twice (a stored memory, a merge, a dropped turn)
    spans = [
        *kept_turn("t1", "k1"),
        *kept_turn("t2", "k2"),
        span("pre_filter", "t3", SpanResult.REJECT, TooShort(word_count=1, min_words=3)),
    ]
    writes = [
        Write("m1", "stored", "a"),
        Write("m1", "merged", "a, said again"),
        Write("m0", "already_applied", "b"),
    ]
    run = RunOutcome(spans, writes)

    diff = diff_runs("trace", run, run)

    # Then nothing changed, and the stages are those the replay runs, in pipeline order
    assert not diff.changed
    assert list(diff.stages) == replayed_stages()
    assert "hype" not in diff.stages
    # And the counts are a trace's: distinct memories stored and merged into (m1 in both), a
    # merge made by the trace's first run included
    assert (diff.before.stored, diff.before.merged, diff.before.discarded) == (1, 2, 1)
