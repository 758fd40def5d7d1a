"""Metering one tenant's unit of work: what it used, added to the tenant's hour once.

A unit of work (an API request, a pipeline stage's batch, one memory's indexing, a backfill's
extraction batch) runs inside `metering_for(tenant, ...)`, opened where its tenant is known
(the handlers, beside the model budget's `calling_for`). Inside it:

- every model call is counted from the usage the provider answered (`memwrite.costs.usage.
  report_usage`, which the model adapters call for every answered call, a malformed or a
  retried one included);
- every text the search index's embedder embeds is counted (`MeteredEmbedder`, the embedder
  the wiring hands out);
- the intake counts its turns (`count_usage`).

When the block ends, however it ends (a failure's calls were paid for too), the counts go to
the tenant's counters of that UTC hour in one atomic add, and the calls' cost to the
CloudWatch metric of $ per tenant. A store fault there is logged and counted
(`usage.unmetered`), never raised: the work is done and paid for, and failing it would only
run (and pay for) its model calls again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from memwrite.costs.usage import LlmUsage, metered_for_tenant
from memwrite.errors import MemwriteError
from memwrite.metering.counts import UsageCounts

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from memwrite.metering.ports import UsageMeter
    from memwrite.model_ports import Embedder
    from memwrite.ports import MetricsSink

__all__ = [
    "METRICS_STAGE",
    "UNMETERED_METRIC",
    "MeteredEmbedder",
    "Metering",
    "count_usage",
    "metering_for",
    "record_usage",
]

_log = logging.getLogger(__name__)
METRICS_STAGE = "usage"
# Counted when the meter's store refused an add; the `UsageUnmetered` alarm watches it.
UNMETERED_METRIC = "usage.unmetered"


@dataclass
class Metering:
    """Where a tenant's usage goes: its counters (None: not stored, e.g. DynamoDB without
    `USAGE_TABLE`) and the metrics ($ per tenant)."""

    meter: UsageMeter | None
    metrics: MetricsSink
    clock: Callable[[], float] = field(default=time.time)


@dataclass
class _Tally:
    counts: UsageCounts = field(default_factory=UsageCounts)


_tally: ContextVar[_Tally | None] = ContextVar("tenant_usage_tally", default=None)


def count_usage(counts: UsageCounts) -> None:
    """Add to the usage of the unit of work being metered (none open: not metered)."""
    tally = _tally.get()
    if tally is not None:
        tally.counts += counts


@contextmanager
def metering_for(tenant: str, metering: Metering | None) -> Iterator[None]:
    """Meter the block as one unit of work of `tenant` (`metering` None: counted nowhere)."""
    tally = _Tally()
    token = _tally.set(tally)
    calls: list[LlmUsage] = []
    try:
        with metered_for_tenant() as calls:
            yield
    finally:
        _tally.reset(token)
        if metering is not None:
            # Most units of work call no model: their counts are the tally's alone.
            counts = tally.counts + UsageCounts.of_calls(calls) if calls else tally.counts
            record_usage(tenant, counts, metering)


def record_usage(tenant: str, counts: UsageCounts, metering: Metering) -> None:
    """`counts` added to the tenant's current hour, and their cost to its metric."""
    if counts.empty:
        return
    if counts.model_calls:
        metering.metrics.tenant_cost(tenant, counts.cost_usd)
    if metering.meter is None:
        return
    try:
        metering.meter.add(tenant, datetime.fromtimestamp(metering.clock(), UTC), counts)
    except MemwriteError:
        _log.exception("usage of tenant %s not metered: the meter's store failed", tenant)
        metering.metrics.event(METRICS_STAGE, UNMETERED_METRIC)


class MeteredEmbedder:
    """The search index's embedder, each text it embeds counted on the tenant's usage."""

    def __init__(self, embedder: Embedder) -> None:
        self._embedder = embedder

    @property
    def dimension(self) -> int:
        return self._embedder.dimension

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        vectors = self._embedder.embed(texts)
        count_usage(UsageCounts(embeddings=len(texts)))
        return vectors
