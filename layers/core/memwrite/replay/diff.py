"""What a replay reports: the difference between two dry runs of one trace's inputs.

Pure: each run is its spans and the memories its items would write. Every item (a turn, or a
candidate `turn:key`) has a fate per run: dropped at a stage with a reason, kept to the end,
or absent (that run never produced it). An item whose fate changed is listed under the stage
that now drops it (`newly_dropped`) and the stage that dropped it before (`newly_kept`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, Field

from memwrite.models import SpanResult, StageSpan
from memwrite.reasons import KEPT_AS_EPISODE, Reason
from memwrite.stages import STAGES, StagePlacement

__all__ = [
    "Fate",
    "FateKind",
    "ItemChange",
    "MemoryChange",
    "MemoryChanges",
    "ReplayDiff",
    "RunOutcome",
    "RunSummary",
    "StageDiff",
    "Write",
    "diff_runs",
    "replayed_stages",
]


class FateKind(StrEnum):
    KEPT = "kept"  # past every stage it reached without a rejection
    DROPPED = "dropped"  # rejected (or failed) at `stage`
    ABSENT = "absent"  # this run never produced the item


class Fate(BaseModel):
    fate: FateKind
    stage: str | None = None
    reason: Reason | None = None


class ItemChange(BaseModel):
    item_id: str
    kind: Literal["turn", "candidate"]
    before: Fate
    after: Fate


class StageDiff(BaseModel):
    newly_dropped: list[ItemChange] = Field(default_factory=list)
    newly_kept: list[ItemChange] = Field(default_factory=list)


class MemoryChange(BaseModel):
    memory_id: str
    text: str
    before: str | None  # stored | merged (into it) | null: not written
    after: str | None


class MemoryChanges(BaseModel):
    added: list[MemoryChange] = Field(default_factory=list)
    merged: list[MemoryChange] = Field(default_factory=list)
    no_longer_written: list[MemoryChange] = Field(default_factory=list)


class RunSummary(BaseModel):
    stored: int
    merged: int
    discarded: int  # turns and candidates dropped, never the turns kept as episodes
    llm_calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    episodes: list[str] = Field(
        default_factory=list, description="Turn ids the run would keep as episodes."
    )


class ReplayDiff(BaseModel):
    trace_id: str
    stages: dict[str, StageDiff]  # every stage, in pipeline order
    memories: MemoryChanges
    before: RunSummary
    after: RunSummary

    @property
    def changed(self) -> bool:
        memories = self.memories
        return bool(
            memories.added
            or memories.merged
            or memories.no_longer_written
            or any(s.newly_dropped or s.newly_kept for s in self.stages.values())
        )


@dataclass(frozen=True)
class Write:
    """One item's write in a run: the memory it stores or merges into."""

    memory_id: str
    outcome: str  # stored | merged | already_applied (merged by the trace's first run)
    text: str


@dataclass(frozen=True)
class RunOutcome:
    spans: Sequence[StageSpan]
    writes: Sequence[Write]
    episodes: Sequence[str] = ()  # turn ids the run would keep as episodes


def replayed_stages() -> list[str]:
    """The stages a replay runs: the pre-filter and the pipeline (indexing writes only)."""
    return [stage.name for stage in STAGES if stage.placement is not StagePlacement.STREAM]


def _fates(spans: Sequence[StageSpan]) -> dict[str, tuple[str, Fate]]:
    """item id -> (kind, fate): the first stage, in pipeline order, that dropped it."""
    order = {name: index for index, name in enumerate(replayed_stages())}
    fates: dict[str, tuple[str, Fate]] = {}
    for span in sorted(spans, key=lambda s: order.get(s.stage, len(order))):
        known = fates.get(span.item_id)
        if known is not None and known[1].fate is FateKind.DROPPED:
            continue
        if span.result in (SpanResult.REJECT, SpanResult.ERROR):
            fate = Fate(fate=FateKind.DROPPED, stage=span.stage, reason=span.reason)
        else:
            fate = Fate(fate=FateKind.KEPT)
        fates[span.item_id] = (span.kind, fate)
    return fates


def _written(writes: Sequence[Write]) -> dict[str, tuple[str, str]]:
    """memory id -> (outcome, text); a memory stored by one item and merged by another of the
    same run counts as stored."""
    written: dict[str, tuple[str, str]] = {}
    for write in writes:
        outcome = "stored" if write.outcome == "stored" else "merged"
        if write.memory_id not in written or outcome == "stored":
            written[write.memory_id] = (outcome, write.text)
    return written


def _summary(run: RunOutcome) -> RunSummary:
    """Counted as a trace's outcome is: distinct memories stored, distinct memories merged
    into (a memory the run stores and then merges into counts in both)."""
    outcomes = {
        (write.memory_id, "stored" if write.outcome == "stored" else "merged")
        for write in run.writes
    }
    usage = [span.llm for span in run.spans if span.llm]
    return RunSummary(
        episodes=sorted(run.episodes),
        stored=sum(1 for _, outcome in outcomes if outcome == "stored"),
        merged=sum(1 for _, outcome in outcomes if outcome == "merged"),
        discarded=sum(
            1
            for span in run.spans
            if span.result is SpanResult.REJECT and not isinstance(span.reason, KEPT_AS_EPISODE)
        ),
        llm_calls=sum(llm.calls for llm in usage),
        input_tokens=sum(llm.input_tokens for llm in usage),
        output_tokens=sum(llm.output_tokens for llm in usage),
        cost_usd=round(sum(llm.cost_usd for llm in usage), 6),
    )


def _stage_changes(before: RunOutcome, after: RunOutcome) -> dict[str, StageDiff]:
    stages = {name: StageDiff() for name in replayed_stages()}
    fates_before, fates_after = _fates(before.spans), _fates(after.spans)
    absent = Fate(fate=FateKind.ABSENT)
    for item_id in sorted(fates_before.keys() | fates_after.keys()):
        kind, was = fates_before.get(item_id, (None, absent))
        kind_after, now = fates_after.get(item_id, (kind, absent))
        if was == now:
            continue
        change = ItemChange(
            item_id=item_id,
            kind="candidate" if (kind or kind_after) == "candidate" else "turn",
            before=was,
            after=now,
        )
        if now.stage is not None and now.stage != was.stage:
            stages.setdefault(now.stage, StageDiff()).newly_dropped.append(change)
        if was.stage is not None and was.stage != now.stage:
            stages.setdefault(was.stage, StageDiff()).newly_kept.append(change)
    return stages


def _memory_changes(before: RunOutcome, after: RunOutcome) -> MemoryChanges:
    changes = MemoryChanges()
    was, now = _written(before.writes), _written(after.writes)
    for memory_id in sorted(was.keys() | now.keys()):
        outcome_before, text_before = was.get(memory_id, (None, ""))
        outcome_after, text_after = now.get(memory_id, (None, ""))
        if outcome_before == outcome_after:
            continue
        change = MemoryChange(
            memory_id=memory_id,
            text=text_after or text_before,
            before=outcome_before,
            after=outcome_after,
        )
        if outcome_after is None:
            changes.no_longer_written.append(change)
        elif outcome_after == "stored":
            changes.added.append(change)
        else:
            changes.merged.append(change)
    return changes


def diff_runs(trace_id: str, before: RunOutcome, after: RunOutcome) -> ReplayDiff:
    """The difference `after` (the override) makes to `before` (the current config)."""
    return ReplayDiff(
        trace_id=trace_id,
        stages=_stage_changes(before, after),
        memories=_memory_changes(before, after),
        before=_summary(before),
        after=_summary(after),
    )
