"""The simulated clock: a day of traffic replayed in minutes, the waits played, not slept.

The simulator moves the clock tick by tick. While it is installed, the whole process reads it:
`time.time()`, `datetime.now()` and the rest are the simulated time (time-machine patches them
at the C level, so the clocks the code under test captured as defaults, such as the ingest's,
extraction's and the model budget's `time.time`, read it too), and so is `time.monotonic`
(time-machine moves it with the rest: the caches' lifetimes are simulated seconds, and between
ticks it stands still, so a real timeout must not count on it); `time.perf_counter` stays real,
so latencies in spans measure the code itself. The fake model server's buckets, outage and
batches read it as well.

The SDK's retry sleeps return at once, counted in `slept_s`: in production each worker sleeps
on its own, while one simulated worker sleeping would hold every other tenant's turns.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import time_machine

__all__ = ["SLEEPERS", "VirtualClock"]

# The modules of the code under test whose `time.sleep` is the simulated one.
SLEEPERS = ("anthropic._base_client",)


class _Sleeper:
    """A module's `time`, but its `sleep` counts instead of sleeping."""

    def __init__(self, clock: VirtualClock) -> None:
        self._clock = clock

    def sleep(self, seconds: float) -> None:
        self._clock.slept_s += max(seconds, 0.0)

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


@dataclass
class VirtualClock:
    """Epoch seconds that move only when the simulator says so."""

    now: float
    slept_s: float = 0.0  # what the code under test asked to sleep (not slept)
    _traveller: Any = field(default=None, repr=False)

    def time(self) -> float:
        return self.now

    def advance_to(self, moment: float) -> None:
        self.now = max(self.now, moment)
        if self._traveller is not None:
            self._traveller.move_to(self.now)

    @contextmanager
    def installed(self) -> Iterator[VirtualClock]:
        """The process on this clock while the block runs."""
        sleepers = [importlib.import_module(name) for name in SLEEPERS]
        saved = [getattr(module, "time") for module in sleepers]  # noqa: B009
        with time_machine.travel(self.now, tick=False) as traveller:
            self._traveller = traveller
            for module in sleepers:
                setattr(module, "time", _Sleeper(self))  # noqa: B010
            try:
                yield self
            finally:
                self._traveller = None
                for module, original in zip(sleepers, saved, strict=True):
                    setattr(module, "time", original)  # noqa: B010
