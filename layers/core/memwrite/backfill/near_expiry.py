"""With no model configured, pending episodes wait for one: the scheduled run says when they
come close to their expiry (docs/episodes.md), so nobody's words go quietly.

One query per user with pending episodes (the sparse `pending_episodes` index names them),
at most `MAX_USERS_PER_RUN`, never a scan."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from pydantic import BaseModel, ConfigDict

from memwrite.backfill.batch import METRICS_STAGE
from memwrite.backfill.run import (
    MAX_USERS_PER_RUN,
    BackfillDeps,
    BackfillRequest,
    pending_episodes,
)
from memwrite.config.settings import PipelineConfig
from memwrite.records.episode import expiry_warning

__all__ = ["NEAR_EXPIRY_METRIC", "NearExpiryReport", "report_near_expiry"]

# The metric the AWS alarm watches (stage `backfill`): pending episodes near their expiry.
NEAR_EXPIRY_METRIC = "episodes.pending_near_expiry"


class NearExpiryReport(BaseModel):
    """What the check found: users with pending episodes near expiry, and those episodes."""

    model_config = ConfigDict(frozen=True)

    users: int = 0
    episodes: int = 0
    earliest_expires_at: datetime | None = None


def report_near_expiry(
    settings_for: Callable[[str], PipelineConfig],
    deps: BackfillDeps,
    max_users: int = MAX_USERS_PER_RUN,
) -> NearExpiryReport:
    """Count the pending episodes within each tenant's `episodes.expiry_warning_days` of their
    expiry and emit the count as a metric (0 too: the check ran). Called when no model is
    configured; the caller warns (the function's log, `memwrite serve`'s)."""
    now = deps.clock()
    users, episodes, earliest = 0, 0, None
    for tenant, user_id in deps.episodes.pending_users()[:max_users]:
        within_days = settings_for(tenant).episodes.expiry_warning_days
        pending = pending_episodes(tenant, user_id, BackfillRequest(), deps)
        warning = expiry_warning(pending, now, within_days)
        if warning is None:
            continue
        users += 1
        episodes += warning.count
        if earliest is None or warning.earliest_expires_at < earliest:
            earliest = warning.earliest_expires_at
    deps.metrics.event(METRICS_STAGE, NEAR_EXPIRY_METRIC, episodes)
    return NearExpiryReport(users=users, episodes=episodes, earliest_expires_at=earliest)
