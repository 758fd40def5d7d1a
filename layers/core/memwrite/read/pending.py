"""A user's pending episodes, every page of the store read: what a backfill distils and what
the episodes list's expiry warning counts."""

from __future__ import annotations

from datetime import datetime

from memwrite.ports import EpisodeStore
from memwrite.records.episode import Episode, EpisodeStatus

__all__ = ["pending_of"]

_PAGE = 100  # episodes per store read


def pending_of(
    store: EpisodeStore,
    tenant: str,
    user_id: str,
    *,
    now: float,
    since: datetime | None = None,
    until: datetime | None = None,
) -> list[Episode]:
    """The user's pending episodes in [since, until], in observation order."""
    found: list[Episode] = []
    cursor: str | None = None
    while True:
        page = store.episodes_of(
            tenant,
            user_id,
            status=EpisodeStatus.PENDING,
            since=since,
            until=until,
            limit=_PAGE,
            cursor=cursor,
            now=now,
        )
        found.extend(page.episodes)
        if page.next_cursor is None:
            return sorted(found, key=lambda episode: episode.sort_key)
        cursor = page.next_cursor
