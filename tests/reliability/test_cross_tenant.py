"""Tenant B attacks tenant A's data through every route of `memwrite serve` (a real process on
loopback), with A's trace ids, memory ids, user ids and Idempotency-Key: it reads nothing of
A's, changes nothing of A's, and cannot tell A's ids from ids that do not exist (404, never
403). Each read route's own isolation tests are in `tests/integration/test_read_api.py` and
`test_traces.py`; this is the sweep over all of them, kept complete by
`test_every_route_has_a_cross_tenant_attempt`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from functions.routes import ROUTES, Auth
from tests.reliability.final_state import FinalState
from tests.reliability.runs import CONVERSATION, IDEMPOTENCY
from tests.reliability.served import Reply, Served

A, B = "key-a", "key-b"
USER = CONVERSATION["user_id"]
UNKNOWN_ID = "0123456789abcdef0123456789abcdef"
PIPELINE_WAIT_SECS = 30
READ_COUNTERS = {"access_count", "last_accessed"}


@dataclass(frozen=True)
class TenantA:
    """What tenant A has, as A sees it through the API."""

    trace_id: str
    memory_ids: list[str]

    @staticmethod
    def view(served: Served) -> dict[str, Any]:
        """A's memories and what A's search finds (A's own retrieval counters left out)."""
        listed = served.request("GET", f"/v1/users/{USER}/memories", api_key=A).body
        found = served.request("POST", "/v1/search", {"user_id": USER, "query": "Lisbon"}, A)
        return {
            "memories": [
                {k: v for k, v in memory.items() if k not in READ_COUNTERS}
                for memory in listed["memories"]
            ],
            "found": [
                hit.get("memory_id") or hit["source_turn_id"] for hit in found.body["results"]
            ],
        }


def rows_of_tenant_a(state: FinalState) -> list[str]:
    """Every stored row of A's but its read counters (A's own searches bump them, later)."""
    return sorted(
        row
        for table, rows in state.items()
        if table != "memory_access"
        for row in rows
        if '"tenant-a' in row
    )


def outbox_pending(served: Served) -> int:
    """Outbox rows the server's worker has not indexed yet."""
    return sum(1 for row in served.state().get("outbox", []) if json.loads(row)["done"] == 0)


@pytest.fixture(scope="module")
def tenant_a(served: Served) -> TenantA:
    """Tenant A's conversation, through the pipeline and indexed (the server's worker)."""
    posted = served.request("POST", "/v1/turns", CONVERSATION, A, IDEMPOTENCY)
    assert posted.status == 202, posted
    trace_id = posted.body["trace_id"]
    deadline = time.monotonic() + PIPELINE_WAIT_SECS
    while served.request("GET", f"/v1/traces/{trace_id}", api_key=A).body["status"] != "complete":
        assert time.monotonic() < deadline, "the server's worker did not finish"
        time.sleep(0.05)
    # Indexed means every outbox row done (text and HyPE vectors), not just one hit found:
    # a memory becoming searchable during a test would read as a change B made.
    while outbox_pending(served) or not TenantA.view(served)["found"]:
        assert time.monotonic() < deadline, "the server's worker did not index"
        time.sleep(0.05)
    listed = served.request("GET", f"/v1/users/{USER}/memories", api_key=A).body
    return TenantA(trace_id, [memory["memory_id"] for memory in listed["memories"]])


def same_as_unknown(reply: Reply, unknown: Reply, known_id: str) -> None:
    """A's id answers exactly as an id that does not exist (the id itself aside)."""
    assert reply.status == unknown.status == 404
    assert reply.body == {
        key: known_id if value == UNKNOWN_ID else value for key, value in unknown.body.items()
    }


def read_trace(served: Served, a: TenantA) -> None:
    for trace_id in (*near_misses(a.trace_id), f"{a.trace_id}?verbose=1"):
        reply = served.request("GET", f"/v1/traces/{trace_id}", api_key=B)
        unknown = served.request("GET", f"/v1/traces/{UNKNOWN_ID}", api_key=B)
        same_as_unknown(reply, unknown, trace_id.partition("?")[0])


def rollback_trace(served: Served, a: TenantA) -> None:
    # A's trace rolled back by B: B cannot tell it from a trace that does not exist
    unknown = served.request("POST", f"/v1/traces/{UNKNOWN_ID}/rollback", api_key=B)
    for trace_id in near_misses(a.trace_id):
        reply = served.request("POST", f"/v1/traces/{trace_id}/rollback", api_key=B)
        same_as_unknown(reply, unknown, trace_id)


def near_misses(known_id: str) -> list[str]:
    """A's id and ids of the wrong shape made from it: each answers as an unknown id."""
    return [known_id, known_id.upper(), f"{known_id}0", known_id * 70]  # the last > 2 KB


def read_memory(served: Served, a: TenantA) -> None:
    unknown = served.request("GET", f"/v1/memories/{UNKNOWN_ID}", api_key=B)
    for memory_id in [wrong for known in a.memory_ids for wrong in near_misses(known)]:
        same_as_unknown(
            served.request("GET", f"/v1/memories/{memory_id}", api_key=B), unknown, memory_id
        )


def patch_memory(served: Served, a: TenantA) -> None:
    # A's memory pinned or expired by B: B cannot tell it from a memory that does not exist
    body = {"pinned": True, "expires_at": "2020-01-01T00:00:00Z"}
    unknown = served.request("PATCH", f"/v1/memories/{UNKNOWN_ID}", body, B)
    for memory_id in [wrong for known in a.memory_ids for wrong in near_misses(known)]:
        reply = served.request("PATCH", f"/v1/memories/{memory_id}", body, B)
        same_as_unknown(reply, unknown, memory_id)


def delete_memory(served: Served, a: TenantA) -> None:
    # A's memory deleted by B: B cannot tell it from a memory that does not exist
    unknown = served.request("DELETE", f"/v1/memories/{UNKNOWN_ID}", api_key=B)
    for memory_id in [wrong for known in a.memory_ids for wrong in near_misses(known)]:
        reply = served.request("DELETE", f"/v1/memories/{memory_id}", api_key=B)
        same_as_unknown(reply, unknown, memory_id)


def post_memories(served: Served, a: TenantA) -> None:
    # B writing to "its" user of A's user id: B's own memory; A's user sees nothing of it
    body = {"memories": [{"type": "fact", "attribute": "lives_in", "value": "Oslo"}]}
    reply = served.request("POST", f"/v1/users/{USER}/memories", body, B)
    assert reply.status == 202
    assert reply.body["trace_id"] != a.trace_id


def list_memories(served: Served, a: TenantA) -> None:
    reply = served.request("GET", f"/v1/users/{USER}/memories?limit=100", api_key=B)
    assert reply.status == 200
    assert reply.body["memories"] == []


def search(served: Served, a: TenantA) -> None:
    for query in ("Lisbon", "Where does the user live?", "*"):
        body = {"user_id": USER, "query": query, "as_of": "2025-03-01T00:00:00Z"}
        reply = served.request("POST", "/v1/search", body, B)
        assert reply.status == 200
        assert reply.body["results"] == []


def erase_user(served: Served, a: TenantA) -> None:
    reply = served.request("DELETE", f"/v1/users/{USER}/memories", api_key=B)
    assert reply.status == 200
    assert set(reply.body["removed"].values()) == {0}


def post_turns(served: Served, a: TenantA) -> None:
    # A's very request, A's Idempotency-Key: B gets its own trace, its own turns
    reply = served.request("POST", "/v1/turns", CONVERSATION, B, IDEMPOTENCY)
    assert reply.status == 202
    assert reply.body["trace_id"] != a.trace_id
    assert reply.body["duplicates"] == []
    assert reply.body["accepted"] > 0


def replay_trace(served: Served, a: TenantA) -> None:
    unknown = served.request("POST", f"/v1/traces/{UNKNOWN_ID}/replay", {"config": {}}, B)
    for trace_id in near_misses(a.trace_id):
        reply = served.request("POST", f"/v1/traces/{trace_id}/replay", {"config": {}}, B)
        same_as_unknown(reply, unknown, trace_id)


def read_memory_traces(served: Served, a: TenantA) -> None:
    unknown = served.request("GET", f"/v1/memories/{UNKNOWN_ID}/traces", api_key=B)
    for memory_id in [wrong for known in a.memory_ids for wrong in near_misses(known)]:
        reply = served.request("GET", f"/v1/memories/{memory_id}/traces", api_key=B)
        same_as_unknown(reply, unknown, memory_id)


def list_traces(served: Served, a: TenantA) -> None:
    reply = served.request("GET", f"/v1/users/{USER}/traces?limit=50", api_key=B)
    assert reply.status == 200
    assert reply.body["traces"] == []


def replay_user(served: Served, a: TenantA) -> None:
    reply = served.request("POST", f"/v1/users/{USER}/replay", {"config": {}}, B)
    assert reply.status == 200
    assert (reply.body["traces"], reply.body["totals"]["traces"]) == ([], 0)


def export_user(served: Served, a: TenantA) -> None:
    # B's export of A's user id is B's own (empty) user: the header line only
    reply = served.request("GET", f"/v1/users/{USER}/export", api_key=B)
    assert reply.status == 200
    [header] = [json.loads(line) for line in reply.body.splitlines()]
    assert header["kind"] == "header" and header["tenant"] != a_tenant(served)


def a_tenant(served: Served) -> str:
    export = served.request("GET", f"/v1/users/{USER}/export", api_key=A).body
    tenant: str = json.loads(export.splitlines()[0])["tenant"]
    return tenant


def import_user(served: Served, a: TenantA) -> None:
    # A's own export, sent by B: refused (another tenant's data), nothing written anywhere
    export = served.request("GET", f"/v1/users/{USER}/export", api_key=A).body
    ndjson = {"Content-Type": "application/x-ndjson"}
    reply = served.request("POST", f"/v1/users/{USER}/import", export.encode(), B, ndjson)
    assert reply.status == 400
    assert reply.body["errors"][0]["field"] == "header.tenant"


def list_episodes(served: Served, a: TenantA) -> None:
    reply = served.request("GET", f"/v1/users/{USER}/episodes?limit=100", api_key=B)
    assert reply.status == 200
    assert reply.body["episodes"] == []


def backfill_user(served: Served, a: TenantA) -> None:
    # A's user is unknown to B: a 404 naming the field, and nothing is run
    reply = served.request("POST", f"/v1/users/{USER}/backfill", {}, B)
    assert reply.status == 404
    assert [error["field"] for error in reply.body["errors"]] == ["user_id"]


def read_settings(served: Served, a: TenantA) -> None:
    # B reads its own settings (none stored), whatever A stored (see put_settings)
    reply = served.request("GET", "/v1/settings", api_key=B)
    assert reply.status == 200
    assert (reply.body["extraction"], reply.body["min_words"]) == (None, None)


def read_usage(served: Served, a: TenantA) -> None:
    # B's usage is B's own, whatever the query names (a tenant is the credential's)
    of_a = served.request("GET", "/v1/usage", api_key=A).body
    own = served.request("GET", "/v1/usage", api_key=B)
    naming_a = served.request("GET", f"/v1/usage?tenant={of_a['tenant']}", api_key=B)
    assert own.status == naming_a.status == 200
    assert own.body["tenant"] == naming_a.body["tenant"] != of_a["tenant"]
    assert served.request("GET", "/v1/usage", api_key=A).body == of_a


def put_settings(served: Served, a: TenantA) -> None:
    # B's settings, even naming A's topics, are B's only: A reads none of them
    body = {"extraction": {"exclude_topics": ["location"]}, "min_words": 50}
    assert served.request("PUT", "/v1/settings", body, B).status == 200
    seen_by_a = served.request("GET", "/v1/settings", api_key=A)
    assert (seen_by_a.body["extraction"], seen_by_a.body["min_words"]) == (None, None)
    assert served.request("PUT", "/v1/settings", {}, B).status == 200


ATTEMPTS: dict[tuple[str, str], Callable[[Served, TenantA], None]] = {
    ("GET", "/v1/settings"): read_settings,
    ("PUT", "/v1/settings"): put_settings,
    ("GET", "/v1/users/{user_id}/export"): export_user,
    ("POST", "/v1/users/{user_id}/import"): import_user,
    ("GET", "/v1/traces/{trace_id}"): read_trace,
    ("POST", "/v1/traces/{trace_id}/replay"): replay_trace,
    ("POST", "/v1/traces/{trace_id}/rollback"): rollback_trace,
    ("GET", "/v1/memories/{memory_id}"): read_memory,
    ("GET", "/v1/memories/{memory_id}/traces"): read_memory_traces,
    ("PATCH", "/v1/memories/{memory_id}"): patch_memory,
    ("DELETE", "/v1/memories/{memory_id}"): delete_memory,
    ("GET", "/v1/users/{user_id}/memories"): list_memories,
    ("GET", "/v1/users/{user_id}/traces"): list_traces,
    ("POST", "/v1/users/{user_id}/replay"): replay_user,
    ("GET", "/v1/users/{user_id}/episodes"): list_episodes,
    ("POST", "/v1/users/{user_id}/backfill"): backfill_user,
    ("POST", "/v1/search"): search,
    ("DELETE", "/v1/users/{user_id}/memories"): erase_user,
    ("POST", "/v1/turns"): post_turns,
    ("POST", "/v1/users/{user_id}/memories"): post_memories,
    ("GET", "/v1/usage"): read_usage,
}


def test_every_route_has_a_cross_tenant_attempt() -> None:
    # (The OpenAPI document is public and the same for every caller: no tenant to cross.)
    routes = {(r.method, r.path) for r in ROUTES if r.auth is Auth.API_KEY}
    missing = routes - set(ATTEMPTS)
    assert not missing, f"add a cross-tenant attempt to {__name__}.ATTEMPTS for {missing}"


@pytest.mark.parametrize("route", ATTEMPTS, ids=[f"{m} {p}" for m, p in ATTEMPTS])
def test_another_tenant_reads_and_changes_nothing(
    served: Served, tenant_a: TenantA, route: tuple[str, str]
) -> None:
    # Given tenant A's memories, indexed, and what A sees of them
    seen_by_a, rows_of_a = TenantA.view(served), rows_of_tenant_a(served.state())
    # When tenant B tries the route with A's ids / Then B learns nothing (asserted per route)
    ATTEMPTS[route](served, tenant_a)
    # And A's data is exactly as it was, as A sees it and as it is stored
    assert TenantA.view(served) == seen_by_a
    assert rows_of_tenant_a(served.state()) == rows_of_a
