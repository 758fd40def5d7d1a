"""The `memwrite loadtest` command: the real pipeline under a scaled day of traffic.

Real conversation turns from many tenants go through the embedded backend (ingest API, SQLite
queue, every stage, the store) against a fake model server on 127.0.0.1 that enforces a real
account's per-minute limits, answers 429 with `retry-after` over them and 529 during an
injected outage, and meters tokens; time is simulated, so a day runs in minutes. Traffic and
limits are scaled down together by `--scale`. docs/loadtest.md describes the run and every
field of the report.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, TextIO

__all__ = ["add_loadtest_parser", "run_loadtest"]

DEFAULT_DATA = Path("../shared/data")  # as `make eval`: the evaluation data beside the clone


def _positive(kind: type[float] | type[int]) -> Any:
    def parse(text: str) -> float | int:
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be above 0, not {text}")
        return value

    return parse


def _at_least_zero(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {text}")
    return value


def _hour_of_day(text: str) -> float:
    value = float(text)
    if not 0 <= value < 24:
        raise argparse.ArgumentTypeError(f"must be from 0 to under 24, not {text}")
    return value


def add_loadtest_parser(commands: Any) -> None:
    """Register `loadtest` on the CLI's subparsers."""
    from memwrite_local.loadtest.lanes import BackfillMode
    from memwrite_local.loadtest.simulator import MAX_DEFAULT_WORKERS, LoadOptions
    from memwrite_local.loadtest.traffic import TURN_SPACING_S

    defaults = LoadOptions()
    parser = commands.add_parser(
        "loadtest",
        help="the real pipeline under a scaled day of traffic against model rate limits",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--turns-per-day",
        type=_positive(float),
        default=defaults.turns_per_day,
        help="the production rate simulated (before --scale; default: %(default).0f)",
    )
    parser.add_argument(
        "--scale",
        type=_positive(float),
        default=defaults.scale,
        help="traffic and model limits, both multiplied by this (default: %(default)s)",
    )
    parser.add_argument(
        "--budget-fraction",
        type=_positive(float),
        default=defaults.budget_fraction,
        help="model limits as a fraction of the peak demand (default: %(default)s)",
    )
    parser.add_argument(
        "--tenants", type=_positive(int), default=defaults.tenants, help="default: %(default)s"
    )
    parser.add_argument(
        "--burst-tenant-factor",
        type=_positive(float),
        default=defaults.burst_tenant_factor,
        help="one tenant sends this many times its share for a tenth of the run (default: 1)",
    )
    parser.add_argument(
        "--outage-minutes",
        type=_at_least_zero,
        default=defaults.outage_minutes,
        help="the model answers 529 for this long, from 60%% of the run (default: 0)",
    )
    parser.add_argument(
        "--duration-minutes",
        type=_positive(float),
        default=defaults.duration_minutes,
        help="simulated minutes of traffic (default: %(default).0f, a day)",
    )
    parser.add_argument(
        "--start-hour",
        type=_hour_of_day,
        default=defaults.start_hour,
        help="the hour of the day the traffic starts at, 0 to 24 (default: 0, midnight)",
    )
    parser.add_argument(
        "--backfill-mode",
        choices=[mode.value for mode in BackfillMode],
        default=defaults.backfill_mode.value,
        help="how pending episodes reach the model: live calls or the Message Batches API",
    )
    parser.add_argument(
        "--no-budget",
        action="store_true",
        help="the pipeline without the model budget (as before it), for comparison",
    )
    parser.add_argument(
        "--turns-per-request",
        type=_positive(int),
        default=defaults.turns_per_request,
        help="a user's visit of up to 10 turns sent in requests of this many, "
        f"{TURN_SPACING_S} s apart per turn (default: %(default)s: one request)",
    )
    parser.add_argument(
        "--coalesce-window-s",
        type=_at_least_zero,
        default=defaults.coalesce_window_s,
        help="pipeline.extract.coalesce_window_s of the run (default: %(default)s)",
    )
    parser.add_argument("--seed", type=int, default=defaults.seed, help="default: %(default)s")
    parser.add_argument(
        "--data",
        type=Path,
        default=DEFAULT_DATA,
        help="the evaluation data to replay (default: %(default)s; without it, the sample "
        "conversations in events/conversations/)",
    )
    parser.add_argument(
        "--workers",
        type=_positive(int),
        default=defaults.workers,
        help="processes the pipeline's work is spread over, a user's requests always on the "
        "same one, as production spreads it over Lambda workers; 1: all in this process "
        "(default: %(default)s, the cores this process may use, at most "
        f"{MAX_DEFAULT_WORKERS})",
    )
    parser.add_argument("--json", action="store_true", help="the report as one JSON object")


def run_loadtest(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from memwrite_local.loadtest.lanes import BackfillMode
    from memwrite_local.loadtest.report import render_text
    from memwrite_local.loadtest.simulator import LoadOptions, run_load

    options = LoadOptions(
        turns_per_day=args.turns_per_day,
        scale=args.scale,
        budget_fraction=args.budget_fraction,
        tenants=args.tenants,
        burst_tenant_factor=args.burst_tenant_factor,
        outage_minutes=args.outage_minutes,
        duration_minutes=args.duration_minutes,
        start_hour=args.start_hour,
        backfill_mode=BackfillMode(args.backfill_mode),
        no_budget=args.no_budget,
        turns_per_request=args.turns_per_request,
        coalesce_window_s=args.coalesce_window_s,
        seed=args.seed,
        data=args.data,
        workers=args.workers,
        progress=lambda line: print(f"loadtest: {line}", file=stderr, flush=True),
    )
    run = run_load(options)
    if args.json:
        stdout.write(run.report.model_dump_json() + "\n")
        for note in run.notes:  # the JSON alone on stdout; how the run went beside it
            print(f"loadtest: {note}", file=stderr)
    else:
        stdout.write(render_text(run.report, run.notes))
    return 0
