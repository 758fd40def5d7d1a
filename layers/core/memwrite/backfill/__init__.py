"""Backfill: the user's words kept when extraction deferred them, distilled once a model is
available (docs/design.md §10); the episode itself is `memwrite.episode`."""

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
    "backfill_pending",
    "backfill_user",
]
