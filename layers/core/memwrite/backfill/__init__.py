"""Backfill: the user's words kept when extraction deferred them, distilled once a model is
available (docs/design.md §10), live (`run`) or through the provider's batch API at half price
(`batch`, its ports in `ports`); the episode itself is `memwrite.records.episode`."""

from memwrite.backfill.batch import BatchDeps, BatchRound, run_batch_round, submit_pending
from memwrite.backfill.near_expiry import NearExpiryReport, report_near_expiry
from memwrite.backfill.ports import BackfillJob, BackfillStarter
from memwrite.backfill.run import (
    MAX_USERS_PER_RUN,
    BackfillDeps,
    BackfillRequest,
    BackfillResult,
    accept_backfill,
    backfill_pending,
    backfill_user,
    run_job,
    start_pending,
)
from memwrite.backfill.shard import UserShard

__all__ = [
    "MAX_USERS_PER_RUN",
    "BackfillDeps",
    "BackfillJob",
    "BackfillRequest",
    "BackfillResult",
    "BackfillStarter",
    "BatchDeps",
    "BatchRound",
    "NearExpiryReport",
    "UserShard",
    "accept_backfill",
    "backfill_pending",
    "backfill_user",
    "report_near_expiry",
    "run_batch_round",
    "run_job",
    "start_pending",
    "submit_pending",
]
