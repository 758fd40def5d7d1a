"""`memwrite serve` under load stops within seconds of SIGTERM (as a service manager sends it),
whatever its backlog: the worker finishes the batch in hand and leaves the rest queued; the
next start drains it, and nothing accepted is lost."""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
import urllib.request
from collections.abc import Callable
from contextlib import closing, nullcontext
from pathlib import Path
from typing import Any, cast

import pytest

from memwrite.adapters.sqlite.database import DATABASE_FILE
from memwrite_local.runtime.backend import LOCAL_API_KEY
from memwrite_local.runtime.runner import DrainReport, LocalRunner
from memwrite_local.runtime.server import QueueWorker
from tests.serve_process import running_serve

CLIENTS = 8
REQUESTS_PER_CLIENT = 2
TURNS_PER_REQUEST = 20  # 320 turns: many seconds of pipeline work, queued in well under one
STOP_BUDGET_SECS = 5.0
DRAIN_TIMEOUT_SECS = 180.0
HTTP_TIMEOUT_SECS = 30


def _call(base_url: str, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    request = urllib.request.Request(
        base_url + path,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Content-Type": "application/json", "x-api-key": LOCAL_API_KEY},
        method=method,
    )
    with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_SECS) as reply:
        return json.loads(reply.read())


def _load(base_url: str) -> list[dict[str, Any]]:
    """`CLIENTS` clients at once, each posting distinct facts as fast as the API answers."""
    answers: list[dict[str, Any]] = []

    def client(number: int) -> None:
        for sent in range(REQUESTS_PER_CLIENT):
            turns = [
                {"role": "user", "content": f"I work at Firm{number}x{sent}x{i} as an engineer."}
                for i in range(TURNS_PER_REQUEST)
            ]
            body = {"session_id": f"s{number}-{sent}", "user_id": f"u{number}", "turns": turns}
            answers.append(_call(base_url, "POST", "/v1/turns", body))

    threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


def _queue(data_dir: Path) -> tuple[int, int, int]:
    """(queued, of which in flight, dead letters) in the data directory's queue."""
    with closing(sqlite3.connect(data_dir / DATABASE_FILE)) as database:
        queued, in_flight = database.execute(
            "SELECT COUNT(*), COALESCE(SUM(visible_at > ?), 0) FROM queue", (time.time(),)
        ).fetchone()
        (dead,) = database.execute("SELECT COUNT(*) FROM dead_letters").fetchone()
    return int(queued), int(in_flight), int(dead)


def test_serve_stops_within_seconds_of_sigterm_under_load_and_the_next_start_drains(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    # Given `memwrite serve` loaded by 8 clients, with more queued than it can drain at once
    with running_serve(data_dir) as server:
        answers = _load(server.base_url)

        # When it receives SIGTERM
        stopped_after = server.terminate()

    # Then it exits within the budget, leaving the backlog queued (none of it in flight,
    # none dead-lettered)
    assert stopped_after < STOP_BUDGET_SECS, f"stopped after {stopped_after:.1f} s"
    accepted = sum(answer["accepted"] for answer in answers)
    assert accepted == len(answers) * TURNS_PER_REQUEST
    queued, in_flight, dead = _queue(data_dir)
    assert queued > 0, "the load left no backlog: the test proves nothing"
    assert (in_flight, dead) == (0, 0)

    # And the next start drains what was left: every accepted turn went through, none lost
    with running_serve(data_dir) as server:
        deadline = time.monotonic() + DRAIN_TIMEOUT_SECS
        while _queue(data_dir)[0] and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _queue(data_dir) == (0, 0, 0)
        statuses = [
            _call(server.base_url, "GET", f"/v1/traces/{answer['trace_id']}")["status"]
            for answer in answers
        ]
    assert set(statuses) == {"complete"}


class _HungRunner:
    """A runner whose batch hangs (as one waiting on a model that never answers)."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def drain(self, stop: Callable[[], bool], *, deliver_webhooks: bool) -> DrainReport:
        self.started.set()
        self.release.wait(HTTP_TIMEOUT_SECS)
        return DrainReport()


def test_a_batch_that_hangs_is_abandoned_after_the_grace_period_not_waited_for(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given the worker inside a batch that does not return
    runner = _HungRunner()
    worker = QueueWorker(cast(LocalRunner, runner), nullcontext())
    worker.start()
    assert runner.started.wait(HTTP_TIMEOUT_SECS)

    # When it is stopped with a short grace period
    started = time.monotonic()
    with caplog.at_level(logging.WARNING):
        stopped = worker.stop(grace_secs=0.2)

    # Then the stop returns after the grace, says the batch was abandoned, and the thread
    # cannot keep the process alive (the turns stay queued for the next start)
    assert time.monotonic() - started < STOP_BUDGET_SECS
    assert stopped is False
    assert "abandoned" in caplog.text
    runner.release.set()
