"""The `EpisodeStore` contract (and `SessionLog.append_batch`'s episodes, and the batch lane's
`EpisodeBatches`), run against the DynamoDB (moto) and the SQLite adapters: one suite, the
same answers."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memwrite.adapters.sqlite.database import SqliteDatabase
from memwrite.adapters.sqlite.episodes import SqliteEpisodeStore
from memwrite.adapters.sqlite.erase import SqliteUserEraser
from memwrite.adapters.sqlite.ledger import SqliteSessionLog, SqliteTurnLedger
from memwrite.adapters.sqlite.outbox import SqliteOutbox
from memwrite.backfill.ports import EpisodeBatches
from memwrite.config.settings import EpisodesConfig
from memwrite.errors import InvalidQuery
from memwrite.models import QueuedTurn, Role, Source
from memwrite.ports import EpisodeStore, Outbox, SessionLog, TraceRecord, TurnLedger, UserEraser
from memwrite.records.episode import Episode, EpisodeStatus, episode_doc_id
from memwrite.wiring import (
    build_api_function_deps,
    build_backfill_deps,
    build_batch_deps,
    build_stage_deps,
)
from memwrite_local.runtime.aws import LocalAws

NOW = 1_790_000_000.0
T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
_ids = itertools.count()


@dataclass
class EpisodePorts:
    session_log: SessionLog
    episodes: EpisodeStore
    ledger: TurnLedger
    outbox: Outbox
    eraser: UserEraser
    batches: EpisodeBatches


@pytest.fixture(scope="module", params=["moto", "sqlite"])
def ports(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[EpisodePorts]:
    if request.param == "sqlite":
        database = SqliteDatabase(Path(tmp_path_factory.mktemp("sqlite")))
        yield EpisodePorts(
            session_log=SqliteSessionLog(database),
            episodes=SqliteEpisodeStore(database),
            ledger=SqliteTurnLedger(database),
            outbox=SqliteOutbox(database),
            eraser=SqliteUserEraser(database),
            batches=SqliteEpisodeStore(database),
        )
        return
    with LocalAws():
        # As the Lambdas get them: extract's session log writes episodes with outbox rows.
        _, extract = build_stage_deps("extract")
        _, hype = build_stage_deps("hype")
        backfill = build_backfill_deps()
        yield EpisodePorts(
            session_log=extract.session_log,
            episodes=backfill.episodes,
            ledger=backfill.ledger,
            outbox=hype.outbox,
            eraser=build_api_function_deps().erase.eraser,
            batches=build_batch_deps().store,
        )


def _trace(ports: EpisodePorts, tenant: str, user_id: str) -> str:
    trace_id = f"trace-{next(_ids)}"
    ports.ledger.put_trace(
        TraceRecord(
            trace_id=trace_id,
            tenant=tenant,
            user_id=user_id,
            session_id="s1",
            agent_id=None,
            source="user_explicit",
            created_at=T0.isoformat(),
            turn_ids=(),
        )
    )
    return trace_id


def _episode(
    tenant: str, user_id: str, trace_id: str, minute: int, *, expires_at: float = NOW + 86_400
) -> Episode:
    turn = QueuedTurn(
        tenant=tenant,
        user_id=user_id,
        session_id="s1",
        agent_id=None,
        trace_id=trace_id,
        turn_id=f"{next(_ids):032x}",
        role=Role.USER,
        text=f"The offsite moved to the lake house, minute {minute}.",
        observed_at=T0 + timedelta(minutes=minute),
        source=Source.USER_EXPLICIT,
    )
    return Episode(turn=turn, deferred_reason={"type": "DeferredNoLLM"}, expires_at=int(expires_at))


def _keep(ports: EpisodePorts, episode: Episode) -> frozenset[str]:
    return ports.session_log.append_batch(
        [episode.turn], now=NOW, retention_secs=3_600, episodes={episode.turn_id: episode}
    )


def _page(ports: EpisodePorts, tenant: str, user_id: str, **kwargs: object) -> list[Episode]:
    args: dict[str, object] = {
        "status": None,
        "since": None,
        "until": None,
        "limit": 100,
        "cursor": None,
        "now": NOW,
    }
    args.update(kwargs)
    return ports.episodes.episodes_of(tenant, user_id, **args).episodes  # type: ignore[arg-type]


def test_an_episode_is_written_with_its_turn_and_an_outbox_row(ports: EpisodePorts) -> None:
    # Given a trace and a kept turn
    tenant = f"tenant-{next(_ids)}"
    episode = _episode(tenant, "dana", _trace(ports, tenant, "dana"), 0)
    # When the session log appends the turn with its episode
    _keep(ports, episode)
    # Then the episode is stored, and the turn is in the session log, and stage 7 has a row
    assert ports.episodes.get_episodes(tenant, "dana", [episode.turn_id]) == {
        episode.turn_id: episode
    }
    assert ports.session_log.recent(tenant, "dana", "s1", "9999", 10, now=NOW) == [episode.turn]
    pending = [c for c in ports.outbox.pending(1_000) if c.tenant == tenant]
    assert [(c.memory_id, c.trace_id) for c in pending] == [
        (episode_doc_id(episode.turn_id), episode.turn.trace_id)
    ]


def test_a_pending_episode_outlives_retention_days_until_it_is_distilled(
    ports: EpisodePorts,
) -> None:
    config = EpisodesConfig()
    day = 86_400
    trace_id = _trace(ports, "t1", "keeper")
    pending = _episode(
        "t1", "keeper", trace_id, 0, expires_at=config.expires_at_kept(NOW, pending=True)
    )
    _keep(ports, pending)
    # A year on, not distilled: still there, still pending (no word lost to a clock).
    later = NOW + 364 * day
    (kept,) = _page(ports, "t1", "keeper", status=EpisodeStatus.PENDING, now=later)
    assert kept.expires_at >= NOW + 365 * day
    # Distilled that day: `retention_days` from then.
    distilled = kept.model_copy(
        update={"status": EpisodeStatus.EXTRACTED, "expires_at": config.expires_at_distilled(later)}
    )
    ports.episodes.update_episodes([distilled])
    stored = ports.episodes.get_episodes("t1", "keeper", [pending.turn_id])[pending.turn_id]
    assert stored.expires_at == int(later) + config.retention_days * day
    before, after = (later + (config.retention_days + d) * day for d in (-1, 1))
    assert _page(ports, "t1", "keeper", status=EpisodeStatus.EXTRACTED, now=before) == [stored]
    assert _page(ports, "t1", "keeper", status=EpisodeStatus.EXPIRED, now=after) == [stored]


def test_an_erased_trace_keeps_no_episode(ports: EpisodePorts) -> None:
    # Given a turn whose trace does not exist (erased)
    tenant = f"tenant-{next(_ids)}"
    episode = _episode(tenant, "dana", "trace-gone", 0)
    # When it is appended / Then nothing is written: not the turn, not the episode
    assert _keep(ports, episode) == {"trace-gone"}
    assert ports.episodes.get_episodes(tenant, "dana", [episode.turn_id]) == {}
    assert [c for c in ports.outbox.pending(1_000) if c.tenant == tenant] == []


def test_a_batch_larger_than_one_transaction_keeps_every_live_turn_and_episode(
    ports: EpisodePorts,
) -> None:
    # Given a batch of 40 turns kept as episodes (more items than one DynamoDB transaction
    # holds), with two turns of a trace erased meanwhile among them
    tenant = f"tenant-{next(_ids)}"
    trace = _trace(ports, tenant, "dana")
    live = [_episode(tenant, "dana", trace, minute) for minute in range(40)]
    gone = [_episode(tenant, "dana", "trace-gone", minute) for minute in (40, 41)]
    batch = [*live[:20], gone[0], *live[20:], gone[1]]
    # When it is appended in one write
    refused = ports.session_log.append_batch(
        [episode.turn for episode in batch],
        now=NOW,
        retention_secs=3_600,
        episodes={episode.turn_id: episode for episode in batch},
    )
    # Then the erased trace is named, and every other turn is logged with its episode
    assert refused == {"trace-gone"}
    logged = ports.session_log.recent(tenant, "dana", "s1", "~", 100, now=NOW)
    assert [turn.turn_id for turn in logged] == [episode.turn_id for episode in live]
    stored = ports.episodes.get_episodes(tenant, "dana", [e.turn_id for e in batch])
    assert set(stored) == {episode.turn_id for episode in live}
    # And each has its outbox row for stage 7, the erased turns none
    indexed = {c.memory_id for c in ports.outbox.pending(1_000) if c.tenant == tenant}
    assert indexed == {episode_doc_id(episode.turn_id) for episode in live}


def test_episodes_page_in_observation_order_within_bounds_and_by_status(
    ports: EpisodePorts,
) -> None:
    # Given five episodes of a user (kept out of order), one extracted, one expired
    tenant = f"tenant-{next(_ids)}"
    trace = _trace(ports, tenant, "dana")
    kept = [_episode(tenant, "dana", trace, minute) for minute in (3, 0, 4, 1)]
    expired = _episode(tenant, "dana", trace, 2, expires_at=NOW - 1)
    for episode in (*kept, expired):
        _keep(ports, episode)
    done = kept[0].model_copy(update={"status": EpisodeStatus.EXTRACTED, "memory_ids": ["m1"]})
    ports.episodes.update_episodes([done])
    # When listed page by page / Then oldest first, two at a time
    first = ports.episodes.episodes_of(
        tenant, "dana", status=None, since=None, until=None, limit=2, cursor=None, now=NOW
    )
    second = ports.episodes.episodes_of(
        tenant, "dana", status=None, since=None, until=None, limit=10, cursor=first.next_cursor,
        now=NOW,
    )  # fmt: skip
    minutes = [
        int((e.observed_at - T0).total_seconds() // 60) for e in first.episodes + second.episodes
    ]
    assert minutes == [0, 1, 2, 3, 4]
    assert second.next_cursor is None
    # And by status: pending leaves out the extracted and the expired one
    pending = _page(ports, tenant, "dana", status=EpisodeStatus.PENDING)
    assert [e.turn_id for e in pending] == [kept[1].turn_id, kept[3].turn_id, kept[2].turn_id]
    assert [e.turn_id for e in _page(ports, tenant, "dana", status=EpisodeStatus.EXPIRED)] == [
        expired.turn_id
    ]
    assert [e.memory_ids for e in _page(ports, tenant, "dana", status=EpisodeStatus.EXTRACTED)] == [
        ["m1"]
    ]
    # And within [since, until] (until inclusive)
    bounded = _page(
        ports, tenant, "dana", since=T0 + timedelta(minutes=1), until=T0 + timedelta(minutes=3)
    )
    assert [e.turn_id for e in bounded] == [kept[3].turn_id, expired.turn_id, kept[0].turn_id]
    # And another user or tenant sees none of them
    assert _page(ports, tenant, "ana") == []
    assert _page(ports, f"tenant-{next(_ids)}", "dana") == []
    # And a cursor this store did not issue is refused
    with pytest.raises(InvalidQuery):
        _page(ports, tenant, "dana", cursor="bm90LWEtY3Vyc29y")


def test_erasing_a_user_removes_their_episodes(ports: EpisodePorts) -> None:
    # Given two kept episodes of a user
    tenant = f"tenant-{next(_ids)}"
    trace = _trace(ports, tenant, "dana")
    episodes = [_episode(tenant, "dana", trace, minute) for minute in (0, 1)]
    for episode in episodes:
        _keep(ports, episode)
    # When the user is erased
    removed = ports.eraser.erase_user(tenant, "dana").removed
    # Then no episode row is left, and an update cannot bring one back
    assert removed["episodes"] == 2
    assert _page(ports, tenant, "dana") == []
    ports.episodes.update_episodes(episodes)
    assert ports.episodes.get_episodes(tenant, "dana", [e.turn_id for e in episodes]) == {}


def test_pending_users_lists_who_has_a_pending_episode(ports: EpisodePorts) -> None:
    # Given a pending episode of dana and ana, and an extracted one of sam, in one tenant
    tenant = f"tenant-{next(_ids)}"
    kept = {
        user: _episode(tenant, user, _trace(ports, tenant, user), 0)
        for user in ("dana", "ana", "sam")
    }
    for episode in kept.values():
        _keep(ports, episode)
    done = kept["sam"].model_copy(update={"status": EpisodeStatus.EXTRACTED})
    ports.episodes.update_episodes([done])
    # When the users with pending episodes are listed, of the tenant and of all tenants
    of_tenant = ports.episodes.pending_users(tenant)
    everywhere = ports.episodes.pending_users()
    # Then dana and ana, sorted; and the same pairs among all tenants'
    assert of_tenant == [(tenant, "ana"), (tenant, "dana")]
    assert [pair for pair in everywhere if pair[0] == tenant] == of_tenant


def test_a_batch_holds_the_episodes_it_took_pending_until_it_is_closed(
    ports: EpisodePorts,
) -> None:
    # Given three pending episodes of dana, one of them taken by a live backfill meanwhile
    tenant = f"tenant-{next(_ids)}"
    trace = _trace(ports, tenant, "dana")
    episodes = [_episode(tenant, "dana", trace, minute) for minute in (0, 1, 2)]
    for episode in episodes:
        _keep(ports, episode)
    taken = episodes[2].model_copy(update={"status": EpisodeStatus.EXTRACTED})
    ports.episodes.update_episodes([taken])
    before = ports.batches.episodes_in_batches()
    batch_id = f"msgbatch_{next(_ids)}"

    # When all three are added to a batch
    marked = ports.batches.add_to_batch(batch_id, episodes)

    # Then the two still pending are in it, the batch is open, and they are no longer pending
    assert [e.turn_id for e in marked] == [e.turn_id for e in episodes[:2]]
    assert all(e.status is EpisodeStatus.IN_BATCH and e.batch_id == batch_id for e in marked)
    assert batch_id in ports.batches.open_batches()
    in_batch = ports.batches.batch_episodes(batch_id)
    assert sorted(e.turn_id for e in in_batch) == sorted(e.turn_id for e in marked)
    assert ports.batches.episodes_in_batches() == before + 2
    assert ports.episodes.pending_users(tenant) == []
    listed = _page(ports, tenant, "dana", status=EpisodeStatus.IN_BATCH)
    assert [e.batch_id for e in listed] == [batch_id, batch_id]

    # When one is applied (extracted) and the other goes back to pending, then it is closed
    ports.episodes.update_episodes(
        [
            marked[0].model_copy(update={"status": EpisodeStatus.EXTRACTED, "batch_id": None}),
            marked[1].model_copy(update={"status": EpisodeStatus.PENDING, "batch_id": None}),
        ]
    )
    assert ports.batches.batch_episodes(batch_id) == []
    ports.batches.close_batch(batch_id)

    # Then the batch is gone, and the pending one is pending again
    assert batch_id not in ports.batches.open_batches()
    assert ports.batches.episodes_in_batches() == before
    assert ports.episodes.pending_users(tenant) == [(tenant, "dana")]
