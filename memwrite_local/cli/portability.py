"""`memwrite export --user U` and `memwrite import FILE --user U`: a user's memories, entity
facts, entities and episodes as JSON lines, out of and back into a local data directory.

The same library calls as `GET /v1/users/{user_id}/export` and `POST .../import`; export
streams its lines to stdout (or `--output`), import restores them with the same ids and then
runs stage 7 over the outbox, so the restored memories are searchable when it returns. Exit
status 0 on success, 1 when the import is refused (bad line, changed store), 2 on bad usage.
"""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from memwrite.adapters.sqlite.database import DATABASE_FILE
from memwrite.errors import ImportConflict, ImportRejected
from memwrite_local.runtime.backend import LOCAL_TENANT
from memwrite_local.runtime.embedded import DEFAULT_DATA_DIR

__all__ = ["add_portability_parsers", "run_export", "run_import"]


def add_portability_parsers(commands: Any) -> None:
    """Register `export` and `import` on the CLI's subparsers."""
    export = commands.add_parser(
        "export",
        help="a user's memories, entity facts, entities and episodes as JSON lines (local data)",
    )
    export.add_argument("--output", type=Path, help="write here instead of stdout")
    imported = commands.add_parser(
        "import", help="restore an export of a user into a local data dir (same ids)"
    )
    imported.add_argument("file", help="the export's JSON lines ('-': stdin)")
    imported.add_argument("--json", action="store_true", help="the import report as JSON")
    for parser in (export, imported):
        parser.add_argument("--user", required=True)
        parser.add_argument(
            "--data-dir",
            type=Path,
            default=DEFAULT_DATA_DIR,
            help=f"the state of `memwrite serve` (default: {DEFAULT_DATA_DIR}/)",
        )
        parser.add_argument(
            "--tenant", default=LOCAL_TENANT, help=f"the user's tenant (default: {LOCAL_TENANT})"
        )


def _open_binary(args: argparse.Namespace) -> BinaryIO:
    return Path(args.file).open("rb")


def _require_data(data_dir: Path) -> None:
    if not (data_dir / DATABASE_FILE).is_file():
        raise ValueError(f"{data_dir} holds no memwrite data (no {DATABASE_FILE})")


def run_export(args: argparse.Namespace, stdout: TextIO) -> int:
    from memwrite.portability import export_lines
    from memwrite.wiring import build_api_function_deps
    from memwrite_local.runtime.embedded import local_backend

    _require_data(args.data_dir)
    with local_backend("sqlite", args.data_dir):
        lines = export_lines(args.tenant, args.user, build_api_function_deps().portability)
        if args.output is None:
            stdout.writelines(lines)
        else:
            with args.output.open("w", encoding="utf-8") as out:
                out.writelines(lines)
    return 0


def run_import(args: argparse.Namespace, stdout: TextIO) -> int:
    from memwrite.portability import ImportGuards, import_user, read_lines
    from memwrite.wiring import build_api_function_deps
    from memwrite_local.runtime.embedded import local_backend
    from memwrite_local.runtime.runner import DrainReport, LocalRunner

    # A fresh directory is fine: an import is also how a user moves to another store.
    with local_backend("sqlite", args.data_dir), ExitStack() as files:
        runner = LocalRunner()
        deps = build_api_function_deps()
        guards = ImportGuards.of(deps.configs.for_request(args.tenant))
        # Line by line, each refused once it passes the limit: memory stays bounded.
        stream = sys.stdin.buffer if args.file == "-" else files.enter_context(_open_binary(args))
        try:
            lines = read_lines(stream, guards.max_line_bytes)
            report = import_user(args.tenant, args.user, lines, deps.portability, guards)
        except (ImportRejected, ImportConflict) as exc:
            error = "invalid_request" if isinstance(exc, ImportRejected) else "import_conflict"
            body = {"error": error, "line": exc.line, "message": str(exc)}
            stdout.write((json.dumps(body) if args.json else f"{error}: {exc}") + "\n")
            return 1
        runner.index_outbox(DrainReport())  # the restored memories, searchable
        runner.deliver_webhooks()  # the change feed's events: one pass of the lane
    if args.json:
        stdout.write(report.model_dump_json() + "\n")
    else:
        counts = ", ".join(f"{n} {kind}" for kind, n in report.imported.items())
        same = sum(report.unchanged.values())
        stdout.write(f"imported {counts} for {args.user}; {same} already there\n")
    return 0
