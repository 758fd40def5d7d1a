"""The load simulator's workers: one that stops answering ends the run, though the simulated
clock (and `time.monotonic` with it) stands still between ticks."""

from __future__ import annotations

import multiprocessing
import time

import pytest
import time_machine

from memwrite_local.loadtest import workers
from memwrite_local.loadtest.workers import Tick, WorkerFailed, Workers


def test_a_worker_that_gives_no_answer_ends_the_run_on_the_simulated_clock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a worker process that never answers, and the coordinator on the simulated clock
    monkeypatch.setattr(workers, "BARRIER_TIMEOUT_S", 0.3)
    context = multiprocessing.get_context("fork")  # it only sleeps: no faiss to hang in
    ours, theirs = context.Pipe()
    silent = context.Process(target=time.sleep, args=(60,), daemon=True)
    silent.start()
    try:
        with time_machine.travel(1_000.0, tick=False):  # the simulated clock's patch
            # When a tick waits for it
            began = time.perf_counter()
            with pytest.raises(WorkerFailed, match="no answer in time"):
                Workers([silent], [ours]).tick(Tick(now=1_010.0, first=0, end=0))
        # Then the run ends after the barrier's timeout, in real seconds
        assert time.perf_counter() - began < 10
    finally:
        silent.kill()
        silent.join()
        theirs.close()
        ours.close()
