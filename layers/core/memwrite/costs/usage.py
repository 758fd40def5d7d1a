"""What a model call cost: the usage record adapters produce and spans and traces sum.

Every answered call is also reported to the run's meter (`metered`), so a stage that fails
after paying for calls still knows what it paid: the answers' usage travels back with their
results on success, but an exception raised later (an unavailable API after a malformed answer,
a store fault after the judge ran) would otherwise drop it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

__all__ = ["LlmUsage", "metered", "metered_for_tenant", "report_usage"]


@dataclass(frozen=True)
class LlmUsage:
    """What one model call cost, whether or not its answer was usable."""

    model: str
    input_tokens: int  # uncached, as the API's `usage.input_tokens`
    output_tokens: int
    cost_usd: float  # cached tokens included (`memwrite.costs.pricing.cost_usd`)
    malformed: bool = False  # the answer was unusable (paid for all the same)
    cache_creation_input_tokens: int = 0  # the prompt prefix written to the cache
    cache_read_input_tokens: int = 0  # the prompt prefix read from the cache


# Shared by reference with worker threads that run in a copy of the context (detail passes):
# list.append is atomic, so their calls land in the same meter.
_meter: ContextVar[list[LlmUsage] | None] = ContextVar("llm_usage_meter", default=None)
_tenant_meter: ContextVar[list[LlmUsage] | None] = ContextVar("tenant_usage_meter", default=None)


def report_usage(usage: LlmUsage) -> None:
    """Count one answered call on the meter of the run it belongs to and on its tenant's
    (none: not metered)."""
    for calls in (_meter.get(), _tenant_meter.get()):
        if calls is not None:
            calls.append(usage)


@contextmanager
def metered() -> Iterator[list[LlmUsage]]:
    """Every model call answered inside the block, in order, usable or not: what a failure's
    error span and metrics charge."""
    calls: list[LlmUsage] = []
    token = _meter.set(calls)
    try:
        yield calls
    finally:
        _meter.reset(token)


@contextmanager
def metered_for_tenant() -> Iterator[list[LlmUsage]]:
    """Every model call answered inside the block, `metered` blocks inside included: one
    tenant's unit of work, as `memwrite.metering.metering_for` meters it."""
    calls: list[LlmUsage] = []
    token = _tenant_meter.set(calls)
    try:
        yield calls
    finally:
        _tenant_meter.reset(token)
