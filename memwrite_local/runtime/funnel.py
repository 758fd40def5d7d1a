"""The rejection funnel of a run: turns in, dropped per stage and per reason, survivors."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from pydantic import BaseModel, Field

from memwrite.models import SpanResult, StageSpan
from memwrite.reasons import Reason
from memwrite.stages import stage_names

__all__ = ["Funnel", "build_funnel", "reason_label", "render_funnel"]


class Funnel(BaseModel):
    turns_in: int
    dropped: dict[str, dict[str, int]] = Field(
        description="stage -> reason label -> turns dropped, stages in pipeline order"
    )
    errors: dict[str, int] = Field(default_factory=dict, description="stage -> failed turns")
    survivors: int = Field(description="turns that made it through every stage")
    deferred: int = Field(
        default=0, description="turns the rules could not fully handle and no LLM was set for"
    )
    candidates: int = Field(default=0, description="candidates the extractors produced")
    candidates_dropped: dict[str, int] = Field(
        default_factory=dict, description="reason label -> candidates dropped"
    )
    stored: int = Field(default=0, description="new memories written")
    merged: int = Field(default=0, description="candidates merged into an existing memory")


def reason_label(reason: Reason | None) -> str:
    """`MatchedSkipPattern{greeting_ack}`: the type plus its distinguishing field, if any."""
    if reason is None:
        return "none"
    detail = {
        "MatchedSkipPattern": "pattern",
        "UserRule": "name",
        "PolicyBlocked": "kind",
        "NonConversationalTurn": "role",
        "QualityDiscard": "reason",
    }.get(reason.type)
    return f"{reason.type}{{{getattr(reason, detail)}}}" if detail else reason.type


def build_funnel(
    turns_in: int, spans: Iterable[StageSpan], *, stored: int = 0, merged: int = 0
) -> Funnel:
    dropped: dict[str, Counter[str]] = {name: Counter() for name in stage_names()}
    errors: Counter[str] = Counter()
    candidates_dropped: Counter[str] = Counter()
    deferred = 0
    candidates: set[str] = set()
    for span in spans:
        if span.kind == "candidate":
            candidates.add(span.item_id)
        if span.reason is not None and span.reason.type == "DeferredNoLLM":
            deferred += 1
        if span.kind == "candidate":
            if span.result is SpanResult.REJECT:
                candidates_dropped[reason_label(span.reason)] += 1
        elif span.result is SpanResult.REJECT:
            dropped.setdefault(span.stage, Counter())[reason_label(span.reason)] += 1
        elif span.result is SpanResult.ERROR:
            errors[span.stage] += 1
    lost = sum(sum(counts.values()) for counts in dropped.values()) + sum(errors.values())
    return Funnel(
        turns_in=turns_in,
        dropped={stage: dict(counts.most_common()) for stage, counts in dropped.items()},
        errors=dict(errors),
        survivors=turns_in - lost,
        deferred=deferred,
        candidates=len(candidates),
        candidates_dropped=dict(candidates_dropped.most_common()),
        stored=stored,
        merged=merged,
    )


def render_funnel(funnel: Funnel) -> str:
    labels = [label for reasons in funnel.dropped.values() for label in reasons]
    labels += list(funnel.candidates_dropped)
    width = max([len(label) for label in labels] + [30]) + 4

    def row(label: str, count: int) -> str:
        return f"{label:<{width}} {count:>5}"

    lines = [row("turns in", funnel.turns_in)]
    for stage, reasons in funnel.dropped.items():
        lines.append(row(f"  {stage} dropped", sum(reasons.values())))
        lines.extend(row(f"    {label}", count) for label, count in reasons.items())
        if stage in funnel.errors:
            lines.append(row("    failed (error spans)", funnel.errors[stage]))
    lines.append(row("surviving turns", funnel.survivors))
    if funnel.deferred:
        lines.append(row("  deferred, no LLM (DeferredNoLLM)", funnel.deferred))
    lines.append(row("candidates", funnel.candidates))
    if funnel.candidates_dropped:
        lines.append(row("  candidates dropped", sum(funnel.candidates_dropped.values())))
        lines.extend(
            row(f"    {label}", count) for label, count in funnel.candidates_dropped.items()
        )
    lines.append(row("  merged into existing memories", funnel.merged))
    lines.append(row("memories stored", funnel.stored))
    return "\n".join(lines)
