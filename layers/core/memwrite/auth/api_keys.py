"""API keys: only a hash of each key is stored (hash -> tenant); the key is shown once.

A key is `mwk_` and 43 URL-safe characters (`secrets.token_urlsafe(32)`: 256 random bits), so
one unsalted SHA-256 is enough to store it: there is nothing to guess that is cheaper than the
key itself. The prefix makes a leaked key recognisable (secret scanners, the pre-filter's
firewall). Each key also gets a public id (12 hex digits) stored beside its hash: `memwrite keys
list` and `revoke` work with ids and never need the secret.

The authorizer asks a `KeyResolver`: the configured keys first (local mode only: settings
`api_keys` / `MEMWRITE_API_KEYS`; a deployed environment has none), then the key table, whose
answers it keeps for the setting `api_key_cache_secs` (`KEY_CACHE_SECS` unless set); a revoked
key therefore works for at most that long on an instance that has just used it. The local
default key (`local-dev-key`) is valid only while the key table holds no key: that answer is
kept as long, so the first key created retires the default on a running server within that
period. Every comparison is of SHA-256 hashes, in constant time (`hmac.compare_digest`).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from memwrite.ports import ApiKeyRecord, ApiKeyStore

__all__ = [
    "DEFAULT_KEY_ENV",
    "KEY_CACHE_SECS",
    "KEY_PREFIX",
    "IssuedKey",
    "KeyResolver",
    "create_key",
    "hash_key",
]

KEY_PREFIX = "mwk_"
# `key=tenant`: the local runner's default key, valid only while the key table is empty.
DEFAULT_KEY_ENV = "MEMWRITE_DEFAULT_API_KEY"
# How long an authorizer instance trusts a key table answer: the default of the setting
# `api_key_cache_secs` (tests/unit/test_api_keys.py holds the two equal).
KEY_CACHE_SECS = 30
_CACHE_ENTRIES = 1024  # keys remembered per instance (the least recently used go first)
_KEY_ID_BYTES = 6  # 12 hex digits: public, unique enough for an operator's list
_TENANT = re.compile(r"^[A-Za-z0-9_.:@+=/-]{1,128}$")  # as `memwrite.models.Identifier`


@dataclass(frozen=True)
class IssuedKey:
    """A key just created: `key` is shown once and stored nowhere."""

    key: str
    record: ApiKeyRecord


def hash_key(key: str) -> str:
    """What the key table stores and looks up: SHA-256 of the key, hex."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def create_key(store: ApiKeyStore, tenant: str, now: datetime | None = None) -> IssuedKey:
    """A new random key for `tenant`, its hash stored; the key itself only in the answer.

    Raises `ValueError` for a tenant that is not 1-128 URL-safe characters.
    """
    if not _TENANT.fullmatch(tenant):
        raise ValueError(f"tenant {tenant!r}: expected 1-128 URL-safe characters")
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    record = ApiKeyRecord(
        key_id=secrets.token_hex(_KEY_ID_BYTES),
        key_hash=hash_key(key),
        tenant=tenant,
        created_at=(now or datetime.now(UTC)).isoformat(timespec="seconds"),
    )
    store.add(record)
    return IssuedKey(key=key, record=record)


class KeyResolver:
    """A presented key -> its tenant, or None: configured keys, then the key table.

    Only found keys are cached (for `cache_secs`): a key created a moment ago works at once,
    and a flood of wrong keys cannot fill the cache (API Gateway caches those answers too).
    """

    def __init__(
        self,
        configured: Mapping[str, str],
        store: ApiKeyStore | None,
        *,
        default: Mapping[str, str] | None = None,
        cache_secs: float = KEY_CACHE_SECS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        # Configured keys hashed too, so every comparison is of hashes, never of keys.
        self._configured = {hash_key(key): tenant for key, tenant in configured.items()}
        # Valid only while the key table is empty (the local `local-dev-key`).
        self._default = {hash_key(key): tenant for key, tenant in (default or {}).items()}
        self._store_empty: tuple[bool, float] | None = None  # the answer, and until when
        self._store = store
        self._cache_secs = cache_secs
        self._clock = clock
        self._found: OrderedDict[str, tuple[str, float]] = OrderedDict()

    def tenant_of(self, key: str | None) -> str | None:
        if not key:
            return None
        digest = hash_key(key)
        configured = _constant_time_lookup(self._configured, digest)
        if configured is not None:
            return configured
        default = _constant_time_lookup(self._default, digest)
        if default is not None:
            return default if self._store_is_empty() else None
        if self._store is None:
            return None
        now = self._clock()
        cached = self._found.get(digest)
        if cached is not None and cached[1] > now:
            self._found.move_to_end(digest)
            return cached[0]
        stored = self._store.tenant_of(digest)
        if stored is None:
            self._found.pop(digest, None)
            return None
        self._found[digest] = (stored, now + self._cache_secs)
        self._found.move_to_end(digest)
        while len(self._found) > _CACHE_ENTRIES:
            self._found.popitem(last=False)
        return stored

    def _store_is_empty(self) -> bool:
        """Whether the key table holds no key (asked at most once per cache period)."""
        if self._store is None:
            return True
        now = self._clock()
        if self._store_empty is None or self._store_empty[1] <= now:
            self._store_empty = (not self._store.list_keys(), now + self._cache_secs)
        return self._store_empty[0]


def _constant_time_lookup(known: Mapping[str, str], digest: str) -> str | None:
    """The tenant of `digest` among `known` hashes, every one compared in constant time."""
    found = None
    for candidate, tenant in known.items():
        if hmac.compare_digest(candidate, digest):
            found = tenant
    return found
