"""The read API through the real handlers: search, memories, pagination, tenant isolation and
erasure, after the local runner has run the pipeline and the outbox consumer; on both backends
(moto and the embedded SQLite)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import functions.api.handler as api_handler
from tests.integration.conftest import Local, MakeLocal

USER = "dana"
MOVES = [
    {"role": "user", "content": "I live in Berlin.", "timestamp": "2025-01-05T10:00:00Z"},
    {"role": "user", "content": "I work at SAP.", "timestamp": "2025-01-05T10:01:00Z"},
    {"role": "user", "content": "I am allergic to peanuts.", "timestamp": "2025-01-05T10:02:00Z"},
    {"role": "user", "content": "I moved to Lisbon.", "timestamp": "2025-06-01T09:00:00Z"},
]


@pytest.fixture(params=["moto", "sqlite"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def local(make_local: MakeLocal, backend: str) -> Local:
    return make_local(backend=backend)


@pytest.fixture
def two_tenants(make_local: MakeLocal, backend: str) -> Local:
    return make_local(api_keys={"key-a": "tenant-a", "key-b": "tenant-b"}, backend=backend)


def ingest(local: Local, api_key: str, turns: list[dict[str, Any]], user: str = USER) -> None:
    body = {"session_id": "s-1", "user_id": user, "turns": turns}
    assert local.post_turns(body, api_key=api_key).status == 202
    report = local.runner.drain()
    assert report.failed == {} and report.index_failed == {}


def search(local: Local, api_key: str, query: str, **extra: Any) -> Any:
    body = {"user_id": USER, "query": query, "k": 5, **extra}
    return local.runner.call("POST", "/v1/search", body, api_key=api_key)


def texts(response: Any) -> list[str]:
    assert response.status == 200, response.body
    return [hit["text"] for hit in response.body["results"]]


def test_search_finds_paraphrases_says_why_and_leaves_out_superseded(two_tenants: Local) -> None:
    # Given Dana's move from Berlin to Lisbon, ingested and indexed
    ingest(two_tenants, "key-a", MOVES)

    # When the agent asks where she is based, in words none of her turns used
    response = search(two_tenants, "key-a", "Which city is she based in?")

    # Then the current city comes first, found through a HyPE question, with its source turn
    hit = response.body["results"][0]
    assert hit["text"] == "The user lives in Lisbon."
    assert "question" in hit["matched"]
    assert len(hit["source_turn_id"]) == 32
    # And the superseded Berlin memory is not among the results
    assert "The user lives in Berlin." not in texts(response)
    # And a word search matches by BM25
    peanuts = search(two_tenants, "key-a", "peanuts")
    assert peanuts.body["results"][0]["text"] == "The user is allergic to peanuts."
    assert "bm25" in peanuts.body["results"][0]["matched"]


def test_as_of_returns_the_belief_state_at_that_time(two_tenants: Local) -> None:
    ingest(two_tenants, "key-a", MOVES)

    # When the search asks what was believed in March, before the move
    march = search(two_tenants, "key-a", "Where does the user live?", as_of="2025-03-01T00:00:00Z")

    # Then Berlin, not Lisbon
    assert "The user lives in Berlin." in texts(march)
    assert "The user lives in Lisbon." not in texts(march)


def test_another_tenant_never_sees_these_memories_even_with_the_same_user_id(
    two_tenants: Local,
) -> None:
    # Given tenant B's user "dana" and tenant A's user "dana"
    ingest(two_tenants, "key-b", [MOVES[1]])
    ingest(two_tenants, "key-a", [MOVES[0]])

    # When tenant A searches, lists and reads by id
    found = search(two_tenants, "key-a", "SAP work employer")
    listed = two_tenants.runner.call("GET", f"/v1/users/{USER}/memories", api_key="key-a")
    b_list = two_tenants.runner.call("GET", f"/v1/users/{USER}/memories", api_key="key-b")
    b_memory_id = b_list.body["memories"][0]["memory_id"]
    by_id = two_tenants.runner.call("GET", f"/v1/memories/{b_memory_id}", api_key="key-a")

    # Then nothing of tenant B comes back
    assert "The user works at SAP." not in texts(found)
    assert [m["text"] for m in listed.body["memories"]] == ["The user lives in Berlin."]
    assert by_id.status == 404
    # And tenant A erasing "dana" leaves tenant B's dana untouched
    two_tenants.runner.call("DELETE", f"/v1/users/{USER}/memories", api_key="key-a")
    assert texts(search(two_tenants, "key-b", "SAP")) == ["The user works at SAP."]


def test_erase_leaves_no_text_of_the_user_anywhere_and_is_idempotent(local: Local) -> None:
    # Given a user with memories, traces, spans, session turns and index documents
    ingest(local, local.api_key, MOVES)
    ingest(local, local.api_key, [MOVES[1]], user="someone-else")
    assert texts(search(local, local.api_key, "Lisbon"))

    # When the user is erased
    erased = local.runner.call("DELETE", f"/v1/users/{USER}/memories")

    # Then a search right after finds nothing, and no table holds their words
    assert erased.status == 200
    assert erased.body["removed"]["memories"] > 0
    assert erased.body["removed"]["index_documents"] > 0
    assert texts(search(local, local.api_key, "Lisbon")) == []
    for word in ("Lisbon", "Berlin", "peanuts"):
        assert word not in local.stored_text(), word
    # And once the erasure's announcement (user.erased) is out, not even their id
    assert local.runner.drain().index_failed == {}
    everything = local.stored_text()
    for word in (f"#{USER}", f'"{USER}"'):
        assert word not in everything, word
    _, hype_deps = local.runner._stream[0].deps()
    assert hype_deps.index.count(local.tenant, USER) == 0
    # And the other user of the tenant keeps their memory
    other = local.runner.call("GET", "/v1/users/someone-else/memories")
    assert [m["text"] for m in other.body["memories"]] == ["The user works at SAP."]
    # And erasing again is a no-op
    again = local.runner.call("DELETE", f"/v1/users/{USER}/memories")
    assert again.status == 200
    assert set(again.body["removed"].values()) == {0}


def test_memories_page_by_page_each_once(local: Local) -> None:
    ingest(local, local.api_key, MOVES)
    seen: list[str] = []
    cursor = None
    while True:
        path = f"/v1/users/{USER}/memories?limit=2" + (f"&cursor={cursor}" if cursor else "")
        page = local.runner.call("GET", path)
        assert page.status == 200
        assert len(page.body["memories"]) <= 2
        seen.extend(m["memory_id"] for m in page.body["memories"])
        cursor = page.body["next_cursor"]
        if cursor is None:
            break
    all_at_once = local.runner.call("GET", f"/v1/users/{USER}/memories?limit=100")
    assert sorted(seen) == sorted(m["memory_id"] for m in all_at_once.body["memories"])
    assert len(seen) == len(set(seen)) == 4  # Berlin (superseded), SAP, peanuts, Lisbon


def test_a_memory_comes_with_its_supersession_chain_and_retrievals_are_counted(
    local: Local,
) -> None:
    ingest(local, local.api_key, MOVES)
    lisbon = search(local, local.api_key, "Lisbon").body["results"][0]
    api_handler.ACCESS_UPDATES.submit(lambda: None).result()  # the counters' thread is done

    detail = local.runner.call("GET", f"/v1/memories/{lisbon['memory_id']}")

    assert detail.status == 200
    assert [m["value"] for m in detail.body["chain"]] == ["Berlin", "Lisbon"]
    assert detail.body["chain"][0]["superseded_by"] == lisbon["memory_id"]
    assert detail.body["access_count"] == 1
    assert detail.body["last_accessed"] is not None


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"user_id": USER, "query": "x", "tiers": ["quarantine"]}, "tiers"),
        ({"user_id": USER, "query": "x", "k": 0}, "k"),
        ({"user_id": USER, "query": ""}, "query"),
        ({"user_id": USER, "query": "x", "min_confidence": 2}, "min_confidence"),
        ({"query": "x"}, "user_id"),
        ({"user_id": USER, "query": "x", "tenant": "other"}, "tenant"),
    ],
)
def test_bad_search_requests_are_400_naming_the_field(
    local: Local, body: dict[str, Any], field: str
) -> None:
    response = local.runner.call("POST", "/v1/search", body)
    assert response.status == 400
    assert field in [error["field"] for error in response.body["errors"]]


@pytest.mark.parametrize(
    ("path", "field"),
    [
        (f"/v1/users/{USER}/memories?limit=0", "limit"),
        (f"/v1/users/{USER}/memories?limit=abc", "limit"),
        (f"/v1/users/{USER}/memories?cursor=not-a-cursor", "cursor"),
    ],
)
def test_bad_listing_requests_are_400_naming_the_field(local: Local, path: str, field: str) -> None:
    response = local.runner.call("GET", path)
    assert response.status == 400
    assert [error["field"] for error in response.body["errors"]] == [field]


def test_read_routes_need_a_credential(local: Local, make_body: Callable[..., Any]) -> None:
    response = local.runner.call(
        "POST", "/v1/search", {"user_id": USER, "query": "x"}, api_key=None
    )
    assert response.status == 401
