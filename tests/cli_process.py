"""The `memwrite` command run as a user runs it: a subprocess from the repository root, with
no `MEMWRITE_*` settings and no `ANTHROPIC_API_KEY` of the caller's environment (offline).

`run_memwrite_in_process` runs the same command line in the test's own process, in the same
conditions (environment, working directory, stdin; exit status, stdout and stderr as text):
no interpreter to start and no imports to pay (seconds for each command). Where the command
line itself is the subject, a test runs it as a subprocess at least once."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path
from unittest import mock

REPO_ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_SECS = 180  # a hang guard, not a timing: a busy machine is slow


def _offline_environ() -> dict[str, str]:
    return {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("MEMWRITE_") and name != "ANTHROPIC_API_KEY"
    }


def run_memwrite(
    *args: str, stdin: str = "", timeout: float = TIMEOUT_SECS
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memwrite_local.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env=_offline_environ(),
        timeout=timeout,
        check=False,
    )


def run_memwrite_in_process(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    from memwrite_local.cli import main  # the whole command line: only for the tests using it

    stdout, stderr = io.StringIO(), io.StringIO()
    piped = io.TextIOWrapper(io.BytesIO(stdin.encode("utf-8")), encoding="utf-8")
    with (
        mock.patch.dict(os.environ, _offline_environ(), clear=True),
        contextlib.chdir(REPO_ROOT),
        mock.patch.object(sys, "stdin", piped),
        contextlib.redirect_stdout(stdout),
        contextlib.redirect_stderr(stderr),
    ):
        try:
            returncode = main(list(args))
        except SystemExit as exited:  # argparse's usage errors, as `sys.exit` would end them
            if exited.code is None or isinstance(exited.code, int):
                returncode = exited.code or 0
            else:
                stderr.write(f"{exited.code}\n")
                returncode = 1
    return subprocess.CompletedProcess(
        ["memwrite", *args], returncode, stdout.getvalue(), stderr.getvalue()
    )
