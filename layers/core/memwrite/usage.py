"""What a model call cost: the usage record adapters produce and spans and traces sum."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LlmUsage"]


@dataclass(frozen=True)
class LlmUsage:
    """What one model call cost, whether or not its answer was usable."""

    model: str
    input_tokens: int
    output_tokens: int
    cost_usd: float
