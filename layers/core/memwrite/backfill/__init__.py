"""Backfill: the user's words kept when extraction deferred them, distilled once a model is
available (docs/design.md §10), live (`run`) or through the provider's batch API at half price
(`batch`, its ports in `ports`); the episode itself is `memwrite.episode`."""

from memwrite.backfill.batch import BatchDeps, BatchRound, run_batch_round
from memwrite.backfill.run import (
    BackfillDeps,
    BackfillRequest,
    BackfillResult,
    backfill_pending,
    backfill_user,
)

__all__ = [
    "BackfillDeps",
    "BackfillRequest",
    "BackfillResult",
    "BatchDeps",
    "BatchRound",
    "backfill_pending",
    "backfill_user",
    "run_batch_round",
]
