"""The `ApiKeyStore` contract, run against both implementations: DynamoDB (moto) and SQLite.
Only hashes are stored; `list` and `revoke` work by the public key id."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import asdict

import boto3
import pytest

from memwrite.adapters.aws.dynamodb_api_keys import DynamoApiKeyStore
from memwrite.adapters.sqlite.api_keys import SqliteApiKeyStore
from memwrite.adapters.sqlite.database import SqliteDatabase
from memwrite.auth.api_keys import KEY_PREFIX, create_key, hash_key
from memwrite.errors import ApiKeyExists
from memwrite.ports import ApiKeyRecord, ApiKeyStore
from memwrite_local.runtime.aws import LocalAws

_ids = itertools.count()


@pytest.fixture(params=["moto", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path_factory) -> Iterator[ApiKeyStore]:
    if request.param == "sqlite":
        yield SqliteApiKeyStore(SqliteDatabase(tmp_path_factory.mktemp("keys")))
        return
    with LocalAws() as aws:
        assert aws.resources is not None
        yield DynamoApiKeyStore(boto3.client("dynamodb"), aws.resources.table_names["api_keys"])


def record(tenant: str, day: int = 1) -> ApiKeyRecord:
    n = next(_ids)
    return ApiKeyRecord(
        key_id=f"{n:012x}",
        key_hash=hash_key(f"key-{n}"),
        tenant=tenant,
        created_at=f"2026-03-{day:02d}T09:00:00+00:00",
    )


def test_a_key_is_found_by_its_hash_only(store: ApiKeyStore) -> None:
    # Given a key created for tenant acme
    issued = create_key(store, "acme")
    # Then its hash names the tenant; the key itself, and any other hash, name nothing
    assert issued.key.startswith(KEY_PREFIX) and len(issued.key) >= len(KEY_PREFIX) + 43
    assert store.tenant_of(hash_key(issued.key)) == "acme"
    assert store.tenant_of(issued.key) is None
    assert store.tenant_of(hash_key(issued.key + "x")) is None
    # And what is stored never contains the key
    assert all(issued.key not in str(asdict(r)) for r in store.list_keys())


def test_a_hash_or_an_id_is_stored_once(store: ApiKeyStore) -> None:
    # Given a stored key
    first = record("acme")
    store.add(first)
    # When another record comes with the same hash, or with the same id
    for clash in (
        ApiKeyRecord("f" * 12, first.key_hash, "other", first.created_at),
        ApiKeyRecord(first.key_id, hash_key("another"), "other", first.created_at),
    ):
        # Then it is refused, and the first key still names its tenant
        with pytest.raises(ApiKeyExists):
            store.add(clash)
    assert store.tenant_of(first.key_hash) == "acme"
    assert store.tenant_of(hash_key("another")) is None


def test_keys_are_listed_oldest_first_and_by_tenant(store: ApiKeyStore) -> None:
    # Given keys of two tenants created on different days
    later, earlier, other = record("acme", day=3), record("acme", day=1), record("globex", day=2)
    for r in (later, earlier, other):
        store.add(r)
    # Then the list is in creation order, and a tenant's list has only its keys
    assert store.list_keys() == [earlier, other, later]
    assert store.list_keys("acme") == [earlier, later]
    assert store.list_keys("nobody") == []


def test_a_revoked_key_names_no_tenant(store: ApiKeyStore) -> None:
    # Given two keys of one tenant
    kept, revoked = record("acme"), record("acme")
    store.add(kept)
    store.add(revoked)
    # When one is revoked by its id
    assert store.revoke(revoked.key_id) == revoked
    # Then it names no tenant and is not listed, the other still works; a second revoke finds
    # nothing
    assert store.tenant_of(revoked.key_hash) is None
    assert store.list_keys() == [kept]
    assert store.tenant_of(kept.key_hash) == "acme"
    assert store.revoke(revoked.key_id) is None


def test_a_tenant_sharing_a_prefix_with_another_lists_its_own_keys_only(
    store: ApiKeyStore,
) -> None:
    # Given keys of "acme" and of "acme#eu" (tenants may hold "#"), over several days
    acme = [record("acme", day) for day in (3, 1, 2)]
    other = record("acme#eu", 1)
    for stored in [*acme, other]:
        store.add(stored)
    # When acme's keys are listed
    listed = store.list_keys("acme")
    # Then exactly acme's, oldest first; and every key when no tenant is named
    assert listed == sorted(acme, key=lambda r: r.created_at)
    assert {r.key_id for r in store.list_keys()} >= {r.key_id for r in [*acme, other]}
