"""One real `memwrite serve` process (SQLite, offline: the rule extractor only) for the client,
contract and MCP tests; each test uses its own user ids."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.serve_process import ServeProcess, running_serve

API_KEY = "key-client"
OTHER_KEY = "key-other-tenant"
API_KEYS = {API_KEY: "tenant-client", OTHER_KEY: "tenant-other"}


@pytest.fixture(scope="session")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    env = {
        "MEMWRITE_API_KEYS": ",".join(f"{key}={tenant}" for key, tenant in API_KEYS.items()),
        "ANTHROPIC_API_KEY": "",
    }
    with running_serve(tmp_path_factory.mktemp("serve"), env) as process:
        yield process
