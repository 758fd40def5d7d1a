"""`make loadtest`: the standard set of load runs, every report into one JSON file.

The issue's example day (100M turns a day at 1/1000, limits at half the peak demand, 20
tenants, one bursting tenfold, a 10-minute outage) with and without the model budget, with the
backfill live and through the Message Batches API. `python -m memwrite_local.loadtest.standard
--out bench/loadtest.json [--data DIR]`; the file maps each run's arguments to its report.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from memwrite_local.loadtest.lanes import BackfillMode
from memwrite_local.loadtest.simulator import LoadOptions, run_load

__all__ = ["STANDARD_RUNS", "main"]

EXAMPLE = LoadOptions(
    turns_per_day=100_000_000,
    scale=0.001,
    budget_fraction=0.5,
    tenants=20,
    burst_tenant_factor=10,
    outage_minutes=10,
)
STANDARD_RUNS = tuple(
    replace(EXAMPLE, backfill_mode=mode, no_budget=no_budget)
    for no_budget in (False, True)
    for mode in (BackfillMode.BATCH, BackfillMode.LIVE)
)


def arguments_of(options: LoadOptions) -> str:
    """The `memwrite loadtest` arguments of a run, as its key in the file."""
    words = [
        f"--turns-per-day {options.turns_per_day:.0f}",
        f"--scale {options.scale:g}",
        f"--budget-fraction {options.budget_fraction:g}",
        f"--tenants {options.tenants}",
        f"--burst-tenant-factor {options.burst_tenant_factor:g}",
        f"--outage-minutes {options.outage_minutes:g}",
        f"--backfill-mode {options.backfill_mode.value}",
    ]
    if options.no_budget:
        words.append("--no-budget")
    return " ".join(words)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    args = parser.parse_args(argv)
    reports = {}
    for options in STANDARD_RUNS:
        key = arguments_of(options)
        sys.stderr.write(f"loadtest: {key}\n")
        run = run_load(replace(options, data=args.data))
        reports[key] = run.report.model_dump(mode="json")
        sys.stderr.write(json.dumps(reports[key]) + "\n")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(reports, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
