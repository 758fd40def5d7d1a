"""Export and import of one user (`GET /v1/users/{user_id}/export`, `POST .../import`,
`memwrite export` / `memwrite import`).

Export writes JSON lines (`records.ExportLine`): a header, then the user's entities, their
entity_facts rows, their memories and their episodes (kept turns), each kind sorted by id,
every line's JSON with sorted keys: the same store exports the same bytes. Import takes exactly
that and restores it with the same ids, revs and versions, so export -> erase -> import gives
back the same store, and a repeated import changes nothing.

Import in three steps, nothing written until the first two pass:

1. parse: every line is checked (its size, JSON, its kind's model, the API's guards: the
   secrets firewall and the fields' bounds, `memwrite.portability.guards`; the tenant and user
   of the request, no id twice, every `superseded_by`, link and entity_facts observation
   naming a memory of the file, every row's key the one its memories observe); the first
   fault is an `ImportRejected` naming the line and the field;
2. compare with the store: an item already there and equal is left alone (that is what makes a
   repeat a no-op); already there and different is an `ImportConflict`;
3. write the rest in units, each one transaction (`UserPortability.restore`): the entities
   (up to `_ENTITIES_PER_UNIT` at a time), then per entity_facts row the row with every memory
   observing it (one supersession chain), then the other memories (events, tasks). A chain
   longer than one DynamoDB transaction holds (`MAX_UNIT_ITEMS`) is written in several, the
   row last, so the row never names a memory that is not there yet; then the episodes, each
   with its outbox row (`MAX_UNIT_ITEMS` / 2 at a time). What is atomic is the unit;
   a failure between units leaves whole units written, and a repeat completes the rest.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from memwrite.claims.entities import VersionedEntity
from memwrite.errors import ImportConflict, ImportRejected, WriteConflict
from memwrite.portability.format import (
    EXPORT_FORMAT,
    EntityFactLine,
    EntityLine,
    EpisodeLine,
    ExportLine,
    HeaderLine,
    MemoryLine,
)
from memwrite.records.entity_facts import memory_fact_key
from memwrite.records.episode import Episode
from memwrite.records.user_snapshot import RestoreUnit, StoredFactRow, StoredMemory

if TYPE_CHECKING:
    from memwrite.portability.guards import ImportGuards
    from memwrite.ports import UserPortability

__all__ = [
    "MAX_UNIT_ITEMS",
    "ImportReport",
    "ParsedImport",
    "export_lines",
    "import_user",
    "parse_import",
]

MAX_UNIT_ITEMS = 90  # DynamoDB's TransactWriteItems takes 100; the rest is headroom
_ENTITIES_PER_UNIT = 25
_LINE = TypeAdapter[ExportLine](ExportLine)


def _dumps(payload: dict[str, Any]) -> str:
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"


def _line(model: BaseModel) -> str:
    return _dumps(model.model_dump(mode="json"))


def export_lines(tenant: str, user_id: str, store: UserPortability) -> Iterator[str]:
    """The user's export, line by line (each ending in a newline), from one read of the store."""
    snapshot = store.snapshot(tenant, user_id)
    yield _line(HeaderLine(kind="header", format=EXPORT_FORMAT, tenant=tenant, user_id=user_id))
    for versioned in sorted(snapshot.entities, key=lambda v: v.entity.entity_id):
        yield _line(EntityLine(kind="entity", version=versioned.version, entity=versioned.entity))
    for row in sorted(snapshot.fact_rows, key=lambda r: r.key):
        yield _line(
            EntityFactLine(kind="entity_fact", key=row.key, version=row.version, facts=row.facts)
        )
    for stored in sorted(snapshot.memories, key=lambda m: m.memory.memory_id):
        memory = stored.memory.model_copy(update={"access_count": 0, "last_accessed": None})
        yield _line(
            MemoryLine(
                kind="memory",
                rev=stored.rev,
                access_count=stored.access_count,
                last_accessed=stored.last_accessed,
                memory=memory,
            )
        )
    for episode in sorted(snapshot.episodes, key=lambda e: e.turn_id):
        yield _line(EpisodeLine(kind="episode", episode=episode))


@dataclass
class ParsedImport:
    """The lines of a valid import, by kind, each with its line number."""

    entities: dict[str, tuple[int, VersionedEntity]] = field(default_factory=dict)
    fact_rows: dict[str, tuple[int, StoredFactRow]] = field(default_factory=dict)
    memories: dict[str, tuple[int, StoredMemory]] = field(default_factory=dict)
    episodes: dict[str, tuple[int, Episode]] = field(default_factory=dict)


def _field_of(error: ValidationError) -> tuple[str, str]:
    first = error.errors()[0]
    # The discriminated union adds the kind as the first step of the path: not a field.
    loc = [str(part) for part in first.get("loc", ())]
    if loc and loc[0] in {"header", "entity", "entity_fact", "memory", "episode"} and len(loc) > 1:
        loc = loc[1:]
    path = ""
    for part in loc:
        path += f"[{part}]" if part.isdigit() else (f".{part}" if path else part)
    return path or "kind", str(first.get("msg", "invalid"))


def _parse_line(number: int, text: str) -> ExportLine:
    try:
        raw = json.loads(text)
    except (json.JSONDecodeError, RecursionError, ValueError) as exc:
        raise ImportRejected(number, "line", f"not JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise ImportRejected(number, "line", "not a JSON object")
    try:
        return _LINE.validate_python(raw)
    except ValidationError as exc:
        where, message = _field_of(exc)
        raise ImportRejected(number, where, message) from None


def _check_owner(number: int, prefix: str, tenant: str, user_id: str, item: Any) -> None:
    if item.tenant != tenant:
        raise ImportRejected(number, f"{prefix}.tenant", "not the tenant of the credential")
    if item.user_id != user_id:
        raise ImportRejected(number, f"{prefix}.user_id", f"not the user {user_id} of the path")


def parse_import(
    tenant: str, user_id: str, text: str | Iterable[str], guards: ImportGuards
) -> ParsedImport:
    """The lines of an import (a text, or its lines one by one), checked one by one, by the
    API's `guards`, and against each other; raise `ImportRejected` (line, field) at the first
    fault."""
    parsed = ParsedImport()
    # Lines end at "\n" only: `str.splitlines` would also split at U+2028 and the like, which
    # a line's JSON holds unescaped (the export writes `ensure_ascii=False`).
    lines = text.split("\n") if isinstance(text, str) else text
    numbered = ((n, line) for n, line in enumerate(lines, start=1) if line.strip())
    position = -1
    for position, (number, line) in enumerate(numbered):
        guards.check_size(number, line)
        record = _parse_line(number, line)
        guards.check(number, record)
        if isinstance(record, HeaderLine):
            if position != 0:
                raise ImportRejected(number, "kind", "a header only as the first line")
            _check_owner(number, "header", tenant, user_id, record)
        elif position == 0:
            raise ImportRejected(number, "kind", "the first line is the export's header")
        elif isinstance(record, EntityLine):
            _check_owner(number, "entity", tenant, user_id, record.entity)
            _unique(parsed.entities, record.entity.entity_id, number, "entity.entity_id")
            parsed.entities[record.entity.entity_id] = (
                number,
                VersionedEntity(record.entity, record.version),
            )
        elif isinstance(record, EntityFactLine):
            _unique(parsed.fact_rows, record.key, number, "key")
            parsed.fact_rows[record.key] = (
                number,
                StoredFactRow(record.key, dict(record.facts), record.version),
            )
        elif isinstance(record, EpisodeLine):
            episode = record.episode
            _check_owner(number, "episode.turn", tenant, user_id, episode.turn)
            _unique(parsed.episodes, episode.turn_id, number, "episode.turn.turn_id")
            parsed.episodes[episode.turn_id] = (number, episode)
        else:
            memory = record.memory
            _check_owner(number, "memory", tenant, user_id, memory)
            _unique(parsed.memories, memory.memory_id, number, "memory.memory_id")
            stored = StoredMemory(
                memory.model_copy(update={"access_count": 0, "last_accessed": None}),
                record.rev,
                record.access_count,
                record.last_accessed,
            )
            parsed.memories[memory.memory_id] = (number, stored)
    if position < 0:
        raise ImportRejected(1, "line", "empty: an import starts with the export's header line")
    _check_references(parsed)
    return parsed


def _unique(seen: dict[str, Any], item_id: str, number: int, where: str) -> None:
    if item_id in seen:
        raise ImportRejected(number, where, f"{item_id} repeats line {seen[item_id][0]}")


def _check_references(parsed: ParsedImport) -> None:
    """Chains and rows are whole: what they name is in the file."""
    memories = parsed.memories
    for number, stored in memories.values():
        memory = stored.memory
        if memory.superseded_by is not None and memory.superseded_by not in memories:
            raise ImportRejected(number, "memory.superseded_by", "names no memory of the import")
        for index, link in enumerate(memory.links):
            if link.memory_id not in memories:
                where = f"memory.links[{index}].memory_id"
                raise ImportRejected(number, where, "names no memory of the import")
    for key, (number, row) in parsed.fact_rows.items():
        for memory_id, fact in row.facts.items():
            if fact.memory_id != memory_id:
                raise ImportRejected(number, f"facts.{memory_id}.memory_id", "not its own key")
            if memory_id not in memories:
                raise ImportRejected(number, f"facts.{memory_id}", "names no memory of the import")
            if memory_fact_key(memories[memory_id][1].memory) != key:
                raise ImportRejected(number, "key", f"memory {memory_id} observes another row")


class ImportReport(BaseModel):
    """`POST /v1/users/{user_id}/import`: items written, and items found already there (equal)."""

    user_id: str
    imported: dict[str, int]
    unchanged: dict[str, int]


_K = TypeVar("_K")
_V = TypeVar("_V")


def _split_by_store(
    parsed: dict[_K, tuple[int, _V]],
    found: dict[_K, _V],
    todo: dict[_K, tuple[int, _V]],
    label: str,
    same: Callable[[_V, _V], bool] = operator.eq,
) -> int:
    """Moves the items the store lacks into `todo`; counts the equal ones; refuses a difference."""
    unchanged = 0
    for key, (number, item) in parsed.items():
        stored = found.get(key)
        if stored is None:
            todo[key] = (number, item)
        elif same(stored, item):
            unchanged += 1
        else:
            raise ImportConflict(number, str(key), f"{label} {key} differs from the store's")
    return unchanged


def _pending(
    parsed: ParsedImport, store: UserPortability, tenant: str, user_id: str
) -> tuple[ParsedImport, dict[str, int]]:
    """What the store lacks; equal items are counted as unchanged, different ones refused."""
    snapshot = store.snapshot(tenant, user_id)
    todo = ParsedImport()
    unchanged = {
        "entities": _split_by_store(
            parsed.entities,
            {v.entity.entity_id: v for v in snapshot.entities},
            todo.entities,
            "entity",
        ),
        "entity_facts": _split_by_store(
            parsed.fact_rows,
            {r.key: r for r in snapshot.fact_rows},
            todo.fact_rows,
            "entity_facts row",
        ),
        # A memory's counters may have moved on since the export: advisory, the store's kept.
        "memories": _split_by_store(
            parsed.memories,
            {m.memory.memory_id: m for m in snapshot.memories},
            todo.memories,
            "memory",
            same=lambda a, b: (a.memory, a.rev) == (b.memory, b.rev),
        ),
        "episodes": _split_by_store(
            parsed.episodes,
            {e.turn_id: e for e in snapshot.episodes},
            todo.episodes,
            "episode",
        ),
    }
    return todo, unchanged


def _units(todo: ParsedImport, tenant: str, user_id: str) -> list[tuple[int, RestoreUnit]]:
    """(first line, unit) in write order: entities, chains (row last), other memories,
    episodes."""
    units: list[tuple[int, RestoreUnit]] = []
    empty = RestoreUnit(tenant=tenant, user_id=user_id)
    entities = sorted(todo.entities.values(), key=lambda pair: pair[0])
    for start in range(0, len(entities), _ENTITIES_PER_UNIT):
        chunk = entities[start : start + _ENTITIES_PER_UNIT]
        units.append((chunk[0][0], replace(empty, entities=[v for _, v in chunk])))
    by_key: dict[str | None, list[tuple[int, StoredMemory]]] = {}
    for number, stored in sorted(todo.memories.values(), key=lambda pair: pair[0]):
        by_key.setdefault(memory_fact_key(stored.memory), []).append((number, stored))
    keys = sorted({*todo.fact_rows, *(key for key in by_key if key is not None)})
    for key in [*keys, None]:
        chain = by_key.get(key, [])
        row = todo.fact_rows.get(key) if key is not None else None
        units.extend(_chain_units(empty, chain, row, separate=key is None))
    episodes = sorted(todo.episodes.values(), key=lambda pair: pair[0])
    per_unit = MAX_UNIT_ITEMS // 2  # an episode and its outbox row
    for start in range(0, len(episodes), per_unit):
        part = episodes[start : start + per_unit]
        units.append((part[0][0], replace(empty, episodes=[e for _, e in part])))
    return units


def _chain_units(
    empty: RestoreUnit,
    chain: Sequence[tuple[int, StoredMemory]],
    row: tuple[int, StoredFactRow] | None,
    *,
    separate: bool,
) -> list[tuple[int, RestoreUnit]]:
    """One unit for a chain that fits a transaction, else slices of it with the row in the
    last; memories of no row (`separate`) in slices as well, each on its own anyway."""
    units: list[tuple[int, RestoreUnit]] = []
    per_unit = MAX_UNIT_ITEMS // 3  # a memory, its outbox row, its counters
    slices = [chain[start : start + per_unit] for start in range(0, len(chain), per_unit)]
    if not slices or (row is not None and not separate and len(slices[-1]) >= per_unit):
        slices.append([])
    for index, part in enumerate(slices):
        last = index == len(slices) - 1
        rows = [row[1]] if row is not None and last else []
        if not part and not rows:
            continue
        first = part[0][0] if part else row[0] if row is not None else 0
        units.append((first, replace(empty, memories=[m for _, m in part], fact_rows=rows)))
    return units


def import_user(
    tenant: str,
    user_id: str,
    text: str | Iterable[str],
    store: UserPortability,
    guards: ImportGuards,
) -> ImportReport:
    """Restore an export of the user (see the module's docstring for what is atomic)."""
    parsed = parse_import(tenant, user_id, text, guards)
    todo, unchanged = _pending(parsed, store, tenant, user_id)
    for first_line, unit in _units(todo, tenant, user_id):
        try:
            store.restore(unit)
        except WriteConflict as exc:  # written by someone else between the read and now
            raise ImportConflict(first_line, "", f"changed while importing: {exc}") from exc
    imported = {
        "entities": len(todo.entities),
        "entity_facts": len(todo.fact_rows),
        "memories": len(todo.memories),
        "episodes": len(todo.episodes),
    }
    return ImportReport(user_id=user_id, imported=imported, unchanged=unchanged)
