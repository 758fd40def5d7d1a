"""Export lines, parsed back: what `parse_import` accepts and how it names a fault (the
handlers' and both stores' behaviour is in tests/integration/test_export_import.py)."""

from __future__ import annotations

import json

import pytest

from memwrite.errors import ImportRejected
from memwrite.portability import parse_import

HEADER = {"kind": "header", "format": "memwrite.export.v1", "tenant": "acme", "user_id": "dana"}


def _entity(name: str) -> dict[str, object]:
    return {
        "kind": "entity",
        "version": 1,
        "entity": {
            "entity_id": "e1",
            "tenant": "acme",
            "user_id": "dana",
            "name": name,
            "kind": "person",
            "aliases": [],
            "created_at": "2025-01-01T00:00:00Z",
            "last_seen": "2025-01-01T00:00:00Z",
        },
    }


def _text(*records: dict[str, object]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def test_a_line_separator_inside_a_value_does_not_split_the_line() -> None:
    # Given a name holding U+2028 (JSON allows it unescaped; str.splitlines splits there)
    parsed = parse_import("acme", "dana", _text(HEADER, _entity("Pri\u2028ya")))
    # Then it is one entity
    assert parsed.entities["e1"][1].entity.name == "Pri\u2028ya"


def test_a_version_of_zero_names_its_line_and_field() -> None:
    bad = _entity("Priya") | {"version": 0}
    with pytest.raises(ImportRejected) as refused:
        parse_import("acme", "dana", _text(HEADER, bad))
    assert (refused.value.line, refused.value.field) == (2, "version")
