"""The TypeScript client (clients/typescript, npm package `memwrite`) and its AI SDK tools: its
own `node --test` suite against the live `memwrite serve` of this package, and its generated
types against functions/openapi.json. `npm ci` (from the committed lockfile) runs once, when
node_modules is missing or older than the lockfile."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.client.conftest import API_KEY
from tests.serve_process import REPO_ROOT, ServeProcess

PACKAGE = REPO_ROOT / "clients" / "typescript"
NPM_TIMEOUT_SECS = 300
# `make test`'s workers (pytest-xdist) may both need node_modules: one installs, under a lock,
# while the other waits (two `npm ci` into one directory break each other).
INSTALL_LOCK = Path(tempfile.gettempdir()) / "memwrite-typescript-npm-ci.lock"


def _npm(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail("npm is not installed: the TypeScript client needs Node.js >= 18 and npm")
    return subprocess.run(
        [npm, *args],
        cwd=PACKAGE,
        capture_output=True,
        text=True,
        timeout=NPM_TIMEOUT_SECS,
        env={**os.environ, **(env or {})},
        check=False,
    )


@pytest.fixture(scope="module")
def node_modules() -> Path:
    installed = PACKAGE / "node_modules" / ".package-lock.json"
    lockfile = PACKAGE / "package-lock.json"
    with INSTALL_LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not installed.exists() or installed.stat().st_mtime < lockfile.stat().st_mtime:
            done = _npm("ci", "--no-audit", "--no-fund")
            assert done.returncode == 0, done.stdout + done.stderr
    return PACKAGE / "node_modules"


def test_the_typescript_client_passes_its_tests_against_serve(
    serve: ServeProcess, node_modules: Path
) -> None:
    env = {"MEMWRITE_BASE_URL": serve.base_url, "MEMWRITE_API_KEY": API_KEY}
    done = _npm("test", env=env)
    assert done.returncode == 0, done.stdout[-20000:] + done.stderr[-5000:]
    assert "# fail 0" in done.stdout


def test_the_typescript_types_match_the_openapi_document(
    node_modules: Path, tmp_path: Path
) -> None:
    generated = tmp_path / "schema.d.ts"
    generator = node_modules / ".bin" / "openapi-typescript"
    done = subprocess.run(
        [str(generator), str(REPO_ROOT / "functions" / "openapi.json"), "-o", str(generated)],
        capture_output=True,
        text=True,
        timeout=NPM_TIMEOUT_SECS,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    committed = (PACKAGE / "src" / "schema.d.ts").read_text()
    assert generated.read_text() == committed, "stale: run `make openapi`"
