"""How a backfill groups a user's pending episodes into extraction calls: the turns the live
lane would have extracted together share one call (one request, or the coalescing window)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memwrite.backfill.run import extraction_batches
from memwrite.models import QueuedTurn, Role, Source
from memwrite.records.episode import Episode

T0 = datetime(2026, 11, 28, 9, 0, tzinfo=UTC)


def _episode(number: int, *, request: str, session: str = "s1", said_s: float) -> Episode:
    # As extraction keeps it: when it was said, not when the queue accepted it
    said = T0 + timedelta(seconds=said_s)
    turn = QueuedTurn(
        tenant="acme",
        user_id="dana",
        session_id=session,
        agent_id=None,
        trace_id=request,
        turn_id=f"turn-{number}",
        role=Role.USER,
        text=f"turn {number}",
        observed_at=said,
        source=Source.USER_EXPLICIT,
    )
    return Episode(turn=turn, deferred_reason={"type": "DeferredModelFailed"}, expires_at=0)


def _ids(batches: list[list[Episode]]) -> list[list[str]]:
    return [[episode.turn_id for episode in batch] for batch in batches]


def test_turns_posted_one_per_request_share_a_call_within_the_coalescing_window() -> None:
    # Given a session's turns posted one per request, 5 s apart, then one 60 s later
    episodes = [_episode(n, request=f"r{n}", said_s=5 * n) for n in range(4)]
    episodes.append(_episode(4, request="r4", said_s=75))

    # When they are grouped without a window / with a 30 s window
    apart = extraction_batches(episodes)
    together = extraction_batches(episodes, coalesce_window_s=30)

    # Then without it each request is its own call, as the live lane made them
    assert _ids(apart) == [["turn-0"], ["turn-1"], ["turn-2"], ["turn-3"], ["turn-4"]]
    # And with it the turns said within 30 s of the first share one call; the late one not
    assert _ids(together) == [["turn-0", "turn-1", "turn-2", "turn-3"], ["turn-4"]]


def test_a_request_stays_one_call_and_sessions_never_share_one() -> None:
    # Given one request of three turns, then a turn of another session within the window,
    # then eleven quick turns of the first session
    episodes = [_episode(n, request="r0", said_s=0) for n in range(3)]
    episodes.append(_episode(3, request="r1", session="s2", said_s=1))
    episodes += [_episode(n, request=f"q{n}", said_s=2) for n in range(4, 15)]

    # When grouped with a 30 s window
    batches = extraction_batches(episodes, coalesce_window_s=30)

    # Then the request is one call, the other session's turn its own, and no call holds more
    # than ten turns
    assert _ids(batches)[:2] == [["turn-0", "turn-1", "turn-2"], ["turn-3"]]
    assert [len(batch) for batch in batches[2:]] == [10, 1]
