"""SQLite episodes: the twin of the DynamoDB episode items (`dynamodb_episodes.py`). The row
is written with the session log's turn and an outbox row in one transaction
(`SqliteSessionLog.append_batch`); the outbox row (`episode:<turn id>`, op `episode`) makes
stage 7 index it. The batch lane's membership rows (`episode_batches`) say which episodes went into
which provider batch (`memwrite.backfill.ports.EpisodeBatches`)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from datetime import datetime

from memwrite.adapters.page_cursor import decode_trace_cursor, encode_trace_cursor, time_bounds
from memwrite.adapters.sqlite.database import SqliteDatabase
from memwrite.records.episode import Episode, EpisodePage, EpisodeStatus, episode_doc_id

__all__ = [
    "EPISODE_OUTBOX_OP",
    "SqliteEpisodeStore",
    "SqliteTopicSweepStore",
    "expire_episodes",
    "write_episode",
]

EPISODE_OUTBOX_OP = "episode"  # never read as a memory by `pending_memories`
_INDEX_REV, _REMOVE_REV = 1, 2  # an episode's document is written once, removed once


def _outbox_row(connection: sqlite3.Connection, episode: Episode, rev: int) -> None:
    connection.execute(
        "INSERT OR IGNORE INTO outbox (tenant, user_id, memory_id, rev, op, trace_id, doc) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            episode.tenant,
            episode.user_id,
            episode_doc_id(episode.turn_id),
            rev,
            EPISODE_OUTBOX_OP,
            episode.turn.trace_id,
            "{}",
        ),
    )


def write_episode(connection: sqlite3.Connection, episode: Episode) -> None:
    """Inside the caller's transaction: the episode row and its outbox row."""
    connection.execute(
        "INSERT OR REPLACE INTO episodes "
        "(tenant, user_id, turn_id, sort_key, status, expires_at, doc) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            episode.tenant,
            episode.user_id,
            episode.turn_id,
            episode.sort_key,
            episode.status.value,
            episode.expires_at,
            episode.model_dump_json(),
        ),
    )
    _outbox_row(connection, episode, _INDEX_REV)


class SqliteEpisodeStore:
    def __init__(self, database: SqliteDatabase) -> None:
        self._db = database

    def episodes_of(
        self,
        tenant: str,
        user_id: str,
        *,
        status: EpisodeStatus | None,
        since: datetime | None,
        until: datetime | None,
        limit: int,
        cursor: str | None,
        now: float,
    ) -> EpisodePage:
        low, high = time_bounds(since, until)
        after = decode_trace_cursor(cursor) if cursor else None
        sql = (
            "SELECT doc FROM episodes WHERE tenant = ? AND user_id = ? "
            "AND sort_key >= ? AND sort_key < ?"
        )
        params: list[object] = [tenant, user_id, low, high]
        if after is not None:
            sql += " AND sort_key > ?"
            params.append(after)
        if status is EpisodeStatus.EXPIRED:
            sql += " AND expires_at <= ?"
            params.append(now)
        elif status is not None:
            sql += " AND status = ? AND expires_at > ?"
            params.extend([status.value, now])
        sql += " ORDER BY sort_key LIMIT ?"
        params.append(limit + 1)
        with self._db.connection() as connection:
            rows = connection.execute(sql, params).fetchall()
        episodes = [Episode.model_validate_json(doc) for (doc,) in rows]
        more = len(episodes) > limit
        episodes = episodes[:limit]
        next_cursor = encode_trace_cursor(episodes[-1].sort_key) if more and episodes else None
        return EpisodePage(episodes, next_cursor)

    def get_episodes(
        self, tenant: str, user_id: str, turn_ids: Sequence[str]
    ) -> dict[str, Episode]:
        if not turn_ids:
            return {}
        marks = ",".join("?" * len(turn_ids))
        with self._db.connection() as connection:
            rows = connection.execute(
                f"SELECT doc FROM episodes WHERE tenant = ? AND user_id = ? "
                f"AND turn_id IN ({marks})",
                [tenant, user_id, *turn_ids],
            ).fetchall()
        found = [Episode.model_validate_json(doc) for (doc,) in rows]
        return {episode.turn_id: episode for episode in found}

    def update_episodes(self, episodes: Sequence[Episode]) -> None:
        with self._db.transaction() as connection:
            connection.executemany(
                "UPDATE episodes SET status = ?, expires_at = ?, doc = ? "
                "WHERE tenant = ? AND user_id = ? AND turn_id = ?",
                [
                    (
                        episode.status.value,
                        episode.expires_at,
                        episode.model_dump_json(),
                        episode.tenant,
                        episode.user_id,
                        episode.turn_id,
                    )
                    for episode in episodes
                ],
            )

    def pending_users(self, tenant: str | None = None) -> list[tuple[str, str]]:
        with self._db.connection() as connection:
            # Read through the partial index `episodes_pending` (the pending rows alone).
            rows = connection.execute(
                "SELECT DISTINCT tenant, user_id FROM episodes WHERE status = ? "
                "AND (? IS NULL OR tenant = ?) ORDER BY tenant, user_id",
                (EpisodeStatus.PENDING.value, tenant, tenant),
            ).fetchall()
        return [(row_tenant, user_id) for row_tenant, user_id in rows]

    def expire(self, now: float) -> list[Episode]:
        with self._db.transaction() as connection:
            return expire_episodes(connection, now)

    def add_to_batch(self, batch_id: str, episodes: Sequence[Episode]) -> list[Episode]:
        marked: list[Episode] = []
        now = time.time()
        with self._db.transaction() as connection:
            for episode in episodes:
                in_batch = episode.model_copy(
                    update={"status": EpisodeStatus.IN_BATCH, "batch_id": batch_id}
                )
                # Only a pending one: a live backfill may have taken it meanwhile.
                cursor = connection.execute(
                    "UPDATE episodes SET status = ?, doc = ? "
                    "WHERE tenant = ? AND user_id = ? AND turn_id = ? AND status = ?",
                    (
                        in_batch.status.value,
                        in_batch.model_dump_json(),
                        episode.tenant,
                        episode.user_id,
                        episode.turn_id,
                        EpisodeStatus.PENDING.value,
                    ),
                )
                if cursor.rowcount == 0:
                    continue
                connection.execute(
                    "INSERT OR IGNORE INTO episode_batches "
                    "(batch_id, tenant, user_id, turn_id, submitted_at) VALUES (?, ?, ?, ?, ?)",
                    (batch_id, episode.tenant, episode.user_id, episode.turn_id, now),
                )
                marked.append(in_batch)
        return marked

    def open_batches(self) -> list[str]:
        with self._db.connection() as connection:
            rows = connection.execute(
                "SELECT batch_id FROM episode_batches GROUP BY batch_id "
                "ORDER BY MIN(submitted_at), batch_id"
            ).fetchall()
        return [batch_id for (batch_id,) in rows]

    def batch_episodes(self, batch_id: str) -> list[Episode]:
        with self._db.connection() as connection:
            rows = connection.execute(
                "SELECT e.doc FROM episode_batches AS b JOIN episodes AS e "
                "USING (tenant, user_id, turn_id) WHERE b.batch_id = ? AND e.status = ?",
                (batch_id, EpisodeStatus.IN_BATCH.value),
            ).fetchall()
        found = [Episode.model_validate_json(doc) for (doc,) in rows]
        return [episode for episode in found if episode.batch_id == batch_id]

    def close_batch(self, batch_id: str) -> None:
        with self._db.transaction() as connection:
            connection.execute("DELETE FROM episode_batches WHERE batch_id = ?", (batch_id,))

    def episodes_in_batches(self) -> int:
        # Members counted, not read, as on DynamoDB: joining each to its episode cost 7 ms a
        # round at the peak's few thousand members.
        with self._db.connection() as connection:
            row = connection.execute("SELECT COUNT(*) FROM episode_batches").fetchone()
        return int(row[0])


def expire_episodes(connection: sqlite3.Connection, now: float) -> list[Episode]:
    """Inside the caller's transaction: delete the expired episodes, each with an outbox row
    that takes its document out of the index (SQLite has no TTL: every append sweeps, through
    the `expires_at` index, so usually nothing is scanned)."""
    rows = connection.execute(
        "DELETE FROM episodes WHERE expires_at <= ? RETURNING doc", (now,)
    ).fetchall()
    expired = [Episode.model_validate_json(doc) for (doc,) in rows]
    for episode in expired:
        _outbox_row(connection, episode, _REMOVE_REV)
    return expired


class SqliteTopicSweepStore:
    """The topic sweep's reads and episode removals (`memwrite.edit.ports.TopicSweepStore`)."""

    def __init__(self, database: SqliteDatabase) -> None:
        self._db = database

    def users_of(self, tenant: str) -> list[str]:
        with self._db.connection() as connection:
            rows = connection.execute(
                "SELECT user_id FROM memories WHERE tenant = ? "
                "UNION SELECT user_id FROM episodes WHERE tenant = ? ORDER BY user_id",
                (tenant, tenant),
            ).fetchall()
        return [user_id for (user_id,) in rows]

    def remove_episodes(self, episodes: Sequence[Episode]) -> int:
        removed = 0
        for episode in episodes:
            with self._db.transaction() as connection:
                gone = connection.execute(
                    "DELETE FROM episodes WHERE tenant = ? AND user_id = ? AND turn_id = ? "
                    "RETURNING doc",
                    (episode.tenant, episode.user_id, episode.turn_id),
                ).fetchall()
                if gone:
                    _outbox_row(connection, episode, _REMOVE_REV)
                    removed += 1
        return removed
