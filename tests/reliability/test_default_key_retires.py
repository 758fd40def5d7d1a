"""The first key created in a data directory retires `local-dev-key` on a server already
running on it, within the authorizer's cache period, no restart (`docs/api-keys.md`). The
period is the setting `api_key_cache_secs`, set short here: the test need not wait out the
default 30 s."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.serve_process import running_serve

CACHE_SECS = 2.0  # the period the server under test is configured with


def _status(base_url: str, key: str) -> int:
    request = urllib.request.Request(
        base_url + "/v1/users/dana/memories", headers={"x-api-key": key}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return int(reply.status)
    except urllib.error.HTTPError as refused:
        return int(refused.code)


def test_creating_the_first_key_retires_the_default_key_within_the_cache_period(
    tmp_path: Path,
) -> None:
    # A short period (the default, KEY_CACHE_SECS, is held by tests/unit/test_api_keys.py)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"api_key_cache_secs": CACHE_SECS}), encoding="utf-8")
    data_dir = tmp_path / "data"
    with running_serve(data_dir, {"MEMWRITE_CONFIG": str(config)}) as server:
        # Given a running server answering the default key
        assert _status(server.base_url, "local-dev-key") == 200
        # When the first key is created in its data directory with the CLI
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMWRITE_")}
        command = ["keys", "create", "--tenant", "acme", "--data-dir", str(data_dir), "--json"]
        created = subprocess.run(
            [sys.executable, "-m", "memwrite_local.cli", *command],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        created_at = time.monotonic()
        key = json.loads(created.stdout)["key"]
        # Then the default key is refused within the cache period, and the new key works
        while _status(server.base_url, "local-dev-key") != 401:
            assert time.monotonic() - created_at < CACHE_SECS + 5, "still accepted"
            time.sleep(0.2)
        assert _status(server.base_url, key) == 200
