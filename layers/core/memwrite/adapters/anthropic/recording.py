"""Model answers as evidence: every Messages API exchange written to a directory as tests replay it.

`MEMWRITE_LLM_RECORD=DIR` reaches every adapter as `ClientOptions.record_dir`; `StructuredClient`
then adds an `ExchangeRecorder` as a response hook of its HTTP client, so each request any
adapter sends and each answer it gets (usage included; SDK retries and error statuses too) is
one file, whatever the provider. Headers are never written: they hold the API key
(`x-api-key`) or Bedrock's SigV4 signature (`authorization`, `x-amz-*`).

One exchange is `DIR/<key>-<n>.json`: `key` is a hash of the request body's canonical JSON
(`request_key`), `n` counts the same body's earlier answers in `DIR` (a retried request is
answered again). Names depend on the requests only, never on their order: the detail pass's
concurrent calls cannot collide, and a replay matches an answer to its request by key. Each
file is written to a temporary name and linked into place, so a reader never sees half of one
and two writers never take the same name.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx2

__all__ = ["EXCHANGE_FORMAT", "ExchangeRecorder", "record_exchanges", "request_key"]

logger = logging.getLogger(__name__)

EXCHANGE_FORMAT = 1  # bump when an exchange file's shape changes
_KEY_HEX_CHARS = 16  # 64 bits: no two requests of one recording share a key


def request_key(content: bytes) -> str:
    """The request body's identity: a hash of its canonical JSON (key order, spacing aside)."""
    try:
        canonical = json.dumps(
            json.loads(content), sort_keys=True, separators=(",", ":"), ensure_ascii=False
        ).encode()
    except ValueError:  # not JSON (never sent by the SDK): the bytes themselves
        canonical = content
    return hashlib.sha256(canonical).hexdigest()[:_KEY_HEX_CHARS]


def _body(content: bytes) -> Any:
    """JSON as JSON, anything else (a proxy's HTML error page) as text."""
    try:
        return json.loads(content)
    except ValueError:
        return content.decode("utf-8", errors="replace")


class ExchangeRecorder:
    """Writes each answered request to `directory` (a response hook of an `httpx2.Client`)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._lock = threading.Lock()
        self._answers: Counter[str] = Counter()  # per key: the next `n` to try

    def __call__(self, response: httpx2.Response) -> None:
        request = response.request
        response.read()  # the SDK reads it again from memory
        key = request_key(request.content)
        exchange = {
            "format": EXCHANGE_FORMAT,
            "key": key,
            "request": {
                "method": request.method,
                "path": request.url.path,
                "body": _body(request.content),
            },
            "response": {"status": response.status_code, "body": _body(response.content)},
        }
        try:
            self.write(key, exchange)
        except OSError as exc:
            # A failed write must not fail (and so repeat) a model call that was paid for.
            logger.warning("model exchange %s not recorded in %s: %s", key, self.directory, exc)

    def write(self, key: str, exchange: dict[str, Any]) -> Path:
        """`exchange` as `<key>-<n>.json`, `n` the first free number for `key`."""
        self.directory.mkdir(parents=True, exist_ok=True)
        temporary = self.directory / f".{key}.{os.getpid()}.{threading.get_ident()}.tmp"
        temporary.write_text(json.dumps(exchange, indent=2) + "\n", encoding="utf-8")
        try:
            while True:
                with self._lock:
                    n = self._answers[key]
                    self._answers[key] += 1
                target = self.directory / f"{key}-{n}.json"
                try:
                    # A link, unlike a rename, fails rather than replace a file that exists:
                    # another process (or an earlier run into the same directory) took `n`.
                    os.link(temporary, target)
                except FileExistsError:
                    continue
                return target
        finally:
            temporary.unlink()


def record_exchanges(client: httpx2.Client, directory: Path) -> httpx2.Client:
    """`client`, now also writing every answered request to `directory`."""
    hooks = client.event_hooks
    hooks["response"] = [*hooks["response"], ExchangeRecorder(directory)]
    client.event_hooks = hooks
    return client
