"""`memwrite usage [--from T] [--to T]`: `GET /v1/usage` on the local data directory.

What a tenant used (turns in and kept, model calls, tokens cached or not, embeddings, cost) over
whole UTC hours, from the counters the pipeline keeps in the data directory of `memwrite serve`;
the same handler as the API's route, through the local runner. A table by default, the API's
JSON with `--json`; exit status 1 with the API's error for a bad range.
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO
from urllib.parse import urlencode

from memwrite_local.cli.trace import add_data_dir_options, call_local, finish

__all__ = ["add_usage_parser", "run_usage"]


def add_usage_parser(commands: Any) -> None:
    """Register `usage` on the CLI's subparsers."""
    usage = commands.add_parser(
        "usage", help="a tenant's turns, model calls, tokens and cost over a range of hours"
    )
    usage.add_argument(
        "--from",
        dest="from_",
        metavar="T",
        help="ISO 8601 date or time: from its hour (a date: its first hour; default: this month)",
    )
    usage.add_argument(
        "--to",
        metavar="T",
        help="ISO 8601 date or time: through its hour (a date: the whole day; default: now)",
    )
    add_data_dir_options(usage)


def _render(report: dict[str, Any]) -> str:
    rows = (
        ("turns in", report["turns_in"]),
        ("turns kept", report["turns_kept"]),
        ("model calls", report["model_calls"]),
        ("input tokens (uncached)", report["input_tokens"]),
        ("input tokens read from cache", report["cache_read_input_tokens"]),
        ("input tokens written to cache", report["cache_creation_input_tokens"]),
        ("output tokens", report["output_tokens"]),
        ("texts embedded", report["embeddings"]),
    )
    lines = [f"usage of tenant {report['tenant']} from {report['from']} to {report['to']}"]
    lines += [f"  {name:<30} {value:>12,}" for name, value in rows]
    lines.append(f"  {'cost (USD)':<30} {report['cost_usd']:>12.4f}")
    return "\n".join(lines)


def run_usage(args: argparse.Namespace, stdout: TextIO) -> int:
    query = {name: value for name, value in (("from", args.from_), ("to", args.to)) if value}
    path = f"/v1/usage?{urlencode(query)}" if query else "/v1/usage"
    status, body = call_local(args.data_dir, args.api_key, "GET", path)
    return finish(status, body, args.json, _render, stdout)
