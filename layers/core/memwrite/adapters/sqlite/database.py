"""The embedded backend's one SQLite file: schema, connections and transactions.

Every SQLite adapter shares a `SqliteDatabase`: a small pool of connections (one per thread
that is using it at the moment; `memwrite serve` is threaded), WAL journaling so readers never
block the writer, and `transaction()` = `BEGIN IMMEDIATE` ... `COMMIT`, so a commit's
conditions are checked under the write lock and a refused one rolls back whole.

Durability: `synchronous=NORMAL` in WAL mode keeps every committed transaction across a crash
or restart of the process; only a power loss or OS crash may drop the last few commits.
"""

from __future__ import annotations

import queue
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from types import TracebackType

from memwrite.errors import ConfigError, SourceErased, SourceRolledBack, StoreUnavailable

__all__ = [
    "DATABASE_FILE",
    "EXPIRY_DUE_AT",
    "EXPIRY_DUE_WHERE",
    "SqliteDatabase",
    "open_database",
    "require_not_rolled_back",
    "require_source_trace",
    "use_wal",
]

DATABASE_FILE = "memwrite.sqlite3"
_BUSY_TIMEOUT_MS = 10_000  # a writer waits this long for another's transaction to finish
_WAL_RETRY_S = 0.005  # between tries of a refused switch to WAL (`use_wal`)
# Page cache per connection (negative: KiB). The working set is one user's rows at a time; the
# default 2 MiB per connection only made a long-running server's memory creep.
_CACHE_KIB = 512
# `PRAGMA user_version` of a database this code reads; bump it when a table changes shape.
_SCHEMA_VERSION = 2  # 2: expiry of last questions and session turns

# A memory whose user expiry the sweep has still to announce (`MemoryUnit.expiry_due`: active,
# an expiry, not announced), and when: the partial index below holds these memories alone, so
# the sweep never reads the table. A query uses it only when it states both expressions as is.
EXPIRY_DUE_WHERE = (
    "json_extract(doc, '$.expires_on') IS NOT NULL"
    " AND json_extract(doc, '$.superseded_by') IS NULL"
    " AND NOT json_extract(doc, '$.negated')"
    " AND NOT coalesce(json_extract(doc, '$.expiry_announced'), 0)"
)
EXPIRY_DUE_AT = "julianday(json_extract(doc, '$.expires_on'))"  # any UTC offset, as UTC

# Keys mirror the DynamoDB tables of `memwrite.schema` (tenant and user in every key); JSON
# documents are stored as text, as the DynamoDB adapters store them in a `doc` attribute.
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS ledger (
    tenant TEXT NOT NULL, turn_id TEXT NOT NULL, trace_id TEXT NOT NULL,
    PRIMARY KEY (tenant, turn_id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS ledger_by_trace ON ledger (tenant, trace_id);
CREATE TABLE IF NOT EXISTS traces (
    tenant TEXT NOT NULL, trace_id TEXT NOT NULL, doc TEXT NOT NULL,
    PRIMARY KEY (tenant, trace_id)) WITHOUT ROWID;
-- A user's traces by time (`traces_of_user`): an index on the document, so files written
-- before it existed gain it on open (no new column, no schema version bump).
CREATE INDEX IF NOT EXISTS traces_by_user ON traces (
    tenant, json_extract(doc, '$.user_id'),
    json_extract(doc, '$.created_at') || '#' || trace_id);
CREATE TABLE IF NOT EXISTS trace_memories (
    tenant TEXT NOT NULL, trace_id TEXT NOT NULL, memory_id TEXT NOT NULL,
    outcome TEXT NOT NULL, PRIMARY KEY (tenant, trace_id, memory_id, outcome)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS rollbacks (
    tenant TEXT NOT NULL, trace_id TEXT NOT NULL, user_id TEXT NOT NULL, doc TEXT NOT NULL,
    PRIMARY KEY (tenant, trace_id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS trace_memories_by_memory ON trace_memories (tenant, memory_id);
CREATE TABLE IF NOT EXISTS rate_claims (
    key TEXT PRIMARY KEY, claimant TEXT NOT NULL, expires_at INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS last_questions (
    tenant TEXT NOT NULL, user_id TEXT NOT NULL, session_id TEXT NOT NULL, question TEXT,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, user_id, session_id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS last_questions_by_expiry ON last_questions (expires_at);
CREATE TABLE IF NOT EXISTS session_turns (
    tenant TEXT NOT NULL, user_id TEXT NOT NULL, session_id TEXT NOT NULL,
    sort_key TEXT NOT NULL, doc TEXT NOT NULL, expires_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, user_id, session_id, sort_key)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS session_turns_by_expiry ON session_turns (expires_at);
CREATE TABLE IF NOT EXISTS spans (
    tenant TEXT NOT NULL, trace_id TEXT NOT NULL, stage TEXT NOT NULL, item_id TEXT NOT NULL,
    user_id TEXT NOT NULL, at TEXT NOT NULL, doc TEXT NOT NULL,
    PRIMARY KEY (tenant, trace_id, stage, item_id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS spans_by_user ON spans (tenant, user_id, at);
CREATE TABLE IF NOT EXISTS memories (
    tenant TEXT NOT NULL, user_id TEXT NOT NULL, memory_id TEXT NOT NULL,
    rev INTEGER NOT NULL, doc TEXT NOT NULL,
    PRIMARY KEY (tenant, user_id, memory_id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS memories_by_id ON memories (tenant, memory_id);
-- On the documents, so files written before it gain it on open (no schema version bump).
CREATE INDEX IF NOT EXISTS memories_expiry_due ON memories ({EXPIRY_DUE_AT})
    WHERE {EXPIRY_DUE_WHERE};
CREATE TABLE IF NOT EXISTS memory_access (
    tenant TEXT NOT NULL, user_id TEXT NOT NULL, memory_id TEXT NOT NULL,
    access_count INTEGER NOT NULL, last_accessed TEXT NOT NULL,
    PRIMARY KEY (tenant, user_id, memory_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS entity_facts (
    tenant TEXT NOT NULL, user_id TEXT NOT NULL, fact_key TEXT NOT NULL,
    version INTEGER NOT NULL, facts TEXT NOT NULL,
    PRIMARY KEY (tenant, user_id, fact_key)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS entities (
    tenant TEXT NOT NULL, user_id TEXT NOT NULL, entity_id TEXT NOT NULL,
    version INTEGER NOT NULL, doc TEXT NOT NULL,
    PRIMARY KEY (tenant, user_id, entity_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS outbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant TEXT NOT NULL, user_id TEXT NOT NULL, memory_id TEXT NOT NULL, rev INTEGER NOT NULL,
    op TEXT NOT NULL, trace_id TEXT, doc TEXT NOT NULL, done INTEGER NOT NULL DEFAULT 0,
    UNIQUE (tenant, user_id, memory_id, rev));
CREATE INDEX IF NOT EXISTS outbox_pending ON outbox (tenant, user_id, memory_id, rev)
    WHERE done = 0;
CREATE INDEX IF NOT EXISTS outbox_by_seq ON outbox (seq) WHERE done = 0;
-- Episodes (`memwrite.records.episode`): a new table, so files written before it gain it on open.
CREATE TABLE IF NOT EXISTS episodes (
    tenant TEXT NOT NULL, user_id TEXT NOT NULL, turn_id TEXT NOT NULL,
    sort_key TEXT NOT NULL, status TEXT NOT NULL, expires_at INTEGER NOT NULL,
    doc TEXT NOT NULL, PRIMARY KEY (tenant, user_id, turn_id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS episodes_by_time ON episodes (tenant, user_id, sort_key);
CREATE INDEX IF NOT EXISTS episodes_by_expiry ON episodes (expires_at);
-- The batch lane (`memwrite.backfill.batch`): which episodes went into which provider batch,
-- until the batch is closed. A new table, so files written before it gain it on open.
CREATE TABLE IF NOT EXISTS episode_batches (
    batch_id TEXT NOT NULL, tenant TEXT NOT NULL, user_id TEXT NOT NULL, turn_id TEXT NOT NULL,
    submitted_at REAL NOT NULL,
    PRIMARY KEY (batch_id, tenant, user_id, turn_id)) WITHOUT ROWID;
-- Who has a pending episode (the backfill of every user), without reading the others.
CREATE INDEX IF NOT EXISTS episodes_pending ON episodes (tenant, user_id)
    WHERE status = 'pending';
CREATE TABLE IF NOT EXISTS queue (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    turn_id TEXT NOT NULL UNIQUE, message_group TEXT NOT NULL, body TEXT NOT NULL,
    visible_at REAL NOT NULL DEFAULT 0, receive_count INTEGER NOT NULL DEFAULT 0,
    receipt TEXT);
CREATE INDEX IF NOT EXISTS queue_by_group ON queue (message_group, visible_at);
CREATE INDEX IF NOT EXISTS queue_by_receipt ON queue (receipt);
CREATE TABLE IF NOT EXISTS dead_letters (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, turn_id TEXT NOT NULL, body TEXT NOT NULL,
    error TEXT NOT NULL, receive_count INTEGER NOT NULL);
-- The webhook delivery lane (`memwrite.feed.delivery`): SQS standard-queue semantics, a
-- waiting delivery queued once. New tables, so files written before them gain them on open.
CREATE TABLE IF NOT EXISTS webhook_queue (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    delivery_id TEXT NOT NULL UNIQUE, body TEXT NOT NULL,
    visible_at REAL NOT NULL DEFAULT 0, receive_count INTEGER NOT NULL DEFAULT 0,
    receipt TEXT);
CREATE INDEX IF NOT EXISTS webhook_queue_by_visibility ON webhook_queue (visible_at, seq);
CREATE INDEX IF NOT EXISTS webhook_queue_by_receipt ON webhook_queue (receipt);
CREATE TABLE IF NOT EXISTS webhook_dead_letters (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, delivery_id TEXT NOT NULL, body TEXT NOT NULL,
    receive_count INTEGER NOT NULL);
-- Hashes of API keys, never a key (memwrite keys). A table added within schema version 2:
-- an older file of that version gets it on open.
CREATE TABLE IF NOT EXISTS api_keys (
    key_hash TEXT PRIMARY KEY, key_id TEXT NOT NULL UNIQUE, tenant TEXT NOT NULL,
    created_at TEXT NOT NULL);
-- Tenants' own settings (PUT /v1/settings), one JSON document each, also added within
-- schema version 2.
CREATE TABLE IF NOT EXISTS tenant_settings (
    tenant TEXT PRIMARY KEY, settings TEXT NOT NULL, updated_at TEXT NOT NULL) WITHOUT ROWID;
-- The model budget's bucket shards (memwrite.budget), also added within schema version 2.
CREATE TABLE IF NOT EXISTS budget_buckets (
    key TEXT PRIMARY KEY, version INTEGER NOT NULL, requests REAL NOT NULL,
    input_tokens REAL NOT NULL, output_tokens REAL NOT NULL, updated_at REAL NOT NULL,
    factor REAL NOT NULL, blocked_until REAL NOT NULL, decreased_at REAL NOT NULL,
    line_at REAL NOT NULL DEFAULT 0) WITHOUT ROWID;
-- Each tenant's usage by the UTC hour (memwrite.metering, GET /v1/usage), also added within
-- schema version 2.
CREATE TABLE IF NOT EXISTS usage_hours (
    tenant TEXT NOT NULL, hour TEXT NOT NULL, turns_in INTEGER NOT NULL,
    turns_kept INTEGER NOT NULL, model_calls INTEGER NOT NULL, input_tokens INTEGER NOT NULL,
    cache_read_input_tokens INTEGER NOT NULL, cache_creation_input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL, embeddings INTEGER NOT NULL, cost_usd REAL NOT NULL,
    PRIMARY KEY (tenant, hour)) WITHOUT ROWID;
"""


class SqliteDatabase:
    """One database file under `data_dir`, created (with its schema) on first open."""

    def __init__(self, data_dir: Path) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        self.path = data_dir / DATABASE_FILE
        self._idle: queue.SimpleQueue[sqlite3.Connection] = queue.SimpleQueue()
        with self.transaction() as connection:
            self._create_schema(connection, data_dir)

    def _create_schema(self, connection: sqlite3.Connection, data_dir: Path) -> None:
        """The tables, in a new file; a file of another schema version is refused whole (its
        tables would lack columns), with how to reset it."""
        (version,) = connection.execute("PRAGMA user_version").fetchone()
        (tables,) = connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
        if version != _SCHEMA_VERSION and (version or tables):
            raise ConfigError(
                f"{self.path} has schema version {version}, this memwrite reads "
                f"{_SCHEMA_VERSION}: delete {data_dir} to start afresh"
            )
        for statement in _SCHEMA.split(";"):
            connection.execute(statement)
        # A column added within schema version 2 (the model budget's line of waiting callers).
        columns = {row[1] for row in connection.execute("PRAGMA table_info(budget_buckets)")}
        if "line_at" not in columns:
            connection.execute(
                "ALTER TABLE budget_buckets ADD COLUMN line_at REAL NOT NULL DEFAULT 0"
            )
        connection.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")

    def _open(self) -> sqlite3.Connection:
        try:
            # Autocommit mode (isolation_level=None): transactions are only the explicit ones.
            connection = sqlite3.connect(
                self.path,
                isolation_level=None,
                check_same_thread=False,  # pooled: used by one thread at a time
                timeout=_BUSY_TIMEOUT_MS / 1000,
            )
            use_wal(connection)
            connection.execute("PRAGMA synchronous=NORMAL")
            connection.execute(f"PRAGMA cache_size=-{_CACHE_KIB}")
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"SQLite database {self.path} cannot be opened: {exc}") from exc
        return connection

    def connection(self) -> _Lease:
        """A connection for this thread's use, back to the pool afterwards (`_Lease`).

        The pool holds at most as many connections as were ever in use at once.
        """
        return _Lease(self)

    def _borrow(self) -> sqlite3.Connection:
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            return self._open()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """`BEGIN IMMEDIATE` ... `COMMIT`: the write lock is taken before the first read, so
        conditions checked inside hold at commit; any exception rolls everything back."""
        with self.connection() as connection:
            connection.execute("BEGIN IMMEDIATE")
            try:
                yield connection
            except BaseException:
                connection.rollback()
                raise
            connection.execute("COMMIT")

    def close(self) -> None:
        """Close the idle connections (tests and server shutdown; in-use ones close on GC)."""
        while True:
            try:
                self._idle.get_nowait().close()
            except queue.Empty:
                return


class _Lease:
    """`with database.connection() as connection:` a pooled connection, an `sqlite3.Error`
    raised as `StoreUnavailable`. A class, not a generator context manager: it is entered
    some 150 times a request, and contextlib's machinery cost more than most statements."""

    __slots__ = ("_connection", "_database")

    def __init__(self, database: SqliteDatabase) -> None:
        self._database = database

    def __enter__(self) -> sqlite3.Connection:
        self._connection = self._database._borrow()
        return self._connection

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        connection = self._connection
        try:
            if connection.in_transaction:  # only after an error escaped mid-transaction
                connection.rollback()
        finally:
            self._database._idle.put(connection)
        if isinstance(exc, sqlite3.Error):
            raise StoreUnavailable(f"SQLite {self._database.path}: {exc}") from exc


@cache
def _database_at(path: Path) -> SqliteDatabase:
    return SqliteDatabase(path)


def use_wal(connection: sqlite3.Connection, timeout_s: float = _BUSY_TIMEOUT_MS / 1000) -> None:
    """The connection's file in WAL mode (it stays set in the file), switched if not yet.

    The switch takes a lock another connection's transaction may hold, and SQLite refuses it at
    once ("database is locked": no busy wait), as when two processes open a file one of them
    has just created: tried again until the file is in WAL (the other may switch it) or
    `timeout_s` has passed.
    """
    deadline = time.perf_counter() + timeout_s
    while connection.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
        try:
            connection.execute("PRAGMA journal_mode=WAL")
        except sqlite3.OperationalError:
            if time.perf_counter() >= deadline:
                raise
            time.sleep(_WAL_RETRY_S)


def open_database(data_dir: Path) -> SqliteDatabase:
    """The process's one `SqliteDatabase` for `data_dir`: every handler built in a process (the
    local runner builds seven) shares one pool of connections and page caches per file."""
    return _database_at(data_dir.resolve())


def require_source_trace(connection: sqlite3.Connection, tenant: str, trace_id: str) -> None:
    """Raise `SourceErased` unless the trace exists. Called inside the writer's transaction:
    the erasure (one transaction, which deletes the trace) lands wholly before or after it."""
    found = connection.execute(
        "SELECT 1 FROM traces WHERE tenant = ? AND trace_id = ?", (tenant, trace_id)
    ).fetchone()
    if found is None:
        raise SourceErased(tenant, trace_id)


def require_not_rolled_back(connection: sqlite3.Connection, tenant: str, trace_id: str) -> None:
    """Raise `SourceRolledBack` when the trace has a rollback record. Called inside a memory
    commit's transaction: the rollback (one transaction, which inserts the record) lands wholly
    before it (nothing stored) or after it (and removes what it stored)."""
    found = connection.execute(
        "SELECT 1 FROM rollbacks WHERE tenant = ? AND trace_id = ?", (tenant, trace_id)
    ).fetchone()
    if found is not None:
        raise SourceRolledBack(tenant, trace_id)
