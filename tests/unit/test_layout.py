"""What docs/layout.md says about where things are, checked: its port-to-adapter table names
every port of `memwrite.ports` and `memwrite.model_ports` and, for each backend, a class that
exists where the table says and has every method of the port with the same parameters; and no
module outgrows 800 lines.

Read from the source (ast) and the classes (inspect): `typing.runtime_checkable` would only
check that the method names exist, not what they take.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
LIBRARY = REPO / "layers" / "core" / "memwrite"
LAYOUT = REPO / "docs" / "layout.md"
TABLE_HEADING = "## Port to adapter"
BACKENDS = ("AWS", "SQLite", "In memory")
# A class the table names: `path under layers/core/memwrite: ClassName`.
CLASS_REF = re.compile(r"`([\w/]+\.py): (\w+)`")
NO_ADAPTER = "—"

MAX_MODULE_LINES = 800
# Non-test code. Four test modules are longer (the port contracts, the rule and LLM extractors',
# the resolver's): a test module is a list of cases, not a unit to read top to bottom.
SIZED_TREES = ("layers", "functions", "infra", "memwrite_local")


@dataclass(frozen=True)
class Row:
    port: str
    cells: dict[str, str]  # backend -> cell text


PORT_MODULES = ("ports", "model_ports")


def port_names() -> list[str]:
    """Every Protocol class of the port modules, in source order."""
    return [
        node.name
        for module in PORT_MODULES
        for node in ast.parse((LIBRARY / f"{module}.py").read_text(encoding="utf-8")).body
        if isinstance(node, ast.ClassDef)
        and any(isinstance(base, ast.Name) and base.id == "Protocol" for base in node.bases)
    ]


def port_class(name: str) -> Any:
    """The Protocol class named `name`, from whichever port module holds it."""
    for module in PORT_MODULES:
        found = getattr(importlib.import_module(f"memwrite.{module}"), name, None)
        if found is not None:
            return found
    raise LookupError(name)


@cache
def table_rows() -> tuple[Row, ...]:
    """The rows of the table under TABLE_HEADING (up to the next heading)."""
    text = LAYOUT.read_text(encoding="utf-8")
    assert TABLE_HEADING in text, f"docs/layout.md has no '{TABLE_HEADING}' section"
    section = text.split(TABLE_HEADING, 1)[1].split("\n#", 1)[0]
    lines = [line.strip() for line in section.splitlines() if line.strip().startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert header == ["Port", *BACKENDS], header
    rows: list[Row] = []
    for line in lines[2:]:  # past the header and its --- line
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        assert len(cells) == len(header), f"{line!r}: {len(cells)} cells, not {len(header)}"
        port = re.fullmatch(r"`(\w+)`", cells[0])
        assert port is not None, f"{cells[0]!r}: a port in backticks"
        rows.append(Row(port.group(1), dict(zip(BACKENDS, cells[1:], strict=True))))
    return tuple(rows)


def named_class(path: str, name: str) -> type:
    """The class `name` defined (not merely imported) in the module at `path`."""
    file = LIBRARY / path
    assert file.is_file(), f"{path} does not exist (under layers/core/memwrite/)"
    tree = ast.parse(file.read_text(encoding="utf-8"))
    defined = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
    assert name in defined, f"{path} defines no class {name}"
    module = importlib.import_module("memwrite." + path.removesuffix(".py").replace("/", "."))
    found = getattr(module, name)
    assert isinstance(found, type)
    return found


def port_members(port: type) -> dict[str, Any]:
    """The port's methods and properties (its own and its base ports')."""
    members: dict[str, Any] = {}
    for klass in reversed(port.__mro__):
        if klass.__module__ != port.__module__:
            continue  # Protocol, Generic, object
        for name, value in vars(klass).items():
            if not name.startswith("_") and (
                inspect.isfunction(value) or isinstance(value, property)
            ):
                members[name] = value
    return members


def instance_attributes(cls: type) -> set[str]:
    """Names a class (or a base) annotates, or assigns as `self.<name>` in a method."""
    names: set[str] = set()
    for klass in cls.__mro__[:-1]:
        names.update(getattr(klass, "__annotations__", {}))
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        for node in ast.walk(ast.parse(source)):
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AnnAssign)
                else []
            )
            for target in targets:
                if (
                    isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "self"
                ):
                    names.add(target.attr)
    return names


def _call_signature(cls: type, name: str) -> inspect.Signature:
    """The signature a caller of `instance.name(...)` sees (no self)."""
    static = inspect.getattr_static(cls, name)
    function = getattr(cls, name)
    signature = inspect.signature(function)
    if isinstance(static, (staticmethod, classmethod)):
        return signature  # a static method has no self; getattr bound a classmethod's cls
    parameters = list(signature.parameters.values())[1:]
    return signature.replace(parameters=parameters)


def signature_problems(
    port_sig: inspect.Signature,
    impl_sig: inspect.Signature,
    implementers: Mapping[str, set[str]] = MappingProxyType({}),
) -> list[str]:
    """How `impl_sig` fails to accept every call `port_sig` allows, and to answer alike.

    Positional parameters keep their order and names (callers pass them either way), keyword-only
    ones their names; a parameter the port gives a default has one; anything the implementation
    adds has a default. Annotations read the same, but for a narrower return: fewer members of
    a union, or a class `implementers` lists for the port the port's method returns."""
    problems: list[str] = []
    wanted_return, have_return = port_sig.return_annotation, impl_sig.return_annotation
    if have_return != wanted_return:
        allowed = set(str(wanted_return).split(" | "))
        for part in list(allowed):
            allowed |= implementers.get(part, set())
        if not set(str(have_return).split(" | ")) <= allowed:
            problems.append(f"returns {have_return!r}, not {wanted_return!r}")
    kind = inspect.Parameter
    impl_params = dict(impl_sig.parameters)
    takes_any_keyword = any(p.kind is kind.VAR_KEYWORD for p in impl_params.values())
    takes_any_position = any(p.kind is kind.VAR_POSITIONAL for p in impl_params.values())
    impl_positional = [
        p
        for p in impl_params.values()
        if p.kind in (kind.POSITIONAL_ONLY, kind.POSITIONAL_OR_KEYWORD)
    ]
    port_positional = [
        p for p in port_sig.parameters.values() if p.kind is kind.POSITIONAL_OR_KEYWORD
    ]
    for index, wanted in enumerate(port_positional):
        if index >= len(impl_positional):
            if not takes_any_position:
                problems.append(f"takes no parameter {wanted.name!r} at position {index + 1}")
            continue
        have = impl_positional[index]
        if have.name != wanted.name or have.kind is kind.POSITIONAL_ONLY:
            problems.append(f"position {index + 1} is {have.name!r}, not {wanted.name!r}")
    for wanted in port_sig.parameters.values():
        have = impl_params.get(wanted.name)
        if wanted.kind is kind.KEYWORD_ONLY and have is None and not takes_any_keyword:
            problems.append(f"takes no keyword {wanted.name!r}")
        if wanted.kind in (kind.VAR_POSITIONAL, kind.VAR_KEYWORD) and (
            have is None or have.kind is not wanted.kind
        ):
            problems.append(f"takes no {wanted}")
        if have is None:
            continue
        if wanted.default is not kind.empty and have.default is kind.empty:
            problems.append(f"{wanted.name!r} has no default")
        if have.annotation != wanted.annotation:
            problems.append(f"{wanted.name!r} is {have.annotation!r}, not {wanted.annotation!r}")
    for extra in impl_params.values():
        if (
            extra.name not in port_sig.parameters
            and extra.kind not in (kind.VAR_POSITIONAL, kind.VAR_KEYWORD)
            and extra.default is kind.empty
        ):
            problems.append(f"requires {extra.name!r}, which the port does not pass")
    return problems


def conformance_problems(
    port: type, cls: type, implementers: Mapping[str, set[str]] = MappingProxyType({})
) -> list[str]:
    """Every way `cls` falls short of the port's methods and properties (`implementers`: port
    name -> the classes that implement it, which a method may return for the port)."""
    problems: list[str] = []
    attributes: set[str] | None = None
    for name, member in port_members(port).items():
        static = inspect.getattr_static(cls, name, None)
        if isinstance(member, property):
            if static is not None:
                continue  # a property or a class attribute
            attributes = instance_attributes(cls) if attributes is None else attributes
            if name not in attributes:
                problems.append(f"{name}: no property or attribute")
            continue
        if static is None or not callable(getattr(cls, name)):
            problems.append(f"{name}(): missing")
            continue
        port_signature = _call_signature(port, name)
        impl_signature = _call_signature(cls, name)
        for problem in signature_problems(port_signature, impl_signature, implementers):
            problems.append(f"{name}(): {problem}")
    return problems


def test_the_layout_table_has_one_row_per_port() -> None:
    ports = port_names()
    assert len(ports) > 20  # the parse found them
    named = [row.port for row in table_rows()]
    assert sorted(set(named)) == sorted(named), "a port has two rows"
    assert set(named) == set(ports), (
        f"ports without a row: {sorted(set(ports) - set(named))}; "
        f"rows of no port: {sorted(set(named) - set(ports))}"
    )


def test_every_backend_cell_names_a_class_or_says_there_is_none() -> None:
    for row in table_rows():
        for backend, cell in row.cells.items():
            refs = CLASS_REF.findall(cell)
            assert refs or cell.startswith(NO_ADAPTER), (
                f"{row.port} / {backend}: {cell!r} names no `path.py: Class` and is no dash"
            )
            assert not (refs and cell.startswith(NO_ADAPTER)), f"{row.port} / {backend}: both"


def _table_classes() -> list[Any]:
    return [
        pytest.param(row.port, backend, path, name, id=f"{row.port}-{backend}-{name}")
        for row in table_rows()
        for backend, cell in row.cells.items()
        for path, name in CLASS_REF.findall(cell)
    ]


@pytest.mark.parametrize(("port", "backend", "path", "name"), _table_classes())
def test_each_class_the_table_names_exists_there_and_implements_its_port(
    port: str, backend: str, path: str, name: str
) -> None:
    implementers: dict[str, set[str]] = {}
    for row in table_rows():
        for cell in row.cells.values():
            implementers.setdefault(row.port, set()).update(n for _, n in CLASS_REF.findall(cell))
    cls = named_class(path, name)
    problems = conformance_problems(port_class(port), cls, implementers)
    assert not problems, f"{path}: {name} is no {port} ({backend}):\n" + "\n".join(problems)


# The checker itself: it must see what mypy would refuse.


class _Port:
    def get(self, tenant: str, ids: list[str], *, limit: int = 10) -> int: ...

    @property
    def size(self) -> int: ...


class _Good:
    def __init__(self) -> None:
        self.size = 3

    def get(self, tenant: str, ids: list[str], *, limit: int = 10, trace: bool = False) -> int:
        return limit


class _Renamed:
    size = 1

    def get(self, tenant: str, keys: list[str], *, limit: int = 10) -> int:
        return limit


class _NoDefault:
    size = 1

    def get(self, tenant: str, ids: list[str], *, limit: int) -> int:
        return limit


class _Retyped:
    size = 1

    def get(self, tenant: str, ids: set[str], *, limit: int = 10) -> int:
        return limit


class _Extra:
    size = 1

    def get(self, tenant: str, ids: list[str], user: str, *, limit: int = 10) -> int:
        return limit


class _Missing:
    def fetch(self) -> int:
        return 0


class _Widened:
    size = 1

    def get(self, tenant: str, ids: list[str], *, limit: int = 10) -> int | None:
        return limit


@pytest.mark.parametrize(
    ("cls", "complaint"),
    [
        (_Renamed, "position 2 is 'keys'"),
        (_NoDefault, "'limit' has no default"),
        (_Retyped, "'ids' is 'set[str]'"),
        (_Extra, "requires 'user'"),
        (_Missing, "get(): missing"),
        (_Missing, "size: no property or attribute"),
        (_Widened, "returns 'int | None'"),
    ],
)
def test_the_checker_refuses_a_class_that_does_not_fit(cls: type, complaint: str) -> None:
    problems = conformance_problems(_Port, cls)
    assert any(complaint in problem for problem in problems), problems


def test_the_checker_accepts_an_attribute_for_a_property_and_extra_defaulted_keywords() -> None:
    assert conformance_problems(_Port, _Good) == []


def test_no_module_of_the_non_test_code_is_over_800_lines() -> None:
    sizes = {
        path.relative_to(REPO): len(path.read_text(encoding="utf-8").splitlines())
        for tree in SIZED_TREES
        for path in (REPO / tree).rglob("*.py")
    }
    assert len(sizes) > 100  # the trees were found
    over = {str(path): lines for path, lines in sizes.items() if lines > MAX_MODULE_LINES}
    assert not over, f"over {MAX_MODULE_LINES} lines, split along a seam: {over}"
