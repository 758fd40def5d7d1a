"""The simulator's workers: the pipeline's work spread over processes, as production spreads
it over many Lambda workers.

The coordinator (`simulator`) keeps the simulated clock, the traffic, the fake model server and
the tally. Each tick it sends every worker one command (`Tick`): the time, which of the run's
requests arrive (each worker sends its users': a user's requests always go to the same worker,
in order), then a drain of the queue, then the backfill's round when one is due: each
worker's round applies its users' share of the ended batches (`UserShard`: a user's requests
and rounds go to the same worker), and the first to end its round submits what is pending
(as with the outbox below: a lock they share, tried without waiting). It waits for all
of them once (the tick's barrier, with a timeout far above a tick's work, so a
dead or stuck worker ends the run with its traceback instead of hanging it). A worker whose
share is sent drains at once, beside the others still sending theirs, as Lambda workers take
turns off the queue while the ingest API fills it.

Each worker process opens the same SQLite data dir (`LocalSqlite`: WAL, a busy timeout, the
model budget's table shared as `memwrite serve`'s threads share it), runs its own clock set to
the coordinator's time, and calls the handlers through its own `LocalRunner`, as a Lambda
worker runs its own copy of the code against the shared tables. The turn queue keeps them
apart: a receive is one `BEGIN IMMEDIATE` transaction that hides what it takes, and a session's
messages are not delivered while one of them is in flight, so two workers never take the same
turn nor run a session out of order; a batch's users are applied by their own workers, and
the one that finds none of its episodes left in it closes it. The outbox has one consumer at a
time, as a DynamoDB stream shard has one: two readers of `pending` would index (and ask HyPE's
model for) the same row twice. Whichever worker reaches it first takes it (a lock the workers
share, tried without waiting): a worker whose drain ends early indexes while the others still
drain, as the stream's consumer runs beside the queue's Lambdas; rows written while another
worker held it wait for the next try, at the latest the next tick's drain.
`--workers 1` is all of it in the coordinator's process.
"""

from __future__ import annotations

import multiprocessing
import pickle
import selectors
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memwrite_local.loadtest.clock import VirtualClock
from memwrite_local.loadtest.lanes import BackfillMode, Lane
from memwrite_local.loadtest.traffic import Request

if TYPE_CHECKING:
    from multiprocessing.synchronize import Lock

    from memwrite_local.runtime.runner import DrainReport, LocalRunner

__all__ = [
    "BARRIER_TIMEOUT_S",
    "Pipeline",
    "Sent",
    "Tick",
    "WorkerFailed",
    "Workers",
    "send",
    "sharing_runner",
    "spawned",
]

# Real seconds a tick may take in a worker before the run is given up: a tick's work is well
# under a second; the first one builds every handler's dependencies.
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


@dataclass(frozen=True)
class Tick:
    """One tick's work, the same command to every worker: the clock, the run's requests
    arriving in it (`requests[first:end]`, each sent by its user's worker), then a drain of
    the queue, and a backfill round after it when one is due (`backfill`)."""

    now: float
    first: int
    end: int
    backfill: bool = False


class Pipeline:
    """Where a tick's requests, drain and backfill round run: in this process (`runner`), or
    over `workers`."""

    def __init__(
        self,
        runner: Any,
        workers: Workers | None,
        *,
        keys: dict[str, str],
        start: float,
        requests: Sequence[Request],
        backfill: BackfillMode | None,
    ) -> None:
        self._runner = runner
        self._workers = workers
        self._keys = keys
        self._start = start
        self._requests = requests
        self._backfill = backfill
        self._lane: Lane | None = None  # built at its first round, in this process's backend

    def tick(self, tick: Tick) -> list[Sent]:
        """The tick run to its end; what each of its requests came to, in order."""
        if self._workers is not None:
            return self._workers.tick(tick)
        requests = self._requests[tick.first : tick.end]
        sent = [send(self._runner, r, self._keys[r.tenant], self._start) for r in requests]
        self._runner.drain(deliver_webhooks=False)
        if tick.backfill and self._backfill is not None:
            from memwrite_local.runtime.runner import DrainReport

            if self._lane is None:
                self._lane = Lane(self._backfill)
            self._lane.run()
            self._runner.index_outbox(DrainReport())
        return sent


class Workers:
    """The worker processes of one run (coordinator side)."""

    def __init__(self, processes: list[BaseProcess], connections: list[Connection]) -> None:
        self._processes = processes
        self._connections = connections
        # The busiest worker's CPU seconds each tick, summed: what the ticks would take on
        # free cores (each tick ends at its barrier).
        self.critical_path_cpu_s = 0.0

    @property
    def count(self) -> int:
        return len(self._processes)

    def open(
        self,
        state: Path,
        env: dict[str, str],
        keys: dict[str, str],
        start: float,
        *,
        requests: Sequence[Request] = (),
        backfill: BackfillMode | None = None,
    ) -> None:
        """Every worker on the backend in `state` (its tables already created), with the
        handlers' environment `env`, its clock at `start`, and the run's `requests` (sent
        once: a tick names its requests by position). The backfill's rounds (`backfill`: its
        mode, None for none) are every worker's, each of its own users; the first one done
        submits."""
        owners = [_worker_of(request, self.count) for request in requests]
        # Pickled once for every worker: a day's requests take about a second to pickle.
        pickled = pickle.dumps(tuple(requests), pickle.HIGHEST_PROTOCOL)
        for index, connection in enumerate(self._connections):
            setup = _Setup(state, env, keys, start, index, self.count, pickled, owners, backfill)
            connection.send(("open", setup))
        self._answers()

    def tick(self, tick: Tick) -> list[Sent]:
        """Every worker runs `tick` (its share of the requests, a drain, the round if it is
        the lane's): one barrier per tick. What each request came to, in order."""
        for connection in self._connections:
            connection.send(("tick", tick))
        sent: list[Sent] = [Sent(frozenset())] * (tick.end - tick.first)
        answers = self._answers()
        for played, _ in answers:
            for position, outcome in played:
                sent[position - tick.first] = outcome
        self.critical_path_cpu_s += max(cpu for _, cpu in answers)
        return sent

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
        deadline = time.perf_counter() + BARRIER_TIMEOUT_S
        waiting = dict(enumerate(self._connections))
        while waiting:
            sentinels = {self._processes[i].sentinel: i for i in waiting}
            ready = _ready([*waiting.values(), *sentinels], deadline - time.perf_counter())
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


def _ready(sources: Sequence[Connection | int], timeout: float) -> list[Connection | int]:
    """The pipes and process sentinels in `sources` ready to read, waiting up to `timeout`
    real seconds. Not `multiprocessing.connection.wait`: under the simulated clock
    `time.monotonic` stands still between ticks (time-machine moves it with `time.time`), and
    `wait` keeps waiting until its monotonic deadline passes, so its timeout would never end."""
    with selectors.DefaultSelector() as selector:
        by_fd = {selector.register(source, selectors.EVENT_READ).fd: source for source in sources}
        return [by_fd[key.fd] for key, _ in selector.select(max(0.0, timeout))]


def _worker_of(request: Request, count: int) -> int:
    """A user's worker (its shard, `UserShard`): the same for every request and round of the
    user, in every run."""
    from memwrite.backfill.shard import shard_of

    return shard_of(request.tenant, request.user_id, count)


@contextmanager
def spawned(count: int) -> Iterator[Workers]:
    """`count` worker processes, stopped on exit, killed if the run fails; `Workers.open`
    then points them at the run's backend.

    Spawned, not forked: a forked child of a process that has run faiss (a calibration's
    searches, an earlier run in the same process) can hang in its next search, in faiss's
    OpenMP runtime (faiss issue 5206). A spawned worker pays for its imports and first loads
    itself (about 6 s of CPU); it imports the runtime as soon as it starts, so spawned first,
    the workers do it while the coordinator generates the traffic and calibrates."""
    context = multiprocessing.get_context("spawn")
    # Held by the worker indexing the outbox (its one consumer), and by the one submitting.
    outbox, submitting = context.Lock(), context.Lock()
    processes: list[BaseProcess] = []
    connections: list[Connection] = []
    with ExitStack() as stack:
        try:
            for index in range(count):
                ours, theirs = context.Pipe()
                stack.callback(ours.close)
                process = context.Process(
                    target=_serve,
                    args=(theirs, _Locks(outbox, submitting)),
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
    """What a worker needs to open the run's backend and play its part of every tick."""

    state: Path
    env: dict[str, str]
    keys: dict[str, str]
    start: float
    index: int
    count: int
    requests: bytes  # the run's requests, pickled
    owners: list[int]  # request position -> its user's worker
    backfill: BackfillMode | None


@dataclass(frozen=True)
class _Locks:
    """What the workers take turns at, each tried without waiting: the outbox's indexing and
    the batch lane's submission."""

    outbox: Lock
    submitting: Lock


def _serve(connection: Connection, locks: _Locks) -> None:
    """A worker process: its setup, then ticks from the coordinator until told to stop."""
    try:
        # Imported before the setup comes: while the coordinator generates and calibrates.
        import memwrite_local.runtime.embedded
        import memwrite_local.runtime.runner  # noqa: F401

        _, setup = connection.recv()
        clock = VirtualClock(now=setup.start)
        with clock.installed(), _runner(setup, locks.outbox) as runner:
            worker = _Worker(setup, clock, runner, locks.submitting)
            connection.send(("ok", None))
            while True:
                command = connection.recv()
                if command[0] == "stop":
                    break
                connection.send(("ok", worker.play(command[1])))
        connection.send(("ok", time.process_time()))
    except BaseException:
        connection.send(("failed", traceback.format_exc()))
        raise SystemExit(1) from None


class _Worker:
    """One worker's part of every tick, in its process."""

    def __init__(self, setup: _Setup, clock: VirtualClock, runner: Any, submitting: Lock) -> None:
        self._setup = setup
        self._submitting = submitting
        self._clock = clock
        self._runner = runner
        self._requests: tuple[Request, ...] = pickle.loads(setup.requests)
        self._lane = Lane(setup.backfill) if setup.backfill is not None else None

    def play(self, tick: Tick) -> tuple[list[tuple[int, Sent]], float]:
        """Its users' requests sent, the queue drained (the outbox indexed between receives
        when no other worker is indexing it), then the backfill's round of its users when
        due, the pending episodes submitted unless another worker is submitting them, and the
        outbox again. What each request sent came to, and the CPU seconds the tick took."""
        from memwrite.backfill.shard import UserShard
        from memwrite_local.runtime.runner import DrainReport

        began = time.process_time()
        setup = self._setup
        self._clock.advance_to(tick.now)
        sent = []
        for position in range(tick.first, tick.end):
            if setup.owners[position] == setup.index:
                request = self._requests[position]
                api_key = setup.keys[request.tenant]
                sent.append((position, send(self._runner, request, api_key, setup.start)))
        self._runner.drain(deliver_webhooks=False)
        if tick.backfill and self._lane is not None:
            self._lane.run(UserShard(setup.index, setup.count), submit=False)
            # The first worker done with its round submits; one done while another submits
            # leaves it to that one (what is pending then waits for the next round).
            if self._submitting.acquire(block=False):
                try:
                    self._lane.submit()
                finally:
                    self._submitting.release()
            self._runner.index_outbox(DrainReport())
        return sent, time.process_time() - began


@contextmanager
def _runner(setup: _Setup, outbox: Lock) -> Iterator[Any]:
    from memwrite_local.runtime.embedded import LocalSqlite

    with LocalSqlite(setup.state, setup.env):
        yield sharing_runner(outbox)


def sharing_runner(outbox: Lock) -> LocalRunner:
    """A worker's runner (built inside its backend): the queue's stages, and the outbox
    indexed only while it holds `outbox`, the lock every worker shares."""
    from memwrite_local.runtime.runner import LocalRunner

    class SharingRunner(LocalRunner):
        def index_outbox(
            self, report: DrainReport, stop: Callable[[], bool] = lambda: False
        ) -> None:
            if not outbox.acquire(block=False):
                return  # another worker is indexing: it takes what is pending meanwhile
            try:
                super().index_outbox(report, stop)
            finally:
                outbox.release()

    return SharingRunner()
