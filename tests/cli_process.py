"""The `memwrite` command run as a user runs it: a subprocess from the repository root, with
no `MEMWRITE_*` settings and no `ANTHROPIC_API_KEY` of the caller's environment (offline)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_SECS = 180  # a hang guard, not a timing: a busy machine is slow


def run_memwrite(
    *args: str, stdin: str = "", timeout: float = TIMEOUT_SECS
) -> subprocess.CompletedProcess[str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("MEMWRITE_") and name != "ANTHROPIC_API_KEY"
    }
    return subprocess.run(
        [sys.executable, "-m", "memwrite_local.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env=env,
        timeout=timeout,
        check=False,
    )
