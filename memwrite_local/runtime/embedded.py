"""The embedded default: every table and the work queue in one SQLite file under a data dir.

State persists in the directory (default `./.memwrite/`): a restarted `memwrite serve` finds
its memories, traces and any queued turns where it left them. Delete the directory to reset.
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

from memwrite_local.runtime.backend import LocalBackend

__all__ = ["BACKENDS", "DEFAULT_DATA_DIR", "LocalSqlite", "local_backend"]

DEFAULT_DATA_DIR = Path(".memwrite")


class LocalSqlite(LocalBackend):
    def __init__(self, data_dir: Path, extra_env: dict[str, str] | None = None) -> None:
        super().__init__(extra_env)
        self.data_dir = data_dir
        self.description = f"SQLite in {data_dir}"

    def _has_stored_keys(self) -> bool:
        from memwrite.adapters.sqlite.api_keys import SqliteApiKeyStore
        from memwrite.adapters.sqlite.database import DATABASE_FILE, open_database

        if not (self.data_dir / DATABASE_FILE).is_file():
            return False
        return bool(SqliteApiKeyStore(open_database(self.data_dir)).list_keys())

    def _start(self, stack: ExitStack) -> dict[str, str]:
        return {"MEMWRITE_BACKEND": "sqlite", "MEMWRITE_DATA_DIR": str(self.data_dir.resolve())}


BACKENDS = ("sqlite", "moto")


def local_backend(
    kind: str, data_dir: Path | None, extra_env: dict[str, str] | None = None
) -> LocalBackend:
    """`sqlite` (in `data_dir`) or `moto` (in-process, gone at exit; `data_dir` unused)."""
    if kind == "moto":
        from memwrite_local.runtime.aws import LocalAws

        return LocalAws(extra_env)
    if data_dir is None:
        raise ValueError("the sqlite backend needs a data directory")
    return LocalSqlite(data_dir, extra_env)
