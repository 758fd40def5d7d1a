"""`memwrite serve` as the chaos suite drives it: a real process on loopback, raw HTTP requests
(any method, path and bytes), and its data directory read back as a final state."""

from __future__ import annotations

import http.client
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memwrite.config.environment import LambdaEnvironment
from tests.reliability.final_state import FinalState, sqlite_state
from tests.serve_process import ServeProcess

__all__ = ["API_KEYS", "Reply", "Served"]

# `memwrite serve` keys: two tenants whose data must stay apart, one for the fuzzer's noise.
API_KEYS = {"key-a": "tenant-a", "key-b": "tenant-b", "key-fuzz": "tenant-fuzz"}
HTTP_TIMEOUT_SECS = 10


@dataclass(frozen=True)
class Reply:
    status: int
    body: Any  # the JSON answer (the export: its JSON lines, as text)


@dataclass(frozen=True)
class Served:
    """`memwrite serve` on loopback (a real process) and its data directory."""

    process: ServeProcess
    data_dir: Path

    def request(
        self,
        method: str,
        path: str,
        body: bytes | dict[str, Any] | None = None,
        api_key: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        """One request on a fresh connection (a refused request closes its connection)."""
        raw = json.dumps(body).encode() if isinstance(body, dict) else body
        sent = {"Content-Type": "application/json", **(headers or {})}
        if api_key is not None:
            sent["x-api-key"] = api_key
        connection = http.client.HTTPConnection("127.0.0.1", self.process.port, HTTP_TIMEOUT_SECS)
        try:
            connection.request(method, path, body=raw, headers=sent)
            response = connection.getresponse()
            payload = response.read()
            if response.getheader("Content-Type") == "application/x-ndjson":
                return Reply(response.status, payload.decode())  # an export's JSON lines
            return Reply(response.status, json.loads(payload or b"null"))
        finally:
            connection.close()

    def state(self) -> FinalState:
        environ = {"MEMWRITE_BACKEND": "sqlite", "MEMWRITE_DATA_DIR": str(self.data_dir)}
        return sqlite_state(self.data_dir, LambdaEnvironment.load(environ).embedded_index_path())
