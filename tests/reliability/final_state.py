"""What a run left behind: every row of every table (both SQLite files, store and search
index, or every DynamoDB table and the index file), as sorted JSON per table.

Two runs of the same input must leave equal final states. Only what legitimately differs
between two runs is left out: wall-clock times, latencies, row ids and sequence numbers of
autoincrement columns, queue receipts and receive counts. Everything else counts: a memory
stored twice, an entity_facts row half-updated, an index document too many, an outbox row
left pending, a ledger row or a span missing or extra. (An entity's `last_seen` is when the
pipeline last met it, a wall-clock time, and its `version` counts those meetings; FTS5's
shadow tables hold the index's text again, in segments whose layout depends on the order of
writes: these are left out too. So is the usage meter, `GET /v1/usage`'s counters: it counts
the work done, and a retried or redelivered batch, or a search that only reads, is work done.)
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from contextlib import closing
from decimal import Decimal
from pathlib import Path
from typing import Any

from boto3.dynamodb.types import Binary, TypeDeserializer

from memwrite.adapters.sqlite.database import DATABASE_FILE
from memwrite.config.environment import LambdaEnvironment
from memwrite_local.runtime.embedded import LocalSqlite
from tests.integration.conftest import Local

__all__ = ["FinalState", "assert_same_state", "final_state", "sqlite_state"]

FinalState = dict[str, list[str]]  # table -> its rows, as sorted JSON texts

_VOLATILE = frozenset(
    {
        "at",
        "created_at",
        "latency_ms",
        "expires_at",
        "last_accessed",
        "id",
        "seq",
        "visible_at",
        "receipt",
        "receive_count",
    }
)
_VOLATILE_IN_TABLE = {
    "entities": frozenset({"last_seen", "version"}),
    # A trace's place in its user's list is `created_at#trace_id` (the time is volatile).
    "turns": frozenset({"lookup_sort"}),
}
# The usage meter's tables: the DynamoDB table (by logical name) and the SQLite one.
_METERING = frozenset({"usage", "usage_hours"})
_TABLES = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"


def final_state(local: Local) -> FinalState:
    """The state of `local`'s backend now (call it while its backend is entered)."""
    index_path = LambdaEnvironment.load().embedded_index_path()
    if isinstance(local.backend, LocalSqlite):
        return sqlite_state(local.backend.data_dir, index_path)
    assert local.aws.resources is not None
    logical = {name: table for table, name in local.aws.resources.table_names.items()}
    deserialize = TypeDeserializer().deserialize
    tables = {
        logical[name]: [{key: deserialize(value) for key, value in i.items()} for i in items]
        for name, items in local.table_items().items()
    }
    return _as_state(tables, index_path)


def sqlite_state(data_dir: Path, index_path: str) -> FinalState:
    """The state of the embedded backend in `data_dir`, its search index in `index_path`."""
    return _as_state(_sqlite_tables(data_dir / DATABASE_FILE), index_path)


def _as_state(tables: dict[str, list[dict[str, Any]]], index_path: str) -> FinalState:
    tables = {name: rows for name, rows in tables.items() if name not in _METERING}
    if index_path != ":memory:":
        index = _sqlite_tables(Path(index_path))
        tables = {**tables, **{f"index.{name}": rows for name, rows in index.items()}}
    return {
        name: sorted(
            json.dumps(_stable(row, _VOLATILE_IN_TABLE.get(name, frozenset())), sort_keys=True)
            for row in rows
        )
        for name, rows in tables.items()
    }


def _sqlite_tables(path: Path) -> dict[str, list[dict[str, Any]]]:
    with closing(sqlite3.connect(path)) as database:
        names = [name for (name,) in database.execute(_TABLES)]
        tables = {}
        for name in names:
            cursor = database.execute(f"SELECT * FROM {name}")
            columns = [column[0] for column in cursor.description]
            tables[name] = [dict(zip(columns, row, strict=True)) for row in cursor]
    return tables


def _stable(value: Any, volatile: frozenset[str]) -> Any:
    """`value` without its volatile keys, JSON documents stored as text opened up, and every
    other value as JSON can hold it (DynamoDB's numbers are `Decimal`s, blobs are bytes)."""
    if isinstance(value, dict):
        return {
            key: _stable(item, volatile)
            for key, item in value.items()
            if key not in _VOLATILE and key not in volatile
        }
    if isinstance(value, list | tuple | set):
        items = [_stable(item, volatile) for item in value]
        return sorted(items, key=str) if isinstance(value, set) else items
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return _stable(json.loads(value), volatile)
        except json.JSONDecodeError:
            return value
    if isinstance(value, bytes | bytearray | Binary):
        return bytes(value).hex()
    if isinstance(value, Decimal):
        return float(value)
    return value


def assert_same_state(state: FinalState, expected: FinalState) -> None:
    """Fails naming, per table, the rows only `state` has and the rows only `expected` has."""
    found = {}
    for table in sorted(set(state) | set(expected)):
        ours, theirs = Counter(state.get(table, [])), Counter(expected.get(table, []))
        extra, missing = sorted((ours - theirs).elements()), sorted((theirs - ours).elements())
        if extra or missing:
            found[table] = {"extra": extra, "missing": missing}
    assert not found, "the final state differs from a clean run's:\n" + json.dumps(found, indent=1)
