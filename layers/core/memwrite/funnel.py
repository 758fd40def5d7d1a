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
        description="stage -> reason label -> count, stages in pipeline order"
    )
    errors: dict[str, int] = Field(default_factory=dict, description="stage -> failed items")
    survivors: int


def reason_label(reason: Reason | None) -> str:
    """`MatchedSkipPattern{greeting_ack}`: the type plus its distinguishing field, if any."""
    if reason is None:
        return "none"
    detail = {
        "MatchedSkipPattern": "pattern",
        "UserRule": "name",
        "PolicyBlocked": "kind",
        "NonConversationalTurn": "role",
    }.get(reason.type)
    return f"{reason.type}{{{getattr(reason, detail)}}}" if detail else reason.type


def build_funnel(turns_in: int, spans: Iterable[StageSpan], survivors: int) -> Funnel:
    dropped: dict[str, Counter[str]] = {name: Counter() for name in stage_names()}
    errors: Counter[str] = Counter()
    for span in spans:
        if span.result is SpanResult.REJECT:
            dropped.setdefault(span.stage, Counter())[reason_label(span.reason)] += 1
        elif span.result is SpanResult.ERROR:
            errors[span.stage] += 1
    return Funnel(
        turns_in=turns_in,
        dropped={stage: dict(counts.most_common()) for stage, counts in dropped.items()},
        errors=dict(errors),
        survivors=survivors,
    )


def render_funnel(funnel: Funnel) -> str:
    labels = [label for reasons in funnel.dropped.values() for label in reasons]
    width = max([len(label) for label in labels] + [30]) + 4
    lines = [f"{'turns in':<{width}} {funnel.turns_in:>5}"]
    for stage, reasons in funnel.dropped.items():
        lines.append(f"{'  ' + stage + ' dropped':<{width}} {sum(reasons.values()):>5}")
        lines.extend(f"{'    ' + label:<{width}} {count:>5}" for label, count in reasons.items())
        if stage in funnel.errors:
            lines.append(f"{'    failed (error spans)':<{width}} {funnel.errors[stage]:>5}")
    lines.append(f"{'survivors':<{width}} {funnel.survivors:>5}")
    return "\n".join(lines)
