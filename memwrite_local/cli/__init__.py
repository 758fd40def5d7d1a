"""The `memwrite` command line (`memwrite_local.cli:main`, `python -m memwrite_local.cli`).

This module holds the parser and the dispatch; each command is a module of this package
(`trace` also holds `replay`, `portability` holds `export` and `import`) with its
`add_<command>_parser` and `run_<command>`. `memwrite mcp` is `memwrite.mcp_server`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from memwrite.errors import MemwriteError
from memwrite_local.cli.backfill import add_backfill_parser, run_backfill
from memwrite_local.cli.demo import add_demo_parser, run_demo
from memwrite_local.cli.eval import add_eval_parser, run_eval
from memwrite_local.cli.expire import add_expire_parser, run_expire
from memwrite_local.cli.extract import add_extract_parser, run_extract
from memwrite_local.cli.ingest import add_ingest_parser, run_ingest
from memwrite_local.cli.keys import add_keys_parser, run_keys
from memwrite_local.cli.loadtest import add_loadtest_parser, run_loadtest
from memwrite_local.cli.portability import add_portability_parsers, run_export, run_import
from memwrite_local.cli.prefilter import add_prefilter_parser, run_prefilter
from memwrite_local.cli.rollback import add_rollback_parser, run_rollback
from memwrite_local.cli.search import add_search_parser, run_search
from memwrite_local.cli.serve import add_serve_parser, run_serve
from memwrite_local.cli.trace import add_trace_parsers, run_replay, run_trace
from memwrite_local.cli.usage import add_usage_parser, run_usage
from memwrite_local.runtime.embedded import BACKENDS

__all__ = ["main"]

_DESCRIPTION = (
    "`memwrite` command line: prefilter, extract, ingest, demo, serve, search, mcp, trace, "
    "replay, rollback, export, import, backfill, expire, eval, keys, loadtest."
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memwrite", description=_DESCRIPTION)
    commands = parser.add_subparsers(dest="command", required=True)
    add_prefilter_parser(commands)
    add_extract_parser(commands)
    demo = add_demo_parser(commands)
    ingest = add_ingest_parser(commands)
    add_search_parser(commands)
    serve = add_serve_parser(commands)
    for command in (demo, ingest, serve):
        command.add_argument(
            "--backend",
            choices=BACKENDS,
            default="sqlite",
            help="sqlite (embedded, the default) or moto (in-process AWS, state lost at exit)",
        )
    mcp = commands.add_parser(
        "mcp",
        help="memwrite as an MCP server (stdio; --http for streamable HTTP): "
        "remember, recall, forget, why",
        add_help=False,
    )
    mcp.add_argument("mcp_args", nargs=argparse.REMAINDER)
    add_trace_parsers(commands)
    add_usage_parser(commands)
    add_eval_parser(commands)
    add_rollback_parser(commands)
    add_portability_parsers(commands)
    add_backfill_parser(commands)
    add_expire_parser(commands)
    add_keys_parser(commands)
    add_loadtest_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["mcp"]:  # its own flags (--help included), and the MCP SDK only here
        from memwrite.mcp_server import main as run_mcp

        return run_mcp(arguments[1:])
    args = _parser().parse_args(arguments)
    try:
        if args.command == "prefilter":
            return run_prefilter(sys.stdin, sys.stdout, sys.stderr)
        if args.command == "extract":
            return run_extract(sys.stdin, sys.stdout, sys.stderr)
        if args.command == "ingest":
            return run_ingest(
                args.file,
                args.json,
                args.query,
                backend=args.backend,
                data_dir=args.data_dir,
                stdout=sys.stdout,
            )
        if args.command == "search":
            request = {"user_id": args.user, "query": args.query, "k": args.k}
            return run_search(args.url, args.api_key, request, as_json=args.json, stdout=sys.stdout)
        if args.command == "demo":
            return run_demo(args.conversation, args.backend, sys.stdout)
        if args.command == "eval":
            return run_eval(args, sys.stdout, sys.stderr)
        if args.command == "trace":
            return run_trace(args, sys.stdout)
        if args.command == "usage":
            return run_usage(args, sys.stdout)
        if args.command == "replay":
            return run_replay(args, sys.stdout)
        if args.command == "rollback":
            return run_rollback(args, sys.stdout)
        if args.command == "export":
            return run_export(args, sys.stdout)
        if args.command == "import":
            return run_import(args, sys.stdout)
        if args.command == "backfill":
            return run_backfill(args, sys.stdout)
        if args.command == "expire":
            return run_expire(args, sys.stdout)
        if args.command == "keys":
            return run_keys(args, sys.stdout)
        if args.command == "loadtest":
            return run_loadtest(args, sys.stdout, sys.stderr)
        return run_serve(args.port, args.backend, args.data_dir, sys.stdout)
    except (OSError, ValueError, MemwriteError) as exc:  # ValidationError and JSON errors too
        sys.stderr.write(f"memwrite: {exc}\n")
        return 2
