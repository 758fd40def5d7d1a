"""`KeyResolver`: configured keys, then the key table, whose found answers are kept briefly."""

from __future__ import annotations

from memwrite.auth.api_keys import KEY_CACHE_SECS, KeyResolver, hash_key
from memwrite.config.settings import Settings
from memwrite.ports import ApiKeyRecord


class _Table:
    """An in-memory key table that counts its lookups."""

    def __init__(self) -> None:
        self.tenants: dict[str, str] = {}
        self.lookups = 0

    def add(self, record: ApiKeyRecord) -> None:
        self.tenants[record.key_hash] = record.tenant

    def tenant_of(self, key_hash: str) -> str | None:
        self.lookups += 1
        return self.tenants.get(key_hash)

    def list_keys(self, tenant: str | None = None) -> list[ApiKeyRecord]:
        return [
            ApiKeyRecord(key_id="k", key_hash=h, tenant=t, created_at="2026-03-02T09:00:00+00:00")
            for h, t in self.tenants.items()
        ]

    def revoke(self, key_id: str) -> ApiKeyRecord | None:
        return None


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_configured_keys_come_first_and_the_table_is_asked_for_the_rest() -> None:
    # Given a configured key and a stored one
    table = _Table()
    table.tenants[hash_key("mwk_stored")] = "acme"
    resolver = KeyResolver({"local-dev-key": "local"}, table)
    # Then each names its tenant; a missing, empty or unknown key names none
    assert resolver.tenant_of("local-dev-key") == "local"
    assert resolver.tenant_of("mwk_stored") == "acme"
    assert [resolver.tenant_of(k) for k in (None, "", "mwk_unknown")] == [None, None, None]


def test_a_revoked_key_works_at_most_the_cache_time_and_a_new_key_at_once() -> None:
    # Given a resolver that found a key in the table
    table, clock = _Table(), _Clock()
    table.tenants[hash_key("mwk_a")] = "acme"
    resolver = KeyResolver({}, table, clock=clock)
    assert resolver.tenant_of("mwk_a") == "acme"
    # When the key is revoked
    del table.tenants[hash_key("mwk_a")]
    # Then the instance answers from its cache until KEY_CACHE_SECS have passed, not after
    clock.now += KEY_CACHE_SECS - 1
    assert resolver.tenant_of("mwk_a") == "acme"
    assert table.lookups == 1
    clock.now += 1
    assert resolver.tenant_of("mwk_a") is None
    # And an unknown key is not cached: created a moment later, it works at once
    assert resolver.tenant_of("mwk_b") is None
    table.tenants[hash_key("mwk_b")] = "globex"
    assert resolver.tenant_of("mwk_b") == "globex"


def test_without_a_table_only_configured_keys_work() -> None:
    resolver = KeyResolver({"k": "t"}, None)
    assert resolver.tenant_of("k") == "t"
    assert resolver.tenant_of("mwk_anything") is None


def test_the_default_key_retires_within_the_cache_period_of_the_first_key_created() -> None:
    # Given an empty key table and the local default key, just used
    table, clock = _Table(), _Clock()
    resolver = KeyResolver({}, table, default={"local-dev-key": "local"}, clock=clock)
    assert resolver.tenant_of("local-dev-key") == "local"
    # When a first key is created
    table.add(ApiKeyRecord(key_id="a", key_hash=hash_key("mwk_new"), tenant="acme", created_at=""))
    # Then the default key works at most the cache period longer, the new key at once
    assert resolver.tenant_of("mwk_new") == "acme"
    clock.now += KEY_CACHE_SECS - 1
    assert resolver.tenant_of("local-dev-key") == "local"
    clock.now += 1
    assert resolver.tenant_of("local-dev-key") is None


def test_the_cache_period_setting_defaults_to_the_documented_30_s() -> None:
    # `api_key_cache_secs` (the authorizer's), unless a deployment sets it (docs/api-keys.md)
    assert Settings().api_key_cache_secs == KEY_CACHE_SECS == 30
