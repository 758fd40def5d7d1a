"""The `memwrite rollback TRACE_ID` command: roll one trace back in a local data directory.

The same library call as `POST /v1/traces/{trace_id}/rollback` (the record says it came from
the CLI), then stage 7 over the outbox so the restored memories are searchable when it returns.
Exit status 0 when rolled back (or already), 1 when refused or unknown, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, TextIO

from memwrite.adapters.sqlite.database import DATABASE_FILE
from memwrite.errors import RollbackRefused, UnknownTrace
from memwrite.records.store import RollbackRecord
from memwrite_local.runtime.backend import LOCAL_TENANT
from memwrite_local.runtime.embedded import DEFAULT_DATA_DIR

__all__ = ["add_rollback_parser", "run_rollback"]


def add_rollback_parser(commands: Any) -> None:
    """Register `rollback` on the CLI's subparsers."""
    parser = commands.add_parser(
        "rollback",
        help="remove what one trace stored and restore what it superseded (local data dir)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("trace_id")
    parser.add_argument("--json", action="store_true", help="the rollback record as JSON")
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=DEFAULT_DATA_DIR,
        help=f"the state of `memwrite serve` / `ingest --data-dir` (default: {DEFAULT_DATA_DIR}/)",
    )
    parser.add_argument(
        "--tenant", default=LOCAL_TENANT, help=f"the trace's tenant (default: {LOCAL_TENANT})"
    )


def _render(record: RollbackRecord) -> str:
    lines = [
        f"rolled back trace {record.trace_id} (tenant {record.tenant}, user {record.user_id}) "
        f"at {record.rolled_back_at.isoformat()}, via {record.requested_via}"
    ]
    for label, ids in (
        ("removed", record.removed),
        ("restored", record.restored),
        ("updated", record.updated),
    ):
        lines.append(f"  {label:<9}{len(ids):>3}  {' '.join(mid[:8] for mid in ids)}".rstrip())
    return "\n".join(lines)


def _refusal(body: dict[str, Any], as_json: bool, stdout: TextIO) -> int:
    if as_json:
        stdout.write(json.dumps(body) + "\n")
    else:
        blocking = " ".join([*body.get("trace_ids", []), *body.get("memory_ids", [])])
        stdout.write(f"{body['error']}: {body['message']}\n" + (f"  {blocking}\n" * bool(blocking)))
    return 1


def run_rollback(args: argparse.Namespace, stdout: TextIO) -> int:
    from memwrite.edit.rollback import rollback_trace
    from memwrite.wiring import build_api_function_deps
    from memwrite_local.runtime.embedded import local_backend
    from memwrite_local.runtime.runner import DrainReport, LocalRunner

    data_dir: Path = args.data_dir
    if not (data_dir / DATABASE_FILE).is_file():
        raise ValueError(f"{data_dir} holds no memwrite data (no {DATABASE_FILE})")
    with local_backend("sqlite", data_dir):
        runner = LocalRunner()
        deps = build_api_function_deps()
        config = deps.settings.for_request(args.tenant)
        try:
            record = rollback_trace(
                args.tenant, args.trace_id, config, deps.rollback, requested_via="cli"
            )
        except UnknownTrace:
            message = f"no trace {args.trace_id} of tenant {args.tenant}"
            return _refusal({"error": "not_found", "message": message}, args.json, stdout)
        except RollbackRefused as exc:
            body: dict[str, Any] = {
                "error": "rollback_refused",
                "reason": exc.reason,
                "message": str(exc),
                "memory_ids": exc.memory_ids,
                "trace_ids": exc.trace_ids,
            }
            return _refusal(body, args.json, stdout)
        runner.index_outbox(DrainReport())  # the restored memories, searchable again
        runner.deliver_webhooks()  # the change feed's events: one pass of the lane
    if args.json:
        stdout.write(record.model_dump_json() + "\n")
    else:
        stdout.write(_render(record) + "\n")
    return 0
