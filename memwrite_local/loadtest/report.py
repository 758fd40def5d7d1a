"""The load simulator's report: the fields issue 29 names, exactly, and how each is derived.

`outcomes` reads what the real pipeline left in its SQLite file at the end of a run: for every
accepted turn, whether it became a memory (a persist span of one of its candidates), an
episode (kept, with its deferral reason) or was dropped with a typed reason (a reject span
after the pre-filter); a turn with none of the three, or dead-lettered, is lost.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

__all__ = ["LaneCost", "LoadReport", "Outcomes", "percentile", "render_text"]


class LaneCost(BaseModel):
    model_config = ConfigDict(extra="forbid")

    live: float
    batch: float


class LoadReport(BaseModel):
    """`memwrite loadtest --json`: one object with exactly these fields."""

    model_config = ConfigDict(extra="forbid")

    turns_in: int
    turns_lost: int
    deferred_without_reason: int
    episodes_pending_at_end: int
    episodes_in_batches_at_end: int
    p50_turn_to_memory_s: float | None
    p99_turn_to_memory_s: float | None
    rate_limited_ratio: float
    fairness_ratio: float | None
    max_queue_depth: int
    model_calls_per_turn: float
    input_tokens_per_turn: float
    cached_input_share: float
    output_tokens_per_turn: float
    cost_per_million_turns_usd: LaneCost
    wall_s: float


@dataclass(frozen=True)
class Outcomes:
    """What became of the accepted turns (counts; `lost` is the turn ids)."""

    memory: int
    episode: int
    dropped: int
    lost: frozenset[str]
    episode_turns: frozenset[str]
    deferred_without_reason: int
    episodes_pending: int
    episodes_in_batches: int


def percentile(values: Sequence[float], fraction: float) -> float | None:
    """The nearest-rank percentile; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def render_text(report: LoadReport, notes: Sequence[str]) -> str:
    """The report for a terminal: the fields, then what the run was (limits, data, lanes)."""
    width = max(len(name) for name in LoadReport.model_fields)
    lines = []
    for name, value in report.model_dump().items():
        if isinstance(value, dict):
            shown = ", ".join(f"{lane} {amount:.2f}" for lane, amount in value.items())
        elif isinstance(value, float):
            shown = f"{value:.4g}"
        else:
            shown = str(value)
        lines.append(f"{name:<{width}}  {shown}")
    return "\n".join([*lines, "", *notes]) + "\n"
