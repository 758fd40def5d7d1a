"""The `memwrite expire` command: the expiry sweep now, on a local data directory.

Each user expiry (`PATCH /v1/memories/{id}` `expires_at`) that has passed unannounced gets its
`memory.expired` row, then stage 7 runs over the outbox (the documents leave the index, the
events' deliveries are queued) and the webhook delivery lane makes one pass: a delivery whose
receiver failed waits in the queue for its retry (`memwrite serve`, or the next drain, sends
it). `memwrite serve` runs the same sweep on every worker poll; this is for a data directory no
server is running on.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, TextIO

from memwrite.adapters.sqlite.database import DATABASE_FILE
from memwrite_local.runtime.embedded import DEFAULT_DATA_DIR

__all__ = ["add_expire_parser", "run_expire"]


def add_expire_parser(commands: Any) -> None:
    """Register `expire` on the CLI's subparsers."""
    parser = commands.add_parser(
        "expire",
        help="announce the user expiries that have passed (memory.expired), local data dir",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=DEFAULT_DATA_DIR,
        help=f"the state of `memwrite serve` / `ingest --data-dir` (default: {DEFAULT_DATA_DIR}/)",
    )


def run_expire(args: argparse.Namespace, stdout: TextIO) -> int:
    from memwrite_local.runtime.embedded import local_backend
    from memwrite_local.runtime.runner import DrainReport, LocalRunner

    data_dir: Path = args.data_dir
    if not (data_dir / DATABASE_FILE).is_file():
        raise ValueError(f"{data_dir} holds no memwrite data (no {DATABASE_FILE})")
    with local_backend("sqlite", data_dir):
        runner = LocalRunner()
        announced = 0
        while True:  # every due one, a bounded sweep at a time
            swept = runner.sweep_expiries()
            announced += len(swept.announced)
            if not (swept.more and swept.announced):
                break
        report = DrainReport()
        runner.index_outbox(report)
        waiting = runner.deliver_webhooks().retrying
    if args.json:
        result = {
            "announced": announced,
            "unindexed": sorted(report.index_failed),
            "deliveries_waiting": waiting,
        }
        stdout.write(json.dumps(result) + "\n")
    else:
        stdout.write(f"{announced} expiries announced (memory.expired)\n")
        for row, error in sorted(report.index_failed.items()):
            stdout.write(f"unindexed {row}: {error}\n")
        if waiting:
            stdout.write(f"{waiting} webhook deliveries wait for a retry\n")
    return 1 if report.index_failed else 0
