"""Reads of the embedded backend's SQLite file, for the simulator's meters and its report.

Read-only queries on the tables the real adapters write (`memwrite.adapters.sqlite`): the turn
queue's depth and the turns still in it, and at the end what became of every accepted turn.
The stores' own ports answer per user or per trace; a load test asks across all of them.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from memwrite.adapters.sqlite.database import open_database
from memwrite_local.loadtest.report import Outcomes

__all__ = ["Probe"]

# An episode whose extraction is in a provider batch (the batch lane: `in_batch`, `batch_id`).
_IN_BATCH = "(status = 'in_batch' OR json_extract(doc, '$.batch_id') IS NOT NULL)"


class Probe:
    def __init__(self, data_dir: Path) -> None:
        self._db = open_database(data_dir)

    def queued(self) -> set[str]:
        """The turns still in the turn queue (waiting, delayed or in flight)."""
        with self._db.connection() as connection:
            return {row[0] for row in connection.execute("SELECT turn_id FROM queue")}

    def has_pending_episodes(self) -> bool:
        """Whether an episode waits for a backfill (pending, in no batch)."""
        with self._db.connection() as connection:
            row = connection.execute(
                f"SELECT 1 FROM episodes WHERE status = 'pending' AND NOT {_IN_BATCH} LIMIT 1"
            ).fetchone()
        return row is not None

    def has_open_batches(self) -> bool:
        """Whether a provider batch is still open (its membership rows, `episode_batches`,
        stay until the lane closes it): one row read, where asking the episodes would read
        every episode's document whenever none is in a batch."""
        with self._db.connection() as connection:
            row = connection.execute("SELECT 1 FROM episode_batches LIMIT 1").fetchone()
        return row is not None

    def outcomes(self, accepted: Iterable[str]) -> Outcomes:
        with self._db.connection() as connection:
            episodes = {
                turn_id: (status, reason, in_batch)
                for turn_id, status, reason, in_batch in connection.execute(
                    "SELECT turn_id, status, json_extract(doc, '$.deferred_reason.type'), "
                    f"{_IN_BATCH} FROM episodes"
                )
            }
            persisted = {
                row[0]
                for row in connection.execute(
                    "SELECT DISTINCT substr(item_id, 1, instr(item_id, ':') - 1) FROM spans "
                    "WHERE stage = 'persist' AND instr(item_id, ':') > 0"
                )
            }
            dropped = {
                row[0]
                for row in connection.execute(
                    "SELECT DISTINCT CASE WHEN instr(item_id, ':') > 0 "
                    "THEN substr(item_id, 1, instr(item_id, ':') - 1) ELSE item_id END "
                    "FROM spans WHERE stage NOT IN ('pre_filter', 'persist', 'hype') "
                    "AND json_extract(doc, '$.result') = 'reject' "
                    "AND json_extract(doc, '$.reason.type') IS NOT NULL"
                )
            }
            dead = {row[0] for row in connection.execute("SELECT turn_id FROM dead_letters")}
        memory = episode = drop = 0
        lost = set()
        for turn_id in accepted:
            if turn_id in dead:
                lost.add(turn_id)
            elif turn_id in episodes:
                episode += 1
            elif turn_id in persisted:
                memory += 1
            elif turn_id in dropped:
                drop += 1
            else:
                lost.add(turn_id)
        return Outcomes(
            memory=memory,
            episode=episode,
            dropped=drop,
            lost=frozenset(lost),
            episode_turns=frozenset(episodes),
            deferred_without_reason=sum(1 for _, r, _ in episodes.values() if not r),
            episodes_pending=sum(1 for s, _, b in episodes.values() if s == "pending" and not b),
            episodes_in_batches=sum(1 for _, _, b in episodes.values() if b),
        )
