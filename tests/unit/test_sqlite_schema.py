"""The embedded backend's file: created with its schema, refused when written by another
schema version (its tables would lack columns), with how to reset it."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from memwrite.adapters.sqlite.database import DATABASE_FILE, SqliteDatabase
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
