"""What the code cites is in the repository, and says what it cites.

Docstrings and comments (read with ast and tokenize: strings in code are data, not citations) of
the library, the handlers, the CDK app, the local tooling and the tests are checked for:

- files: a file they name (`docs/design.md`, `adapters/sqlite/rollback.py`, `README.md`)
  exists in the repository, as a path from its root or the tail of one, and so does a folder
  or module under one of its top folders (`functions/dispatch`);
- sections: every section sign cites `docs/design.md` with the number of one of its sections;
- modules: a dotted name (`memwrite.ports.MemoryIndex`, `memwrite_local.config_docs`) is a
  module of the repository, followed only by names that module (or its class) defines.
"""

from __future__ import annotations

import ast
import io
import os
import re
import tokenize
from collections.abc import Iterator
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LIBRARY_ROOT = REPO / "layers" / "core"
DESIGN = REPO / "docs" / "design.md"
SCANNED = ("layers/core/memwrite", "functions", "infra", "memwrite_local", "tests")
# Folders that are not the repository's sources (environments, caches, build output).
_SKIPPED_DIRS = {".git", ".venv", "node_modules", "cdk.out", "site", "__pycache__"}
_SKIPPED_DIR_PREFIXES = (".mypy_cache", ".ruff_cache", ".hypothesis", ".pytest_cache")

# Files a module may name that are not in the repository by nature, and why.
NOT_IN_THE_REPOSITORY = {
    "confusables.txt": "Unicode's confusables data, which the look-alike table is taken from",
    "conversations.jsonl": "a file of a dataset under ../shared/data, read by the evaluation",
    "ground_truth.json": "a file of a dataset under ../shared/data, read by the evaluation",
    "run.json": "the file a recorded run writes into its directory",
    "OUT.jsonl": "the output file a benchmark is told to write",
    "results.json": "benchmark output, written by `make bench`",
    "loadtest.json": "the load runs' reports, written by `make loadtest`",
}

_EXTENSIONS = "md|py|json|jsonl|toml|ya?ml|ts|sh|txt|cfg|ini"
# A file name, with or without folders; placeholders (`<env>.json`, `*.py`) are not files.
_FILE = re.compile(
    rf"(?<![\w./<>{{}}*$-])((?:[\w.<>{{}}*-]+/)*[\w<>{{}}*-]+\.(?:{_EXTENSIONS}))(?![\w/])"
)
_PLACEHOLDER = re.compile(r"[<>{}*]")
# A path into the repository's own top folders, file or folder (`functions/dispatch`).
_REPO_PATH = re.compile(
    r"(?<![\w./<-])((?:layers|functions|infra|memwrite_local|tests|docs|events)/[\w./-]*\w)"
)
_SECTION_CITATION = re.compile(r"docs/design\.md §(\d+)\b")
_DOTTED = re.compile(r"(?<![\w.])((?:memwrite|memwrite_local|functions|infra)(?:\.\w+)+)")


def _walk(top: Path) -> Iterator[Path]:
    for folder, dirs, files in os.walk(top):
        dirs[:] = [
            d for d in dirs if d not in _SKIPPED_DIRS and not d.startswith(_SKIPPED_DIR_PREFIXES)
        ]
        for name in files:
            yield Path(folder, name)


@cache
def repository_files() -> frozenset[str]:
    return frozenset(path.relative_to(REPO).as_posix() for path in _walk(REPO))


@cache
def file_names() -> frozenset[str]:
    return frozenset(path.rsplit("/", 1)[-1] for path in repository_files())


def scanned_modules() -> list[Path]:
    return sorted(path for top in SCANNED for path in _walk(REPO / top) if path.suffix == ".py")


def prose(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of every docstring and comment of a module."""
    source = path.read_text(encoding="utf-8")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            docstring = ast.get_docstring(node, clean=False)
            if docstring is not None:
                yield node.body[0].lineno, docstring
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string


def is_in_repository(cited: str) -> bool:
    if "/" not in cited:
        return cited in file_names()
    tail = cited.removeprefix("./")
    return any(path == tail or path.endswith("/" + tail) for path in repository_files())


def design_sections() -> set[int]:
    return {int(n) for n in re.findall(r"^## (\d+)\. ", DESIGN.read_text(encoding="utf-8"), re.M)}


def _module_file(parts: list[str]) -> Path | None:
    base = (LIBRARY_ROOT if parts[0] == "memwrite" else REPO).joinpath(*parts)
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    return None


@cache
def _parsed(module: Path) -> ast.Module:
    return ast.parse(module.read_text(encoding="utf-8"))


def _defined(body: list[ast.stmt]) -> dict[str, ast.stmt]:
    """Names a module or class body binds, by the statement that binds them."""
    names: dict[str, ast.stmt] = {}
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names[node.name] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        names[name.id] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                names[(alias.asname or alias.name).split(".")[0]] = node
        elif isinstance(node, ast.If | ast.Try):  # TYPE_CHECKING imports, fallbacks
            names.update(_defined(node.body))
    return names


def resolves(dotted: str) -> bool:
    """A module, then names it defines: `memwrite.ports.MemoryIndex.upsert`."""
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        module = _module_file(parts[:split])
        if module is not None:
            break
    else:
        return False
    body = _parsed(module).body
    for name in parts[split:]:
        node = _defined(body).get(name)
        if node is None:
            return False
        if not isinstance(node, ast.ClassDef):
            return True  # an attribute of a value: beyond what the source says
        body = node.body
    return True


@cache
def cited_prose() -> tuple[tuple[str, int, str], ...]:
    """(module, line, text) of every scanned module's docstrings and comments, read once."""
    return tuple(
        (path.relative_to(REPO).as_posix(), line, text)
        for path in scanned_modules()
        for line, text in prose(path)
    )


def test_the_design_has_numbered_sections_in_order() -> None:
    numbers = [int(n) for n in re.findall(r"^## (\d+)\. ", DESIGN.read_text(), re.M)]
    assert numbers == list(range(1, len(numbers) + 1))


def test_every_file_a_module_names_is_in_the_repository() -> None:
    missing = [
        f"{where}:{line}: {cited}"
        for where, line, text in cited_prose()
        for cited in _FILE.findall(text)
        if not _PLACEHOLDER.search(cited)
        and cited.rsplit("/", 1)[-1] not in NOT_IN_THE_REPOSITORY
        and not is_in_repository(cited)
    ]
    assert missing == []


def test_every_folder_or_module_path_a_module_names_is_in_the_repository() -> None:
    missing = [
        f"{where}:{line}: {cited}"
        for where, line, text in cited_prose()
        for cited in _REPO_PATH.findall(text)
        if cited.rsplit("/", 1)[-1] not in NOT_IN_THE_REPOSITORY
        and not (REPO / cited).exists()
        and not (REPO / f"{cited}.py").is_file()  # a module named without its suffix
    ]
    assert missing == []


def test_every_section_cited_is_a_section_of_the_design() -> None:
    sections = design_sections()
    wrong: list[str] = []
    for where, line, text in cited_prose():
        cited = [int(n) for n in _SECTION_CITATION.findall(text)]
        if text.count("§") != len(cited):
            wrong.append(f"{where}:{line}: a section sign that does not cite docs/design.md")
        wrong += [f"{where}:{line}: §{n}" for n in cited if n not in sections]
    assert wrong == []


def test_every_module_a_module_names_exists_with_the_names_after_it() -> None:
    unknown = [
        f"{where}:{line}: {dotted}"
        for where, line, text in cited_prose()
        for dotted in _DOTTED.findall(text)
        if not resolves(dotted)
    ]
    assert unknown == []


def test_the_checks_catch_what_they_are_for() -> None:
    assert not is_in_repository("DESIGN.md")
    assert not is_in_repository("AWS_NOTES.md")
    assert is_in_repository("docs/design.md")
    assert is_in_repository("adapters/sqlite/rollback.py")
    assert _FILE.findall("see DESIGN.md section 2 and infra/settings/<env>.json") == [
        "DESIGN.md",
        "infra/settings/<env>.json",
    ]
    assert _REPO_PATH.findall("`functions/query/`, functions/<stage>/handler.py") == [
        "functions/query"
    ]
    assert resolves("memwrite.ports.MemoryIndex")
    assert resolves("memwrite.config.settings.PipelineConfig.pre_filter")
    assert not resolves("memwrite.adapters.embedded_index")
    assert not resolves("memwrite.config.settings.PipelineConfig.prefilter")
    assert 1 in design_sections()
