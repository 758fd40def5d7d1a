"""`memwrite serve` as a user starts it: a subprocess from the repository root, on its own data
directory, stopped (SIGTERM, as Ctrl-C or a service manager would) when the block ends."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
STOP_TIMEOUT_SECS = 60


@dataclass(frozen=True)
class ServeProcess:
    pid: int
    port: int
    banner: str
    process: subprocess.Popen[str] = field(repr=False, compare=False)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def terminate(self, timeout: float = STOP_TIMEOUT_SECS) -> float:
        """SIGTERM, as a service manager sends it; the seconds until the process exited."""
        started = time.monotonic()
        self.process.terminate()
        self.process.wait(timeout=timeout)
        return time.monotonic() - started


@contextmanager
def running_serve(data_dir: Path, env: dict[str, str] | None = None) -> Iterator[ServeProcess]:
    """`env` adds variables to the caller's environment without its `MEMWRITE_*` ones."""
    clean = {name: value for name, value in os.environ.items() if not name.startswith("MEMWRITE_")}
    command = ["serve", "--port", "0", "--data-dir", str(data_dir)]
    server = subprocess.Popen(
        [sys.executable, "-m", "memwrite_local.cli", *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=REPO_ROOT,
        env={**clean, **(env or {})},
    )
    try:
        assert server.stdout is not None
        banner = server.stdout.readline()
        port = re.search(r"http://127\.0\.0\.1:(\d+)", banner)
        assert port is not None, banner
        yield ServeProcess(server.pid, int(port.group(1)), banner, server)
    finally:
        server.terminate()  # nothing if the block stopped it already
        server.wait(timeout=STOP_TIMEOUT_SECS)
