"""The backfill lanes a run schedules: the scheduled live backfill or the batch lane's rounds.

The coordinator (`simulator`) keeps the schedule (`Schedule`: a round every `period_s` of
simulated time) and asks the probe whether the lane has work left; the round itself (`Lane`)
runs where the pipeline runs: in every worker process after its drain, each its shard of the
users (`workers`), or in the coordinator's process with `--workers 1`. It must be built inside
the run's backend (its deps read the environment `LocalSqlite` sets).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from memwrite_local.loadtest.probe import Probe

if TYPE_CHECKING:
    from memwrite.backfill import BackfillDeps, BatchDeps, UserShard

__all__ = ["BACKFILL_EVERY_S", "BackfillMode", "Lane", "Schedule", "has_work", "period_s"]

BACKFILL_EVERY_S = 300.0  # the scheduled backfill's period, in simulated time


class BackfillMode(StrEnum):
    LIVE = "live"
    BATCH = "batch"


def period_s(mode: BackfillMode) -> float:
    """Simulated seconds between rounds: the AWS schedule's 5 minutes (`live`), or
    `pipeline.backfill.poll_secs` (`batch`, as `memwrite serve`'s batch worker polls)."""
    if mode is BackfillMode.LIVE:
        return BACKFILL_EVERY_S
    from memwrite.config.settings import load_settings

    return float(load_settings().pipeline.backfill.poll_secs)


def has_work(mode: BackfillMode, probe: Probe) -> bool:
    """Whether the lane has work left: episodes pending, or (`batch`) in an open batch."""
    if probe.has_pending_episodes():
        return True
    return mode is BackfillMode.BATCH and probe.has_open_batches()


@dataclass
class Schedule:
    """When the next round is due, on the simulated clock."""

    period_s: float
    next_at: float

    def due(self, now: float) -> bool:
        """Whether a round is due at `now` (the next one is then a period later)."""
        if now < self.next_at:
            return False
        self.next_at = now + self.period_s
        return True


class Lane:
    """One lane's rounds: `memwrite.backfill.backfill_pending` over every user with pending
    episodes (`live`, the AWS schedule's job, on the budget's spare capacity), or
    `memwrite.backfill.run_batch_round` (`batch`: ended batches applied, pending episodes
    submitted to the Message Batches API)."""

    def __init__(self, mode: BackfillMode) -> None:
        from memwrite.wiring import build_backfill_deps, build_batch_deps

        self._batch: BatchDeps | None = None
        self._live: BackfillDeps | None = None
        if mode is BackfillMode.BATCH:
            self._batch = build_batch_deps()
        else:
            self._live = build_backfill_deps()

    def submit(self) -> None:
        """The batch lane's submission of every pending episode (`memwrite.backfill.
        submit_pending`); the live lane submits nothing."""
        from memwrite.backfill import BatchRound, submit_pending

        if self._batch is not None:
            submit_pending(self._batch.backfill.configs.for_request, self._batch, BatchRound())

    def run(self, shard: UserShard | None = None, *, submit: bool = True) -> None:
        """One round: of `shard`'s users only, when given (`batch`: `submit` False leaves
        the pending episodes to another worker's round)."""
        from memwrite.backfill import backfill_pending, run_batch_round

        if self._batch is not None:
            configs = self._batch.backfill.configs
            run_batch_round(configs.for_request, self._batch, shard=shard, submit=submit)
        elif self._live is not None:
            backfill_pending(self._live.configs.for_request, self._live, shard)
