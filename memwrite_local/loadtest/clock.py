"""The simulated clock: a day of traffic replayed in minutes, the waits played, not slept.

The simulator moves the clock tick by tick; the fake model server's buckets, outage and batch
completion read it, and so does the code under test wherever it asks the time (the SQLite
queue's visibility timeouts and delays, the SDK's retry sleeps) through `VirtualClock.installed`:
those modules' `time` is swapped for this clock while a run lasts, nothing else of theirs.
The SDK's own retry sleeps return at once, counted: in production each worker sleeps on its
own, while one simulated worker sleeping would hold every other tenant's turns.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = ["CLOCK_READERS", "VirtualClock"]

# The modules of the code under test that read the time (`time.time()`, `time.sleep()`).
CLOCK_READERS = ("memwrite.adapters.sqlite.queue", "anthropic._base_client")


@dataclass
class VirtualClock:
    """Epoch seconds that move only when the simulator says so."""

    now: float
    slept_s: float = 0.0  # what the code under test asked to sleep (not slept)

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now

    def perf_counter(self) -> float:  # durations of the code itself stay real
        return time.perf_counter()

    def time_ns(self) -> int:
        return time.time_ns()

    def sleep(self, seconds: float) -> None:
        self.slept_s += max(seconds, 0.0)

    def advance_to(self, moment: float) -> None:
        self.now = max(self.now, moment)

    @contextmanager
    def installed(self, modules: Sequence[str] = CLOCK_READERS) -> Iterator[VirtualClock]:
        """This clock as the `time` of `modules` while the block runs."""
        swapped = [importlib.import_module(name) for name in modules]
        saved = [module.time for module in swapped]  # type: ignore[attr-defined]
        for module in swapped:
            module.time = self  # type: ignore[attr-defined]
        try:
            yield self
        finally:
            for module, original in zip(swapped, saved, strict=True):
                module.time = original  # type: ignore[attr-defined]
