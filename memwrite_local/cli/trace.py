"""`memwrite trace` and `memwrite replay`: the trace endpoints on the local data directory.

`memwrite trace TRACE_ID | --memory ID | --user U [--since T] [--until T]` and
`memwrite replay TRACE_ID | --user U [...] [--set key=value ...] [--config FILE]` call the same
handlers as `memwrite serve` (through the local runner, on the embedded backend's data
directory), and print a readable table, or with `--json` the API's JSON.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote, urlencode

from memwrite_local.runtime.backend import LOCAL_API_KEY
from memwrite_local.runtime.embedded import DEFAULT_DATA_DIR

__all__ = [
    "add_data_dir_options",
    "add_trace_parsers",
    "call_local",
    "finish",
    "parse_settings",
    "run_replay",
    "run_trace",
]


def add_data_dir_options(command: argparse.ArgumentParser) -> None:
    """`--data-dir`, `--api-key` and `--json`: every command reading serve's data has them."""
    command.add_argument(
        "--data-dir",
        type=Path,
        default=DEFAULT_DATA_DIR,
        help=f"the embedded backend's state (default: {DEFAULT_DATA_DIR}/, as `memwrite serve`)",
    )
    command.add_argument("--api-key", default=os.environ.get("MEMWRITE_API_KEY", LOCAL_API_KEY))
    command.add_argument("--json", action="store_true", help="the API's JSON on stdout")


def _add_user_range(command: argparse.ArgumentParser) -> None:
    command.add_argument("--user", help="every trace of this user (newest first)")
    command.add_argument("--since", help="from this ISO 8601 time (with --user)")
    command.add_argument("--until", help="up to this ISO 8601 time (with --user)")
    command.add_argument("--limit", type=int, default=20, help="traces per page (with --user)")
    command.add_argument("--cursor", help="the next page (the previous page's next_cursor)")


def add_trace_parsers(commands: Any) -> None:
    trace = commands.add_parser(
        "trace", help="a trace's spans, outcome and cost; or a memory's or a user's traces"
    )
    trace.add_argument("trace_id", nargs="?")
    trace.add_argument("--memory", help="the traces that stored or merged into this memory")
    _add_user_range(trace)
    add_data_dir_options(trace)
    replay = commands.add_parser(
        "replay", help="re-run a trace's inputs with a changed config (dry run) and diff"
    )
    replay.add_argument("trace_id", nargs="?")
    _add_user_range(replay)
    replay.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a config field, dotted (pre_filter.min_words=5); the value is JSON or a string",
    )
    replay.add_argument("--config", type=Path, help="a JSON file of config fields to change")
    add_data_dir_options(replay)


def parse_settings(assignments: list[str], config_file: Path | None) -> dict[str, Any]:
    """`--config FILE` then each `--set a.b=value`, as one nested override."""
    override: dict[str, Any] = {}
    if config_file is not None:
        loaded = json.loads(config_file.read_text(encoding="utf-8"))
        if not isinstance(loaded, dict):
            raise ValueError(f"{config_file}: expected a JSON object of config fields")
        override = loaded
    for assignment in assignments:
        key, equals, raw = assignment.partition("=")
        if not equals or not key:
            raise ValueError(f"--set {assignment!r}: expected KEY=VALUE")
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        *parents, leaf = key.split(".")
        node = override
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ValueError(f"--set {assignment!r}: {part} is not a section")
        node[leaf] = value
    return override


def call_local(
    data_dir: Path, api_key: str, method: str, path: str, body: dict[str, Any] | None = None
) -> tuple[int, dict[str, Any]]:
    from memwrite_local.runtime.embedded import local_backend
    from memwrite_local.runtime.runner import LocalRunner

    with local_backend("sqlite", data_dir):
        result = LocalRunner().call(method, path, body, api_key=api_key)
    return result.status, result.body


def _reason(reason: dict[str, Any] | None) -> str:
    if reason is None:
        return ""
    fields = ", ".join(f"{key}={value}" for key, value in reason.items() if key != "type")
    return f"{reason['type']}{{{fields}}}" if fields else str(reason["type"])


def _render_trace(trace: dict[str, Any]) -> str:
    outcome = trace["outcome"]
    lines = [
        f"trace {trace['trace_id']}  {trace['status']}  user {trace['user_id']}  "
        f"session {trace['session_id']}  {trace['created_at']}",
        f"  outcome: {outcome['stored']} stored, {outcome['merged']} merged, "
        f"{outcome['discarded']} discarded; LLM: {trace['llm_calls']} calls, "
        f"{trace['input_tokens']} in / {trace['output_tokens']} out tokens, "
        f"${trace['cost_usd']:.4f}",
        f"  {'stage':<13} {'item':<17} {'kind':<10} {'result':<10} {'ms':>8}  reason",
    ]
    for span in trace["spans"]:
        # A turn id, or a candidate's turn:key: 8 characters of each part tell them apart.
        item = ":".join(part[:8] for part in span["item_id"].split(":"))
        lines.append(
            f"  {span['stage']:<13} {item:<17} {span['kind']:<10} {span['result']:<10} "
            f"{span['latency_ms']:>8.2f}  {_reason(span['reason'])}"
        )
    if outcome["memory_ids"]:
        lines.append(f"  memories: {', '.join(outcome['memory_ids'])}")
    return "\n".join(lines)


def _render_memory_traces(found: dict[str, Any]) -> str:
    shown = [_render_trace(trace) for trace in found["traces"]]
    return "\n".join([f"memory {found['memory_id']}: {len(shown)} traces", *shown])


def _render_page(page: dict[str, Any]) -> str:
    lines = [
        f"traces of {page['user_id']} (newest first)",
        f"  {'created_at':<33} {'trace_id':<33} {'status':<12} turns stored merged "
        "discarded llm_calls",
    ]
    for trace in page["traces"]:
        outcome = trace["outcome"]
        lines.append(
            f"  {trace['created_at']:<33} {trace['trace_id']:<33} {trace['status']:<12} "
            f"{len(trace['turn_ids']):>5} {outcome['stored']:>6} {outcome['merged']:>6} "
            f"{outcome['discarded']:>9} {trace['llm_calls']:>9}"
        )
    if not page["traces"]:
        lines.append("  (no traces)")
    if page["next_cursor"]:
        lines.append(f"  more: --cursor {page['next_cursor']}")
    return "\n".join(lines)


def _fate(fate: dict[str, Any]) -> str:
    if fate["fate"] == "dropped":
        return f"dropped at {fate['stage']} {_reason(fate['reason'])}"
    return str(fate["fate"])


def _render_diff(diff: dict[str, Any]) -> str:
    before, after = diff["before"], diff["after"]
    lines = [
        f"replay {diff['trace_id']}: "
        f"{before['stored']} stored, {before['merged']} merged, {before['discarded']} discarded"
        f" -> {after['stored']} stored, {after['merged']} merged, {after['discarded']} discarded",
    ]
    for stage, changes in diff["stages"].items():
        for label, key in (("newly dropped", "newly_dropped"), ("newly kept", "newly_kept")):
            for change in changes[key]:
                lines.append(
                    f"  {stage:<13} {label:<14} {change['kind']:<10} {change['item_id']}: "
                    f"{_fate(change['before'])} -> {_fate(change['after'])}"
                )
    for label, key in (
        ("added", "added"),
        ("merged", "merged"),
        ("no longer written", "no_longer_written"),
    ):
        for memory in diff["memories"][key]:
            lines.append(
                f"  memory {label:<17} {memory['memory_id']} {memory['text']!r} "
                f"({memory['before'] or '-'} -> {memory['after'] or '-'})"
            )
    if len(lines) == 1:
        lines.append("  no change")
    return "\n".join(lines)


def _render_batch(batch: dict[str, Any]) -> str:
    totals = batch["totals"]
    lines = [_render_diff(diff) for diff in batch["traces"]]
    lines.append(
        f"totals for {batch['user_id']}: {totals['traces']} traces replayed, "
        f"{totals['changed']} changed; {totals['newly_dropped']} newly dropped, "
        f"{totals['newly_kept']} newly kept; memories {totals['added']} added, "
        f"{totals['merged']} merged, {totals['no_longer_written']} no longer written"
    )
    if batch["without_inputs"]:
        lines.append(f"  not replayed (no stored inputs): {', '.join(batch['without_inputs'])}")
    if batch["next_cursor"]:
        lines.append(f"  more: --cursor {batch['next_cursor']}")
    return "\n".join(lines)


def finish(status: int, body: dict[str, Any], as_json: bool, render: Any, stdout: TextIO) -> int:
    if status != 200:
        stdout.write(json.dumps({"error": body, "status": status}, ensure_ascii=False) + "\n")
        return 1
    stdout.write((json.dumps(body, ensure_ascii=False) if as_json else render(body)) + "\n")
    return 0


def _one_of(args: argparse.Namespace, *names: str) -> None:
    given = [name for name in names if getattr(args, name)]
    if len(given) != 1:
        options = " | ".join("TRACE_ID" if n == "trace_id" else f"--{n}" for n in names)
        raise ValueError(f"{args.command}: give exactly one of {options}")


def _user_query(args: argparse.Namespace) -> dict[str, Any]:
    query = {"from": args.since, "to": args.until, "limit": args.limit, "cursor": args.cursor}
    return {key: value for key, value in query.items() if value is not None}


def run_trace(args: argparse.Namespace, stdout: TextIO) -> int:
    _one_of(args, "trace_id", "memory", "user")
    render: Callable[[dict[str, Any]], str]
    if args.trace_id:
        path, render = f"/v1/traces/{quote(args.trace_id, safe='')}", _render_trace
    elif args.memory:
        path = f"/v1/memories/{quote(args.memory, safe='')}/traces"
        render = _render_memory_traces
    else:
        query = urlencode(_user_query(args))
        path, render = f"/v1/users/{quote(args.user, safe='')}/traces?{query}", _render_page
    status, body = call_local(args.data_dir, args.api_key, "GET", path)
    return finish(status, body, args.json, render, stdout)


def run_replay(args: argparse.Namespace, stdout: TextIO) -> int:
    _one_of(args, "trace_id", "user")
    override = parse_settings(args.set, args.config)
    if args.trace_id:
        path = f"/v1/traces/{quote(args.trace_id, safe='')}/replay"
        status, body = call_local(args.data_dir, args.api_key, "POST", path, {"config": override})
        return finish(status, body, args.json, _render_diff, stdout)
    path = f"/v1/users/{quote(args.user, safe='')}/replay"
    request = {"config": override, **_user_query(args)}
    status, body = call_local(args.data_dir, args.api_key, "POST", path, request)
    return finish(status, body, args.json, _render_batch, stdout)
