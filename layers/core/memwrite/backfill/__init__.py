"""Episodes: the backfill that distils the user's words kept when extraction deferred them
(docs/design.md §10) once a model is available; the episode itself is
`memwrite.episode`."""

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
