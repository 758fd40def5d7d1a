"""memwrite_local's four packages, checked: the CLI on top, the load test and the evaluation
under it (the load test replays the evaluation data), the runtime at the bottom; no import runs
back up.

The imports are read from the source (ast), so lazy imports inside functions count too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

LOCAL = Path(__file__).resolve().parents[2] / "memwrite_local"
PACKAGES = ("cli", "loadtest", "evaluation", "runtime")
# Which of memwrite_local's packages each one may import (itself aside).
MAY_IMPORT = {
    "cli": {"loadtest", "evaluation", "runtime"},
    "loadtest": {"evaluation", "runtime"},
    "evaluation": {"runtime"},
    "runtime": set(),
}


def local_packages_imported(path: Path) -> set[str]:
    """The memwrite_local packages `path` imports (`memwrite_local.runtime.runner` -> runtime)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "memwrite_local" and len(parts) > 1:
                found.add(parts[1])
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_a_package_imports_only_the_packages_below_it(package: str) -> None:
    # Given every module of the package
    modules = sorted((LOCAL / package).rglob("*.py"))
    assert modules
    # When the memwrite_local packages they import are collected
    offenders = {
        f"{path.relative_to(LOCAL)}: memwrite_local.{imported}"
        for path in modules
        for imported in local_packages_imported(path) - {package}
        if imported not in MAY_IMPORT[package]
    }
    # Then none is above it (the runtime never imports the CLI or the evaluation)
    assert offenders == set()


def test_every_module_sits_in_one_of_the_packages() -> None:
    # Given the modules at memwrite_local's top level
    top = {path.name for path in LOCAL.glob("*.py")}
    # When the package's own __init__ and the configuration page's generator are set aside
    # Then nothing else lies flat beside the packages
    assert top == {"__init__.py", "config_docs.py"}
    assert {path.name for path in LOCAL.iterdir() if (path / "__init__.py").is_file()} == set(
        PACKAGES
    )
