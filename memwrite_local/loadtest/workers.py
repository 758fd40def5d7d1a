"""The simulator's workers: the pipeline's work spread over processes, as production spreads
it over many Lambda workers.

The coordinator (`simulator`) keeps the simulated clock, the traffic, the fake model server and
the tally. Each tick it hands every worker the tick's time and its share of the tick's
requests (a user's requests always go to the same worker, in order), waits for all of them,
then tells all of them to drain the queue and waits again: a barrier per phase, with a timeout
far above a tick's work, so a dead or stuck worker ends the run with its traceback instead of
hanging it.

Each worker process opens the same SQLite data dir (`LocalSqlite`: WAL, a busy timeout, the
model budget's table shared as `memwrite serve`'s threads share it), runs its own clock set to
the coordinator's time, and calls the handlers through its own `LocalRunner`, as a Lambda
worker runs its own copy of the code against the shared tables. The turn queue keeps them
apart: a receive is one `BEGIN IMMEDIATE` transaction that hides what it takes, and a session's
messages are not delivered while one of them is in flight, so two workers never take the same
turn nor run a session out of order. The outbox has one consumer, worker 0, as a DynamoDB
stream shard has one: two readers of `pending` would index (and ask HyPE's model for) the same
row twice. `--workers 1` is all of it in the coordinator's process.
"""

from __future__ import annotations

import multiprocessing
import time
import traceback
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from memwrite_local.loadtest.clock import VirtualClock
from memwrite_local.loadtest.traffic import Request

__all__ = ["BARRIER_TIMEOUT_S", "Pipeline", "Sent", "WorkerFailed", "Workers", "send", "spawned"]

# Real seconds a tick's phase may take in a worker before the run is given up: a tick's work is
# well under a second; the first one builds every handler's dependencies.
BARRIER_TIMEOUT_S = 600.0


class WorkerFailed(RuntimeError):
    """A worker raised, died or did not answer: the run cannot be trusted any more."""


@dataclass(frozen=True)
class Sent:
    """What `POST /v1/turns` did with one request: the turns it queued, or a refusal."""

    queued: frozenset[str]
    refused: bool = False


def send(runner: Any, request: Request, api_key: str, start: float) -> Sent:
    """`POST /v1/turns`: the turns the ingest API queued (not skipped, failed nor repeated)."""
    answer = runner.call("POST", "/v1/turns", request.body(start), api_key=api_key)
    if answer.status >= 400:
        return Sent(frozenset(), refused=True)
    body = answer.body
    left_out = {item["turn_id"] for item in body["skipped"]}
    left_out |= {item["turn_id"] for item in body.get("failed", [])}
    left_out |= set(body.get("duplicates", []))
    return Sent(frozenset(body["turn_ids"]) - left_out)


class Pipeline:
    """Where a tick's requests and drain run: in this process (`runner`), or over `workers`
    (a drain then runs while the coordinator goes on, until `finish_drain`)."""

    def __init__(
        self, runner: Any, workers: Workers | None, keys: dict[str, str], start: float
    ) -> None:
        self._runner = runner
        self._workers = workers
        self._keys = keys
        self._start = start

    def ingest(self, now: float, requests: Sequence[Request]) -> list[Sent]:
        if self._workers is not None:
            return self._workers.ingest(now, requests)
        return [send(self._runner, r, self._keys[r.tenant], self._start) for r in requests]

    def start_drain(self, now: float) -> None:
        if self._workers is not None:
            self._workers.start_drain(now)
        else:
            self._runner.drain(deliver_webhooks=False)

    def finish_drain(self) -> None:
        if self._workers is not None:
            self._workers.finish_drain()


class Workers:
    """The worker processes of one run (coordinator side)."""

    def __init__(self, processes: list[BaseProcess], connections: list[Connection]) -> None:
        self._processes = processes
        self._connections = connections

    @property
    def count(self) -> int:
        return len(self._processes)

    def open(self, state: Path, env: dict[str, str], keys: dict[str, str], start: float) -> None:
        """Every worker on the backend in `state` (its tables already created), with the
        handlers' environment `env`, its clock at `start`; worker 0 the outbox's consumer."""
        for index, connection in enumerate(self._connections):
            connection.send(("open", _Setup(state, env, keys, start, indexes_outbox=index == 0)))
        self._answers()

    def ingest(self, now: float, requests: Sequence[Request]) -> list[Sent]:
        """Each request sent by its user's worker; what each came to, in `requests`' order."""
        shares: list[list[int]] = [[] for _ in self._processes]
        for position, request in enumerate(requests):
            shares[_worker_of(request, self.count)].append(position)
        for connection, share in zip(self._connections, shares, strict=True):
            connection.send(("ingest", now, [requests[position] for position in share]))
        sent: list[Sent] = [Sent(frozenset())] * len(requests)
        for share, answer in zip(shares, self._answers(), strict=True):
            for position, outcome in zip(share, answer, strict=True):
                sent[position] = outcome
        return sent

    def start_drain(self, now: float) -> None:
        """Every worker drains the queue (and worker 0 the outbox) at `now`."""
        for connection in self._connections:
            connection.send(("drain", now))

    def finish_drain(self) -> None:
        self._answers()

    def close(self) -> list[float]:
        """Stop the workers; the CPU seconds each used."""
        for connection in self._connections:
            connection.send(("stop",))
        cpu = [float(answer) for answer in self._answers()]
        for process in self._processes:
            process.join(BARRIER_TIMEOUT_S)
        return cpu

    def _answers(self) -> list[Any]:
        """Every worker's answer to its last command (the barrier), in worker order."""
        answers: dict[int, Any] = {}
        deadline = time.monotonic() + BARRIER_TIMEOUT_S
        waiting = dict(enumerate(self._connections))
        while waiting:
            sentinels = {self._processes[i].sentinel: i for i in waiting}
            ready = wait([*waiting.values(), *sentinels], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise WorkerFailed(f"workers {sorted(waiting)} gave no answer in time")
            for source in ready:
                if isinstance(source, int):  # a sentinel: the process has ended
                    index = sentinels[source]
                else:
                    index = next(i for i, c in waiting.items() if c is source)
                if index in waiting:  # a process's pipe and sentinel may both be ready
                    answers[index] = self._answer(index, waiting.pop(index))
        return [answers[index] for index in range(self.count)]

    def _answer(self, index: int, connection: Connection) -> Any:
        try:
            kind, value = connection.recv()
        except EOFError:
            code = self._processes[index].exitcode
            raise WorkerFailed(f"worker {index} died (exit code {code})") from None
        if kind == "failed":
            raise WorkerFailed(f"worker {index} failed:\n{value}")
        return value


def _worker_of(request: Request, count: int) -> int:
    """A user's worker: the same for every request of the user, in every run."""
    return zlib.crc32(f"{request.tenant}/{request.user_id}".encode()) % count


@contextmanager
def spawned(count: int) -> Iterator[Workers]:
    """`count` worker processes, stopped on exit, killed if the run fails; `Workers.open`
    then points them at the run's backend.

    Spawned, not forked: the coordinator has run faiss (the calibration's searches), whose
    OpenMP runtime can hang a forked child's next search (faiss issue 5206), and it runs the
    fake model's server thread. A spawned worker pays for its imports and first loads itself
    (about 6 s of CPU)."""
    context = multiprocessing.get_context("spawn")
    processes: list[BaseProcess] = []
    connections: list[Connection] = []
    with ExitStack() as stack:
        try:
            for index in range(count):
                ours, theirs = context.Pipe()
                stack.callback(ours.close)
                process = context.Process(
                    target=_serve,
                    args=(theirs,),
                    name=f"memwrite-loadtest-worker-{index}",
                    daemon=True,
                )
                process.start()
                theirs.close()
                processes.append(process)
                connections.append(ours)
            yield Workers(processes, connections)
        except BaseException:
            for started in processes:
                if started.is_alive():
                    started.kill()
            raise


@dataclass(frozen=True)
class _Setup:
    """What a worker needs to open the run's backend."""

    state: Path
    env: dict[str, str]
    keys: dict[str, str]
    start: float
    indexes_outbox: bool


def _serve(connection: Connection) -> None:
    """A worker process: its setup, then commands from the coordinator until told to stop."""
    try:
        _, setup = connection.recv()
        clock = VirtualClock(now=setup.start)
        with clock.installed(), _runner(setup) as runner:
            connection.send(("ok", None))
            while True:
                command = connection.recv()
                if command[0] == "stop":
                    break
                clock.advance_to(command[1])
                if command[0] == "ingest":
                    keys, start = setup.keys, setup.start
                    connection.send(
                        ("ok", [send(runner, r, keys[r.tenant], start) for r in command[2]])
                    )
                else:
                    runner.drain(deliver_webhooks=False)
                    connection.send(("ok", None))
        connection.send(("ok", time.process_time()))
    except BaseException:
        connection.send(("failed", traceback.format_exc()))
        raise SystemExit(1) from None


@contextmanager
def _runner(setup: _Setup) -> Iterator[Any]:
    from memwrite_local.runtime.embedded import LocalSqlite
    from memwrite_local.runtime.runner import DrainReport, LocalRunner

    class StageRunner(LocalRunner):
        """The queue's stages, the outbox left to worker 0 (its one consumer)."""

        def index_outbox(
            self, report: DrainReport, stop: Callable[[], bool] = lambda: False
        ) -> None:
            return None

    with LocalSqlite(setup.state, setup.env):
        yield LocalRunner() if setup.indexes_outbox else StageRunner()
