"""`memwrite loadtest`: the real pipeline under a day of scaled traffic, against model limits.

What runs is the embedded backend as `memwrite serve` runs it: the ingest API's handler
(stage 1) for every request, the SQLite turn queue, every pipeline stage's handler, the
outbox consumer and the store, with the configuration a deployment would set. Only the model
is fake (`model_server`: a real HTTP server with a real account's per-minute limits, reached by
the real `anthropic` client) and the time is simulated (`clock`): the simulator moves it a
tick at a time, sends the tick's requests, then drains the queue as its consumers would.

Limits follow the traffic down (`--scale`): a short calibration run without limits measures
what the pipeline asks of the model per turn; the peak demand per minute is that times the
day's peak rate (`traffic.PEAK_FACTOR`), and the account's limits are `--budget-fraction` of
it. `--no-budget` is the pipeline as it was before the model budget: no budget, and no
backfill unless one is scheduled (off by default).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from memwrite_local.loadtest.clock import VirtualClock
from memwrite_local.loadtest.lanes import BackfillMode, Schedule, has_work, period_s
from memwrite_local.loadtest.model_server import FakeModelServer, Meter, ModelLimits, serving
from memwrite_local.loadtest.probe import Probe
from memwrite_local.loadtest.report import LaneCost, LoadReport, Outcomes, percentile
from memwrite_local.loadtest.traffic import (
    OUTAGE_START,
    PEAK_FACTOR,
    TURNS_PER_REQUEST,
    Request,
    TrafficPlan,
    generate,
    load_scripts,
)
from memwrite_local.loadtest.workers import Pipeline, Sent, Tick, Workers, spawned

__all__ = ["LoadOptions", "LoadRun", "default_workers", "run_load"]

# Simulated seconds per step: latencies are measured to this resolution (issue 29's bound is
# 60 s). Each tick ends at a barrier that waits for the busiest worker; at 10 s the peak's
# ticks held ~60 ms of a worker's work, cut in chunks of 10-50 ms, and the busiest worker's
# CPU each tick, summed, was 11-15 % above what 20 s ticks give (docs/loadtest.md).
TICK_S = 20.0
DRAIN_GRACE_S = 2 * 3600.0  # after the traffic: how long the lanes may take to settle
CALIBRATION_SHARE = 0.02  # of the run's requests, replayed without limits to measure demand
CALIBRATION_REQUESTS = (30, 300)  # at least, at most
# A simulated day starts at midnight UTC this long ago: every timestamp is in the past.
START_DAYS_AGO = 3
MAX_DEFAULT_WORKERS = 4  # worker processes by default, at most (`default_workers`)
SHARED_MEMORY = "/dev/shm"  # tmpfs on Linux: the run's data dir, where it exists (`_scratch_dir`)
OUTAGE_RECOVERY_S = 60.0  # turns arriving this soon after an outage are not "calm" either


def default_workers() -> int:
    """The cores this process may use, at most `MAX_DEFAULT_WORKERS`."""
    return max(1, min(len(os.sched_getaffinity(0)), MAX_DEFAULT_WORKERS))


@dataclass(frozen=True)
class LoadOptions:
    turns_per_day: float = 100_000_000
    scale: float = 0.001
    budget_fraction: float = 1.0
    tenants: int = 20
    burst_tenant_factor: float = 1.0
    outage_minutes: float = 0.0
    duration_minutes: float = 1_440.0
    start_hour: float = 0.0  # the hour of the day the traffic starts at (its rate follows it)
    backfill_mode: BackfillMode = BackfillMode.LIVE
    no_budget: bool = False
    # A visit's turns in requests of this many (TURNS_PER_REQUEST: one request per visit).
    turns_per_request: int = TURNS_PER_REQUEST
    coalesce_window_s: float = 0.0  # pipeline.extract.coalesce_window_s
    seed: int = 0
    data: Path | None = None  # the evaluation data (`../shared/data`); None: the samples
    # Processes the pipeline's work is spread over (`workers`); 1: all in this process.
    workers: int = field(default_factory=default_workers)
    progress: Callable[[str], None] | None = None  # told every simulated hour

    @property
    def duration_s(self) -> float:
        return self.duration_minutes * 60


@dataclass(frozen=True)
class PerTurn:
    """What one turn asks of the model, on average."""

    calls: float
    input_tokens: float
    output_tokens: float


@dataclass
class LoadRun:
    report: LoadReport
    notes: list[str] = field(default_factory=list)


@dataclass
class _Tally:
    """What the simulator saw while the run went (the store tells the rest at the end)."""

    turns_in: int = 0
    refused: int = 0  # requests the ingest API answered with an error (turns not accepted)
    arrived: dict[str, float] = field(default_factory=dict)  # accepted turn -> arrival
    tenant: dict[str, str] = field(default_factory=dict)
    settled: dict[str, float] = field(default_factory=dict)  # -> when it left the queue
    max_queue_depth: int = 0


def _api_keys(tenants: Sequence[str]) -> dict[str, str]:
    return {tenant: f"loadtest-key-{tenant}" for tenant in tenants}


def _settings(options: LoadOptions, limits: ModelLimits | None) -> dict[str, Any]:
    """The deployment's settings file: the model budget (`pipeline.model`, off with
    `--no-budget`, which also restores the extraction's limits from before it) and the
    backfill lane (`pipeline.backfill.mode`)."""
    pipeline: dict[str, Any] = {
        "backfill": {"mode": options.backfill_mode.value},
        "extract": {"coalesce_window_s": options.coalesce_window_s},
    }
    if options.no_budget:
        pipeline["extract"] |= {"max_output_tokens": 8_192, "max_retries": 3}
        pipeline["model"] = {"budget_enabled": False}
        return {"pipeline": pipeline}
    model: dict[str, Any] = {"budget_enabled": True}
    if limits is not None and limits.requests_per_minute is not None:
        per_minute = {
            "requests_per_minute": limits.requests_per_minute,
            "input_tokens_per_minute": limits.input_tokens_per_minute,
            "output_tokens_per_minute": limits.output_tokens_per_minute,
        }
        # The budget knows the account's limits as they are (whole numbers: `limits_for`).
        model["limits"] = {"*": {name: int(value or 1) for name, value in per_minute.items()}}
    pipeline["model"] = model
    return {"pipeline": pipeline}


class _Simulation:
    """One run of `requests` through a fresh embedded backend against a fake model."""

    def __init__(
        self,
        options: LoadOptions,
        requests: Sequence[Request],
        limits: ModelLimits,
        outage: tuple[float, float] | None,
        backfill: bool,
    ) -> None:
        self.options = options
        self.requests = requests
        self.limits = limits
        self.outage = outage
        self.backfill = backfill
        self.tally = _Tally()
        self.start = _midnight(time.time()) - START_DAYS_AGO * 86_400
        self.clock = VirtualClock(now=self.start)
        self.meter = Meter()
        self.outcomes: Outcomes | None = None
        self._next_progress = self.start + 3600
        self.worker_cpu_s: list[float] = []  # CPU seconds of each worker process (1: none)
        self.critical_path_cpu_s = 0.0  # the busiest worker's each tick, summed (1: none)

    def run(self, workers: Workers | None = None) -> None:
        """The run, its work spread over `workers` (already spawned), or in this process."""
        tenants = sorted({request.tenant for request in self.requests})
        keys = _api_keys(tenants)
        from memwrite.tenants import SETTINGS_CACHE_SECS

        outage = None
        if self.outage is not None:
            outage = (self.start + self.outage[0], self.start + self.outage[1])
        with ExitStack() as stack:
            scratch = tempfile.TemporaryDirectory(prefix="mw-load-", dir=_scratch_dir())
            data_dir = Path(stack.enter_context(scratch))
            server = stack.enter_context(
                serving(FakeModelServer(clock=self.clock.time, limits=self.limits, outage=outage))
            )
            self.meter = server.meter
            settings = data_dir / "settings.json"
            settings.write_text(json.dumps(_settings(self.options, self.limits)), "utf-8")
            env = {
                "ANTHROPIC_API_KEY": "sk-ant-loadtest",
                "ANTHROPIC_BASE_URL": server.url,
                "MEMWRITE_CONFIG": str(settings),
                "MEMWRITE_API_KEYS": ",".join(f"{k}={t}" for t, k in keys.items()),
                # As on AWS: an instance reads a tenant's stored settings at most this often
                # (`memwrite serve` reads them on every request, to apply a change at once).
                "MEMWRITE_SETTINGS_CACHE_SECS": str(SETTINGS_CACHE_SECS),
            }
            stack.enter_context(self.clock.installed())
            self._drive(data_dir / "state", env, keys, workers)

    def _drive(
        self, state: Path, env: dict[str, str], keys: dict[str, str], workers: Workers | None
    ) -> None:
        from memwrite_local.runtime.embedded import LocalSqlite
        from memwrite_local.runtime.runner import DrainReport, LocalRunner

        with LocalSqlite(state, env):
            # Built first: the data dir's tables and index exist before any worker opens them.
            runner = LocalRunner()
            probe = Probe(state)
            lane = self.options.backfill_mode if self.backfill else None
            if workers is not None:
                workers.open(state, env, keys, self.start, requests=self.requests, backfill=lane)
            pipeline = Pipeline(
                runner,
                workers,
                keys=keys,
                start=self.start,
                requests=self.requests,
                backfill=lane,
            )
            self._play(pipeline, probe, lane)
            if workers is not None:
                self.worker_cpu_s = workers.close()
                self.critical_path_cpu_s = workers.critical_path_cpu_s
            runner.index_outbox(DrainReport())
            self.outcomes = probe.outcomes(self.tally.arrived)

    def _play(self, pipeline: Pipeline, probe: Probe, lane: BackfillMode | None) -> None:
        """The ticks, from the first request until the traffic and the lanes are done (or the
        grace after the traffic has passed)."""
        tally, clock = self.tally, self.clock
        schedule = None
        if lane is not None:
            period = period_s(lane)
            schedule = Schedule(period, clock.now + period)
        in_flight: set[str] = set()
        # Turns in the queue at the end of the last tick, at least (only ingests add).
        depth = 0
        ends_at = self.start + self.options.duration_s
        position = 0
        backfilled = False
        while True:
            clock.advance_to(clock.now + TICK_S)
            self._progress(position, len(in_flight))
            due = self._due(position)
            round_due = schedule is not None and schedule.due(clock.now)
            # A tick after a round too: its drains index what the rounds stored meanwhile.
            if due > position or in_flight or round_due or backfilled:
                sent = pipeline.tick(Tick(clock.now, position, due, round_due))
                # The most the queue can have held: every worker's ingest before any drain.
                depth += sum(len(outcome.queued) for outcome in sent)
                tally.max_queue_depth = max(tally.max_queue_depth, depth)
                in_flight |= self._tally(self.requests[position:due], sent)
                position = due
                if in_flight:
                    queued = probe.queued()
                    for turn_id in in_flight - queued:
                        tally.settled[turn_id] = clock.now
                    in_flight &= queued
                    depth = len(queued)
            backfilled = round_due
            if clock.now > ends_at + DRAIN_GRACE_S:
                break
            if in_flight:
                continue
            backfilling = lane is not None and has_work(lane, probe)
            if position == len(self.requests) and not backfilling:
                break
            if not backfilling and position < len(self.requests):
                # Nothing to do until the next request: skip the empty ticks.
                upcoming = self.start + self.requests[position].at
                clock.advance_to(upcoming - TICK_S)

    def _due(self, position: int) -> int:
        """Where the requests due by now end, from `position`."""
        due = position
        while due < len(self.requests) and self.start + self.requests[due].at <= self.clock.now:
            due += 1
        return due

    def _progress(self, position: int, queued: int) -> None:
        """Told every simulated hour, when the options ask."""
        now = self.clock.now
        if self.options.progress is None or now < self._next_progress:
            return
        self._next_progress += 3600
        self.options.progress(
            f"{(now - self.start) / 3600:.0f} h simulated: {position}/{len(self.requests)} "
            f"requests, {len(self.tally.arrived)} turns accepted, {queued} queued, "
            f"{self.meter.model_calls} model calls, {time.process_time():.0f} s CPU"
        )

    def _tally(self, requests: Sequence[Request], sent: Sequence[Sent]) -> set[str]:
        """The turns the requests queued (new ones), with their arrival time and tenant."""
        tally = self.tally
        accepted: set[str] = set()
        for request, outcome in zip(requests, sent, strict=True):
            tally.turns_in += len(request.turns)
            tally.refused += outcome.refused
            for turn_id in outcome.queued:
                if turn_id not in tally.arrived:
                    tally.arrived[turn_id] = self.start + request.at
                    tally.tenant[turn_id] = request.tenant
                    accepted.add(turn_id)
        return accepted


def _scratch_dir() -> str | None:
    """Where a run's data dir goes: memory-backed storage when the machine has it (a run's
    SQLite file needs no durability across a crash, and a COMMIT there costs a fraction of one
    on disk), else the temp dir (None)."""
    shared_memory = Path(SHARED_MEMORY)
    if shared_memory.is_dir() and os.access(shared_memory, os.W_OK | os.X_OK):
        return str(shared_memory)
    return None


def _midnight(moment: float) -> float:
    return moment - moment % 86_400


def _per_turn(meter: Meter, turns: int) -> PerTurn:
    turns = max(turns, 1)
    return PerTurn(
        calls=meter.model_calls / turns,
        # What the input limit counts: uncached and cache-written tokens, not cache reads.
        input_tokens=(meter.input_tokens + meter.cache_creation_input_tokens) / turns,
        output_tokens=meter.output_tokens / turns,
    )


def limits_for(per_turn: PerTurn, turns_per_day: float, fraction: float) -> ModelLimits:
    """`fraction` of the peak demand per minute of `turns_per_day` (already scaled), in whole
    numbers rounded down (at least 1) as an account's limits are: the budget is configured
    with exactly the limits the fake model enforces (`_settings`)."""
    peak_turns_per_minute = turns_per_day / 1_440 * PEAK_FACTOR

    def whole(per_turn_demand: float) -> float:
        return float(max(1, math.floor(fraction * per_turn_demand * peak_turns_per_minute)))

    return ModelLimits(
        requests_per_minute=whole(per_turn.calls),
        input_tokens_per_minute=whole(per_turn.input_tokens),
        output_tokens_per_minute=whole(per_turn.output_tokens),
    )


def _calibrate(options: LoadOptions, requests: Sequence[Request]) -> PerTurn:
    low, high = CALIBRATION_REQUESTS
    count = min(len(requests), max(low, min(high, round(len(requests) * CALIBRATION_SHARE))))
    sample = _Simulation(
        replace(options, progress=None, workers=1), requests[:count], ModelLimits(), None, False
    )
    sample.run()
    return _per_turn(sample.meter, sample.tally.turns_in)


def _latencies(tally: _Tally, outcomes: Outcomes) -> dict[str, float]:
    """Turn -> seconds from arrival to leaving the live lane done: a memory written or a
    decision that there is none (turns the live lane deferred are the backfill's)."""
    return {
        turn_id: settled - tally.arrived[turn_id]
        for turn_id, settled in tally.settled.items()
        if turn_id not in outcomes.episode_turns and turn_id not in outcomes.lost
    }


def _fairness(
    simulation: _Simulation, plan: TrafficPlan, latency: dict[str, float]
) -> float | None:
    """The other tenants' p99 during the burst over their p99 outside it and the outage (and
    the turns that may have waited through the outage)."""
    from memwrite.config.model_limits import ModelConfig

    burst_tenant = "t00"
    burst, outage = plan.burst, simulation.outage  # seconds into the run
    # A turn that arrived up to `max_wait_s` (the settings file leaves the default) before the
    # outage may wait through it: not calm either.
    waits = ModelConfig().max_wait_s
    during, calm = [], []
    for turn_id, seconds in latency.items():
        if simulation.tally.tenant[turn_id] == burst_tenant:
            continue
        arrived = simulation.tally.arrived[turn_id] - simulation.start
        if burst[0] <= arrived < burst[1]:
            during.append(seconds)
        elif outage is None or not outage[0] - waits <= arrived < outage[1] + OUTAGE_RECOVERY_S:
            calm.append(seconds)
    p99_during, p99_calm = percentile(during, 0.99), percentile(calm, 0.99)
    if p99_during is None or not p99_calm:
        return None
    return p99_during / p99_calm


def _lane_costs(meter: Meter) -> LaneCost:
    """USD of the live calls and of the batch requests at list prices (`extract.prices_per_mtok`,
    cache writes and reads at their multiples, `memwrite.costs.pricing`), the batch's at
    `backfill.batch_price_factor` of them."""
    from memwrite.config.settings import load_settings
    from memwrite.costs.pricing import cost_usd

    pipeline = load_settings().pipeline
    model, prices = pipeline.extract.model, pipeline.extract.prices_per_mtok
    live = cost_usd(
        model,
        meter.input_tokens,
        meter.output_tokens,
        prices,
        cache_creation_input_tokens=meter.cache_creation_input_tokens,
        cache_read_input_tokens=meter.cache_read_input_tokens,
    )
    batch = cost_usd(
        model,
        meter.batch_input_tokens,
        meter.batch_output_tokens,
        prices,
        cache_creation_input_tokens=meter.batch_cache_creation_input_tokens,
        cache_read_input_tokens=meter.batch_cache_read_input_tokens,
    )
    return LaneCost(live=live, batch=batch * pipeline.backfill.batch_price_factor)


def _input_tokens(meter: Meter) -> tuple[int, int]:
    """Every input token both lanes sent (uncached, written and read), and those read."""
    read = meter.cache_read_input_tokens + meter.batch_cache_read_input_tokens
    sent = (
        meter.input_tokens
        + meter.batch_input_tokens
        + meter.cache_creation_input_tokens
        + meter.batch_cache_creation_input_tokens
        + read
    )
    return sent, read


def _in_workers(simulation: _Simulation) -> str:
    cpu_s, critical_path_s = simulation.worker_cpu_s, simulation.critical_path_cpu_s
    if not cpu_s:
        return ""
    each = " + ".join(f"{seconds:.0f}" for seconds in cpu_s)
    return (
        f", {sum(cpu_s):.0f} s in its {len(cpu_s)} workers ({each}; the busiest worker's each "
        f"tick: {critical_path_s:.0f} s)"
    )


def run_load(options: LoadOptions) -> LoadRun:
    """The run `options` describe, and its report."""
    began, cpu_began = time.perf_counter(), time.process_time()
    with ExitStack() as stack:
        workers = None
        if options.workers > 1:
            # Spawned first: their imports run beside the traffic's generation and calibration.
            workers = stack.enter_context(spawned(options.workers))
        return _run_load(options, workers, began, cpu_began)


def _run_load(
    options: LoadOptions, workers: Workers | None, began: float, cpu_began: float
) -> LoadRun:
    scripts, source = load_scripts(options.data)
    plan = TrafficPlan(
        turns_per_day=options.turns_per_day * options.scale,
        duration_s=options.duration_s,
        start_hour=options.start_hour,
        tenants=options.tenants,
        burst_factor=options.burst_tenant_factor,
        seed=options.seed,
        turns_per_request=options.turns_per_request,
    )
    requests = generate(plan, scripts)
    demand = _calibrate(options, requests)
    limits = limits_for(demand, plan.turns_per_day, options.budget_fraction)
    outage = None
    if options.outage_minutes > 0:
        first = OUTAGE_START * options.duration_s
        outage = (first, first + options.outage_minutes * 60)
    simulation = _Simulation(options, requests, limits, outage, not options.no_budget)
    simulation.run(workers)
    tally, meter, outcomes = simulation.tally, simulation.meter, simulation.outcomes
    assert outcomes is not None  # set by run()
    latency = _latencies(tally, outcomes)
    turns = max(tally.turns_in, 1)
    cost = _lane_costs(meter)
    input_sent, input_read = _input_tokens(meter)
    report = LoadReport(
        turns_in=tally.turns_in,
        turns_lost=len(outcomes.lost),
        deferred_without_reason=outcomes.deferred_without_reason,
        episodes_pending_at_end=outcomes.episodes_pending,
        episodes_in_batches_at_end=outcomes.episodes_in_batches,
        p50_turn_to_memory_s=percentile(list(latency.values()), 0.50),
        p99_turn_to_memory_s=percentile(list(latency.values()), 0.99),
        rate_limited_ratio=meter.rate_limited / max(meter.model_calls, 1),
        fairness_ratio=_fairness(simulation, plan, latency),
        max_queue_depth=tally.max_queue_depth,
        model_calls_per_turn=(meter.model_calls + meter.batch_requests) / turns,
        input_tokens_per_turn=input_sent / turns,
        cached_input_share=input_read / max(input_sent, 1),
        output_tokens_per_turn=(meter.output_tokens + meter.batch_output_tokens) / turns,
        cost_per_million_turns_usd=LaneCost(
            live=cost.live / turns * 1e6, batch=cost.batch / turns * 1e6
        ),
        wall_s=round(time.perf_counter() - began, 1),
    )
    cpu_s = time.process_time() - cpu_began
    notes = [
        f"traffic: {len(requests)} requests from {source}; {len(tally.arrived)} turns accepted "
        f"({outcomes.memory} memory, {outcomes.episode} episode, {outcomes.dropped} dropped "
        f"with a reason); {tally.refused} requests refused",
        f"demand per turn (calibration): {demand.calls:.3f} calls, "
        f"{demand.input_tokens:.0f} input, {demand.output_tokens:.0f} output tokens",
        f"limits per minute: {limits.requests_per_minute:.1f} requests, "
        f"{limits.input_tokens_per_minute:.0f} input, "
        f"{limits.output_tokens_per_minute:.0f} output tokens",
        f"model: {meter.model_calls} calls, {meter.rate_limited} answered 429, "
        f"{meter.overloaded} answered 529; {meter.batches} batches of "
        f"{meter.batch_requests} requests",
        f"prompt cache: {meter.cache_read_input_tokens} live and "
        f"{meter.batch_cache_read_input_tokens} batch input tokens read, "
        f"{meter.cache_creation_input_tokens} and {meter.batch_cache_creation_input_tokens} "
        "written",
        f"CPU: {cpu_s:.0f} s in this process{_in_workers(simulation)} (the wall "
        "time counts other processes too)",
    ]
    return LoadRun(report, notes)
