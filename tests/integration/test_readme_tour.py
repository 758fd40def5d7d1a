"""The README's five-minute tour, run as a new user runs it: offline, from the repository root.

Every `sh` block of the tour is run by bash as written, with three substitutions only: the
`memwrite` command is this interpreter's (`-m memwrite_local.cli`), the data directory a fresh
one, and the server's port a free one. Each `#` line of a block is what the block must print:
`…` stands for anything, ids (hex runs with a digit) and decimals (timings) for any such value.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
README = REPO_ROOT / "README.md"
TIMEOUT_SECS = 120
_BLOCK_RE = re.compile(r"```sh\n(.*?)```", re.DOTALL)
# An id (a hex run with a digit) or a decimal (a timing): any such value matches.
_VARIABLE_RE = re.compile(
    r"(?P<id>(?<![\w-])(?=[0-9a-f]*\d)[0-9a-f]{4,}(?![\w-]))|(?P<decimal>(?<![\w.])\d+\.\d+)"
)
_MARK = "@@readme-block@@"


GETTING_STARTED = REPO_ROOT / "docs" / "getting-started.md"


def _tour_blocks(path: Path = README) -> list[str]:
    text = path.read_text(encoding="utf-8")
    tour = text[text.index("## A five-minute tour") :]
    return _BLOCK_RE.findall(tour[: tour.index("\n## ", 1)])


def test_the_getting_started_guide_gives_the_same_tour() -> None:
    # Given the tour in the README and in the getting started guide
    # When / Then their commands and what they print are the same
    assert _tour_blocks(GETTING_STARTED) == _tour_blocks()


def _expected(block: str) -> list[str]:
    return [line[1:].strip() for line in block.splitlines() if line.startswith("#")]


def _pattern(expected: str) -> re.Pattern[str]:
    """A `#` line as a pattern: `…` any text, ids and decimals any such value, spaces any run."""
    parts = []
    for piece in re.split(r"(…|\s+)", expected):
        if piece == "…":
            parts.append(".*?")
        elif piece and piece.isspace():
            parts.append(r"\s+")
        else:
            cursor = 0
            for m in _VARIABLE_RE.finditer(piece):
                parts.append(re.escape(piece[cursor : m.start()]))
                parts.append("[0-9a-f]+" if m.group("id") else r"[0-9.]+")
                cursor = m.end()
            parts.append(re.escape(piece[cursor:]))
    return re.compile("".join(parts))


def _commands(block: str, data_dir: Path) -> str:
    memwrite = f"{sys.executable} -m memwrite_local.cli"
    return (
        block.replace(".venv/bin/memwrite", memwrite)
        .replace("--data-dir .memwrite", f"--data-dir {data_dir}")
        .replace("API=http://127.0.0.1:8080", "API=$TOUR_API")
    )


def _offline_env(**extra: str) -> dict[str, str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("MEMWRITE_") and name != "ANTHROPIC_API_KEY"
    }
    return {**env, **extra}


def _assert_prints(block: str, output: str) -> None:
    missing = [line for line in _expected(block) if not _pattern(line).search(output)]
    assert missing == [], f"the README says these, the command printed:\n{output}"


def test_the_readme_tour_runs_offline_and_prints_what_it_says(tmp_path: Path) -> None:
    # Given the README's tour: ingest, serve, turns and searches, trace, replay, rollback
    ingest, serve, *rest = _tour_blocks()
    data_dir = tmp_path / ".memwrite"

    # When the ingest block runs / Then it prints the funnel, memory and episode it shows
    ran = subprocess.run(
        ["bash", "-ec", _commands(ingest, data_dir)],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env=_offline_env(),
        timeout=TIMEOUT_SECS,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    _assert_prints(ingest, ran.stdout)

    # When the serve block starts the API (on a free port)
    command = _commands(serve, data_dir).splitlines()[0].replace("--port 8080", "--port 0")
    server = subprocess.Popen(
        ["bash", "-c", f"exec {command}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=REPO_ROOT,
        env=_offline_env(),
    )
    try:
        assert server.stdout is not None
        banner = server.stdout.readline()
        _assert_prints(serve, banner)
        port = re.search(r"http://127\.0\.0\.1:(\d+)", banner)
        assert port is not None, banner

        # And the other blocks run in one shell, in order (TRACE carries from one to the next)
        script = "\n".join(f"echo {_MARK}\n{_commands(block, data_dir)}" for block in rest)
        ran = subprocess.run(
            ["bash", "-ec", script],
            capture_output=True,
            text=True,
            cwd=REPO_ROOT,
            env=_offline_env(TOUR_API=f"http://127.0.0.1:{port.group(1)}"),
            timeout=TIMEOUT_SECS,
            check=False,
        )
    finally:
        server.terminate()
        server.wait(timeout=TIMEOUT_SECS)

    # Then each block prints what the README shows under it: Berlin supersedes Paris, the
    # trace says so, the replay drops the move, the rollback brings Paris back
    assert ran.returncode == 0, ran.stderr
    outputs = ran.stdout.split(f"{_MARK}\n")[1:]
    assert len(outputs) == len(rest)
    for block, output in zip(rest, outputs, strict=True):
        _assert_prints(block, output)
