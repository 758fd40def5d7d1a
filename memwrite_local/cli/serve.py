"""The `memwrite serve` command: the HTTP API on 127.0.0.1 until SIGTERM or Ctrl-C.

The server and its queue worker are `memwrite_local.runtime.server`; state persists in
`--data-dir` (the embedded SQLite default) or, with `--backend moto`, is lost at exit.
"""

from __future__ import annotations

import argparse
import signal
from pathlib import Path
from typing import Any, TextIO

from memwrite.config.settings import load_settings
from memwrite.guards.egress import LOOPBACK_FLAG
from memwrite_local.runtime.backend import LOCAL_API_KEY
from memwrite_local.runtime.embedded import DEFAULT_DATA_DIR

__all__ = ["add_serve_parser", "run_serve"]


def add_serve_parser(commands: Any) -> argparse.ArgumentParser:
    """Register `serve` on the CLI's subparsers."""
    parser: argparse.ArgumentParser = commands.add_parser("serve", help="the HTTP API on 127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=DEFAULT_DATA_DIR,
        help=f"where state persists across restarts (default: {DEFAULT_DATA_DIR}/)",
    )
    return parser


def _stop_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(0)  # unwinds serve_forever: the worker finishes its batch, state is kept


def run_serve(port: int, backend: str, data_dir: Path, stdout: TextIO) -> int:
    from memwrite_local.runtime.embedded import local_backend
    from memwrite_local.runtime.runner import LocalRunner
    from memwrite_local.runtime.server import make_server

    limits = load_settings().pipeline.ingest
    # Development: webhooks may reach this machine's loopback (never on AWS:
    # memwrite.guards.egress).
    with local_backend(backend, data_dir, {LOOPBACK_FLAG: "true"}) as local:
        server = make_server(
            LocalRunner(),
            port,
            max_body_bytes=limits.max_body_bytes,
            max_import_bytes=limits.max_import_bytes,
            serialize_pipeline=backend == "moto",
        )
        host, bound = str(server.server_address[0]), int(server.server_address[1])
        keys = LOCAL_API_KEY if local.uses_default_api_key else "a configured key"
        stdout.write(
            f"memwrite API on http://{host}:{bound} (x-api-key: {keys}; {local.description})\n"
        )
        stdout.flush()
        signal.signal(signal.SIGTERM, _stop_on_sigterm)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
    return 0
