"""The embedded backend's file: created with its schema, refused when written by another
schema version (its tables would lack columns), with how to reset it; the search index's file
opened while another process is still creating it."""

from __future__ import annotations

import sqlite3
import threading
from contextlib import closing
from pathlib import Path

import pytest

from memwrite.adapters.sqlite.database import DATABASE_FILE, SqliteDatabase
from memwrite.adapters.sqlite.embedded_index import EmbeddedIndex
from memwrite.errors import ConfigError


def test_a_new_directory_gets_a_database_that_opens_again(tmp_path: Path) -> None:
    SqliteDatabase(tmp_path).close()
    SqliteDatabase(tmp_path).close()  # the same version: opened as it is
    assert (tmp_path / DATABASE_FILE).is_file()


def test_a_file_from_an_older_memwrite_is_refused_with_how_to_reset(tmp_path: Path) -> None:
    # Given a data directory written before the schema had a version (tables, user_version 0)
    with closing(sqlite3.connect(tmp_path / DATABASE_FILE)) as old:
        old.execute("CREATE TABLE outbox (seq INTEGER PRIMARY KEY, doc TEXT)")
        old.commit()
    # When memwrite opens it / Then it refuses, naming the directory to delete
    with pytest.raises(ConfigError, match=f"delete {tmp_path}"):
        SqliteDatabase(tmp_path)


def test_an_index_file_another_connection_is_still_creating_opens_once_it_is_done(
    tmp_path: Path,
) -> None:
    # Given an index file another process has just created and is still writing (not yet WAL)
    path = tmp_path / "index.sqlite3"
    creator = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    creator.execute("BEGIN IMMEDIATE")
    creator.execute("CREATE TABLE settings (name TEXT PRIMARY KEY, value TEXT)")
    done = threading.Timer(0.2, lambda: creator.execute("COMMIT"))
    done.start()
    try:
        # When a second process opens the index meanwhile (its switch to WAL refused at first)
        index = EmbeddedIndex(str(path))
        # Then it opens once the other is done, the file in WAL mode
        with closing(sqlite3.connect(path)) as reader:
            assert reader.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        index.close()
    finally:
        done.join()
        creator.close()
