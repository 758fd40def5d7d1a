"""Export lines, parsed back: what `parse_import` accepts and how it names a fault (the
handlers' and both stores' behaviour is in tests/integration/test_export_import.py)."""

from __future__ import annotations

import io
import json

import pytest

from memwrite.config.settings import PipelineConfig
from memwrite.errors import ImportRejected
from memwrite.portability import ImportGuards, parse_import, read_lines

GUARDS = ImportGuards.of(PipelineConfig())

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
    parsed = parse_import("acme", "dana", _text(HEADER, _entity("Pri\u2028ya")), GUARDS)
    # Then it is one entity
    assert parsed.entities["e1"][1].entity.name == "Pri\u2028ya"


def test_a_version_of_zero_names_its_line_and_field() -> None:
    bad = _entity("Priya") | {"version": 0}
    with pytest.raises(ImportRejected) as refused:
        parse_import("acme", "dana", _text(HEADER, bad), GUARDS)
    assert (refused.value.line, refused.value.field) == (2, "version")


def test_a_secret_in_an_entity_name_refuses_its_line_naming_the_kind() -> None:
    # Given an entity whose alias holds a card number (Luhn-valid)
    bad = _entity("Priya")
    bad["entity"]["aliases"] = ["card 4111 1111 1111 1111"]  # type: ignore[index]
    # When it is parsed
    with pytest.raises(ImportRejected) as refused:
        parse_import("acme", "dana", _text(HEADER, bad), GUARDS)
    # Then line 2 is refused, naming the field and the kind
    assert (refused.value.line, refused.value.field) == (2, "entity.aliases[0]")
    assert "card_number" in refused.value.message


def test_a_line_over_the_limit_is_refused_once_the_limit_is_read() -> None:
    # Given a stream whose second line is one byte over the limit, and much more after it
    class Counting(io.BytesIO):
        read_bytes = 0

        def readline(self, size: int | None = -1) -> bytes:
            line = super().readline(size)
            Counting.read_bytes += len(line)
            return line

    stream = Counting(b'{"kind": "header"}\n' + b"x" * 2_000 + b"\n" + b"y" * 100_000)
    # When its lines are read with a limit of 1,999 bytes
    lines = read_lines(stream, 1_999)
    assert next(lines) == '{"kind": "header"}'
    with pytest.raises(ImportRejected) as refused:
        next(lines)
    # Then line 2 is refused having read no more than the limit (plus one byte) of it
    assert (refused.value.line, refused.value.field) == (2, "line")
    assert Counting.read_bytes <= len('{"kind": "header"}\n') + 2_000
