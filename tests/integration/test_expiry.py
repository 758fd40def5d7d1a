"""A user expiry that passes after its PATCH: the expiry sweep (`memwrite.expiry`) commits a new
rev with its outbox row, and stage 7 takes the memory out of the index and sends
`memory.expired` to the tenant's webhook (a real receiver on 127.0.0.1); on both backends. The
sweep's clock is injected: "later" is a `now` handed to it, never a sleep."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest

from memwrite.expiry import ExpiryDeps, ExpirySweep, sweep_expiries
from memwrite.feed.delivery import MAX_RETRY_SECS
from memwrite.ids import content_hash
from memwrite.ports import MemoryStore
from memwrite.records.store import Commit, VersionedMemory
from memwrite.wiring import build_expiry_deps, build_memory_store
from tests.integration.conftest import Local, MakeLocal
from tests.integration.webhook_receiver import Receiver

USER = "dana"
TENANT = "tenant-a"
LISBON = {"role": "user", "content": "I live in Lisbon.", "timestamp": "2025-06-01T09:00:00Z"}
NOW = datetime.now(UTC)


@pytest.fixture(params=["moto", "sqlite"])
def local(request: pytest.FixtureRequest, make_local: MakeLocal, receiver: Receiver) -> Local:
    """A tenant whose webhook takes `memory.expired` only, and Dana's city stored and indexed."""
    local = make_local(api_keys={"key-a": TENANT}, backend=request.param)
    hook = {"url": receiver.url, "secret": "expiry-secret-0123456789", "events": ["memory.expired"]}
    stored = local.runner.call("PUT", "/v1/settings", {"webhooks": [hook]}, api_key="key-a")
    assert stored.status == 200, stored.body
    body = {"session_id": "s-1", "user_id": USER, "turns": [LISBON]}
    assert local.post_turns(body, api_key="key-a").status == 202
    drain(local)
    return local


def drain(local: Local) -> None:
    report = local.runner.drain()
    assert report.failed == {} and report.index_failed == {}


def lisbon_id(local: Local) -> str:
    listed = local.runner.call("GET", f"/v1/users/{USER}/memories", api_key="key-a")
    [memory] = listed.body["memories"]
    return str(memory["memory_id"])


def expire_at(local: Local, memory_id: str, at: datetime | None) -> None:
    body = {"expires_at": at.isoformat() if at else None}
    patched = local.runner.call("PATCH", f"/v1/memories/{memory_id}", body, api_key="key-a")
    assert patched.status == 200, patched.body
    drain(local)  # the patch's own row (memory.updated: not subscribed)


def sweep(at: datetime) -> ExpirySweep:
    return sweep_expiries(at, build_expiry_deps())


def found(local: Local, query: str = "Lisbon") -> bool:
    body = {"user_id": USER, "query": query, "k": 5}
    result = local.runner.call("POST", "/v1/search", body, api_key="key-a")
    assert result.status == 200, result.body
    return bool(result.body["results"])


def rev_of(memory_id: str) -> int:
    return build_memory_store().get_memories(TENANT, USER, [memory_id])[memory_id].rev


def expired_events(receiver: Receiver) -> list[dict[str, Any]]:
    return [event for event in receiver.accepted if event["type"] == "memory.expired"]


def test_a_passed_expiry_is_announced_once_out_of_the_index_with_memory_expired(
    local: Local, receiver: Receiver
) -> None:
    # Given Dana's city set to expire tomorrow
    memory_id = lisbon_id(local)
    expire_at(local, memory_id, NOW + timedelta(days=1))
    before = rev_of(memory_id)

    # When the sweep runs before it passes / Then nothing is due, nothing written or sent
    assert sweep(NOW) == ExpirySweep()
    assert rev_of(memory_id) == before
    assert found(local)

    # When it runs after the expiry passed
    report = sweep(NOW + timedelta(days=2))

    # Then one new rev is committed, and stage 7 sends memory.expired under that rev's id
    assert report.announced == [memory_id]
    assert rev_of(memory_id) == before + 1
    drain(local)
    [event] = receiver.accepted
    assert event["type"] == "memory.expired"
    assert (event["tenant"], event["user_id"], event["memory_id"]) == (TENANT, USER, memory_id)
    assert event["event_id"] == content_hash("event", TENANT, USER, memory_id, str(before + 1))
    # And its document left the index (search filters by the real clock: it is not past it)
    assert not found(local)
    # And it stays readable by id
    by_id = local.runner.call("GET", f"/v1/memories/{memory_id}", api_key="key-a")
    assert by_id.status == 200

    # When the sweep runs again / Then nothing is due any more: no rev, no second event
    assert sweep(NOW + timedelta(days=3)) == ExpirySweep()
    drain(local)
    assert rev_of(memory_id) == before + 1
    assert len(receiver.accepted) == 1


def test_an_expiry_cleared_or_moved_before_it_passes_is_not_announced_then(
    local: Local, receiver: Receiver
) -> None:
    # Given an expiry set for tomorrow, then cleared
    memory_id = lisbon_id(local)
    expire_at(local, memory_id, NOW + timedelta(days=1))
    expire_at(local, memory_id, None)

    # When the sweep runs after tomorrow / Then nothing is due: no rev, no event, still indexed
    before = rev_of(memory_id)
    assert sweep(NOW + timedelta(days=2)) == ExpirySweep()
    drain(local)
    assert rev_of(memory_id) == before and not receiver.accepted and found(local)

    # Given a new expiry, then moved later
    expire_at(local, memory_id, NOW + timedelta(days=1))
    expire_at(local, memory_id, NOW + timedelta(days=5))

    # When the sweep runs between the two / Then nothing; after the moved one: announced once
    assert sweep(NOW + timedelta(days=2)).announced == []
    assert sweep(NOW + timedelta(days=6)).announced == [memory_id]
    drain(local)
    assert [e["memory_id"] for e in expired_events(receiver)] == [memory_id]


def test_a_patch_to_a_time_already_past_is_its_own_announcement(
    local: Local, receiver: Receiver
) -> None:
    # Given an expiry set to a time that has passed
    memory_id = lisbon_id(local)
    expire_at(local, memory_id, NOW - timedelta(hours=1))

    # Then the patch's own row was memory.expired, and the sweep finds nothing to add
    [event] = receiver.accepted
    assert event["type"] == "memory.expired"
    assert event["event_id"] == content_hash(
        "event", TENANT, USER, memory_id, str(rev_of(memory_id))
    )
    assert sweep(NOW + timedelta(days=1)) == ExpirySweep()
    assert not found(local)


@pytest.mark.parametrize("local", ["sqlite"], indirect=True)  # the lane's clock is SQLite's
def test_a_retried_expiry_event_keeps_its_event_id(local: Local, receiver: Receiver) -> None:
    # Given an expiry that passed and was swept, and a receiver failing five times
    memory_id = lisbon_id(local)
    expire_at(local, memory_id, NOW + timedelta(days=1))
    assert sweep(NOW + timedelta(days=2)).announced == [memory_id]
    receiver.fail_first = 5

    # When the outbox is drained and the delivery lane retries as its backoff comes due
    drain(local)
    for later in range(1, 6):
        local.runner.deliver_webhooks(now=time.time() + later * MAX_RETRY_SECS)

    # Then every attempt, the first and each retry, carried the same event id
    assert len(receiver.requests) == 6
    ids = {headers["X-Memwrite-Event-Id"] for headers, _ in receiver.requests}
    assert ids == {content_hash("event", TENANT, USER, memory_id, str(rev_of(memory_id)))}
    assert len(receiver.accepted) == 1


def test_erase_and_import_keep_the_due_expiries_right(local: Local, receiver: Receiver) -> None:
    # Given an expiry set for tomorrow, the user exported, then erased
    memory_id = lisbon_id(local)
    expire_at(local, memory_id, NOW + timedelta(days=1))
    exported = local.runner.call("GET", f"/v1/users/{USER}/export", api_key="key-a").text
    erased = local.runner.call("DELETE", f"/v1/users/{USER}/memories", api_key="key-a")
    assert erased.status == 200, erased.body

    # Then nothing of theirs is due any more
    deps = build_expiry_deps()
    assert deps.finder.due(NOW + timedelta(days=2), 10) == []

    # When the export is imported / Then the expiry is due again and announced once it passed
    headers = {"Content-Type": "application/x-ndjson"}
    imported = local.runner.call(
        "POST", f"/v1/users/{USER}/import", exported, headers=headers, api_key="key-a"
    )
    assert imported.status == 200, imported.body
    drain(local)
    assert [d.memory_id for d in deps.finder.due(NOW + timedelta(days=2), 10)] == [memory_id]
    assert sweep(NOW + timedelta(days=2)).announced == [memory_id]
    drain(local)
    assert [e["memory_id"] for e in expired_events(receiver)] == [memory_id]


class _Racing:
    """The store, with another writer's change landing between the sweep's read and commit."""

    def __init__(self, store: MemoryStore, race: Callable[[], None]) -> None:
        self._store, self._race = store, race

    def get_memories(
        self, tenant: str, user_id: str, ids: Sequence[str]
    ) -> dict[str, VersionedMemory]:
        found = self._store.get_memories(tenant, user_id, ids)
        self._race()
        return found

    def commit(self, commit: Commit) -> None:
        self._store.commit(commit)


def test_a_sweep_that_loses_a_race_writes_nothing_and_the_next_announces(
    local: Local, receiver: Receiver
) -> None:
    # Given a passed expiry, and a pin patched in between the sweep's read and its commit
    memory_id = lisbon_id(local)
    expire_at(local, memory_id, NOW + timedelta(days=1))
    pin = {"pinned": True}
    deps = build_expiry_deps()
    racing = _Racing(
        deps.store,
        lambda: local.runner.call("PATCH", f"/v1/memories/{memory_id}", pin, api_key="key-a"),
    )

    # When the sweep runs / Then its commit is refused whole: the pin stands, nothing announced
    # (the sweep calls only these two of the store's methods)
    lost = sweep_expiries(
        NOW + timedelta(days=2), ExpiryDeps(deps.finder, cast(MemoryStore, racing))
    )
    assert (lost.announced, lost.conflicts) == ([], 1)
    stored = build_memory_store().get_memories(TENANT, USER, [memory_id])[memory_id].memory
    assert stored.pinned and not stored.expiry_announced

    # When the pin's row has reached stage 7 and the next sweep runs / Then it announces it,
    # pinned as it now is, once
    drain(local)
    assert sweep(NOW + timedelta(days=2)).announced == [memory_id]
    drain(local)
    assert [e["memory_id"] for e in expired_events(receiver)] == [memory_id]
