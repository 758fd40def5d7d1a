"""Pins and expiry (`PATCH /v1/memories/{memory_id}`) through the real handlers, after the local
runner has run the pipeline and the outbox consumer; on both backends (moto and SQLite). A pinned
memory outlives inferred ones; the user's explicit correction in conversation replaces it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.conftest import Local, MakeLocal

USER = "dana"
BERLIN = {"role": "user", "content": "I live in Berlin.", "timestamp": "2025-01-05T10:00:00Z"}
LISBON = {"role": "user", "content": "I moved to Lisbon.", "timestamp": "2025-06-01T09:00:00Z"}
PEANUTS = {
    "role": "user",
    "content": "I am allergic to peanuts.",
    "timestamp": "2025-01-05T10:02:00Z",
}


@pytest.fixture(params=["moto", "sqlite"])
def local(make_local: MakeLocal, request: pytest.FixtureRequest) -> Local:
    return make_local(api_keys={"key-a": "tenant-a", "key-b": "tenant-b"}, backend=request.param)


def ingest(local: Local, turns: list[dict[str, Any]], api_key: str = "key-a") -> str:
    body = {"session_id": "s-1", "user_id": USER, "turns": turns}
    accepted = local.post_turns(body, api_key=api_key)
    assert accepted.status == 202
    report = local.runner.drain()
    assert report.failed == {} and report.index_failed == {}
    return str(accepted.body["trace_id"])


def memories(local: Local, api_key: str = "key-a") -> dict[str, dict[str, Any]]:
    listed = local.runner.call("GET", f"/v1/users/{USER}/memories", api_key=api_key)
    assert listed.status == 200, listed.body
    return {m["text"]: m for m in listed.body["memories"]}


def patch(local: Local, memory_id: str, body: Any, api_key: str = "key-a") -> Any:
    return local.runner.call("PATCH", f"/v1/memories/{memory_id}", body, api_key=api_key)


def search(local: Local, query: str) -> list[str]:
    body = {"user_id": USER, "query": query, "k": 5}
    found = local.runner.call("POST", "/v1/search", body, api_key="key-a")
    assert found.status == 200, found.body
    return [hit["text"] for hit in found.body["results"]]


def test_a_pinned_memory_is_not_superseded_by_an_inferred_one(local: Local) -> None:
    # Given Dana's city, pinned
    ingest(local, [BERLIN])
    berlin = memories(local)["The user lives in Berlin."]
    pinned = patch(local, berlin["memory_id"], {"pinned": True})
    assert pinned.status == 200, pinned.body
    assert pinned.body["pinned"] is True
    assert pinned.body["expires_at"] is None

    # When a later turn says she moved
    trace_id = ingest(local, [LISBON])

    # Then Berlin stays current and Lisbon is kept beside it as challenged, with the reason
    listed = memories(local)
    assert listed["The user lives in Berlin."]["superseded_by"] is None
    assert listed["The user lives in Lisbon."]["tier"] == "challenged"
    trace = local.runner.call("GET", f"/v1/traces/{trace_id}", api_key="key-a")
    reasons = [span["reason"] for span in trace.body["spans"] if span.get("reason")]
    assert {"type": "PinnedMemory", "memory_id": berlin["memory_id"]} in reasons

    # And unpinning lets the newer fact take over at once
    unpinned = patch(local, berlin["memory_id"], {"pinned": False})
    assert unpinned.status == 200
    assert unpinned.body["superseded_by"] == listed["The user lives in Lisbon."]["memory_id"]
    assert memories(local)["The user lives in Lisbon."]["tier"] != "challenged"
    assert "The user lives in Lisbon." in search(local, "Lisbon")


def conflict_reasons(local: Local, trace_id: str) -> list[dict[str, Any]]:
    trace = local.runner.call("GET", f"/v1/traces/{trace_id}", api_key="key-a")
    assert trace.status == 200, trace.body
    return [s["reason"] for s in trace.body["spans"] if s["stage"] == "conflict" and s["reason"]]


def test_an_explicit_correction_replaces_a_pinned_memory_a_plain_statement_does_not(
    local: Local,
) -> None:
    # Given Dana's city, pinned
    ingest(local, [BERLIN])
    berlin = memories(local)["The user lives in Berlin."]
    assert patch(local, berlin["memory_id"], {"pinned": True}).status == 200

    # When a later turn states another city plainly
    plain = ingest(local, [LISBON])

    # Then it is challenged beside the pin, which stays current
    listed = memories(local)
    assert listed["The user lives in Lisbon."]["tier"] == "challenged"
    assert listed["The user lives in Berlin."]["superseded_by"] is None
    assert conflict_reasons(local, plain) == [
        {"type": "PinnedMemory", "memory_id": berlin["memory_id"]}
    ]

    # When a later turn corrects it explicitly
    fixed = {
        "role": "user",
        "content": "Sorry, I misspoke earlier: I live in Leipzig.",
        "timestamp": "2025-06-02T09:00:00Z",
    }
    corrected = ingest(local, [fixed])

    # Then the correction replaces the pinned memory, with the ordinary reason
    listed = memories(local)
    leipzig = listed["The user lives in Leipzig."]
    assert leipzig["superseded_by"] is None and leipzig["tier"] != "challenged"
    assert listed["The user lives in Berlin."]["superseded_by"] == leipzig["memory_id"]
    assert listed["The user lives in Berlin."]["pinned"] is True
    assert conflict_reasons(local, corrected) == [{"type": "Supersedes", "count": 1}]
    assert "The user lives in Leipzig." in search(local, "Leipzig")

    # And pinning Berlin again (its row re-derived) does not undo the correction
    again = patch(local, berlin["memory_id"], {"pinned": True})
    assert again.status == 200 and again.body["superseded_by"] == leipzig["memory_id"]
    assert memories(local)["The user lives in Leipzig."]["superseded_by"] is None


def test_an_expired_memory_leaves_search_and_the_list_but_stays_readable(local: Local) -> None:
    # Given two memories, both found by search
    ingest(local, [BERLIN, PEANUTS])
    peanuts = memories(local)["The user is allergic to peanuts."]
    assert "The user is allergic to peanuts." in search(local, "peanuts")

    # When one gets an expiry in the past (naive: UTC)
    expired = patch(local, peanuts["memory_id"], {"expires_at": "2025-02-01T00:00:00"})
    local.runner.drain()

    # Then it leaves search and the list, and is still readable by id
    assert expired.status == 200, expired.body
    assert expired.body["expires_at"] == "2025-02-01T00:00:00+00:00"
    assert "The user is allergic to peanuts." not in search(local, "peanuts")
    assert list(memories(local)) == ["The user lives in Berlin."]
    by_id = local.runner.call("GET", f"/v1/memories/{peanuts['memory_id']}", api_key="key-a")
    assert by_id.status == 200
    assert by_id.body["expires_at"] == "2025-02-01T00:00:00+00:00"

    # And clearing the expiry brings it back, once stage 7 has indexed it again
    cleared = patch(local, peanuts["memory_id"], {"expires_at": None})
    assert cleared.status == 200 and cleared.body["expires_at"] is None
    local.runner.drain()
    assert "The user is allergic to peanuts." in search(local, "peanuts")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"pinned": "maybe"}, "pinned"),
        ({"pinned": None}, "pinned"),
        ({"pinned": "yes"}, "pinned"),
        ({"expires_at": "next tuesday"}, "expires_at"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_bad_patches_are_400_naming_the_field(local: Local, body: Any, field: str) -> None:
    ingest(local, [BERLIN])
    memory_id = memories(local)["The user lives in Berlin."]["memory_id"]

    response = patch(local, memory_id, body)

    assert response.status == 400, response.body
    assert field in {error["field"] for error in response.body["errors"]}, response.body


def test_an_empty_patch_is_400(local: Local) -> None:
    ingest(local, [BERLIN])
    memory_id = memories(local)["The user lives in Berlin."]["memory_id"]

    assert patch(local, memory_id, {}).status == 400


def test_unknown_or_another_tenants_memory_is_404(local: Local) -> None:
    # Given a memory of tenant B
    ingest(local, [BERLIN], api_key="key-b")
    theirs = memories(local, api_key="key-b")["The user lives in Berlin."]["memory_id"]

    # When tenant A patches it, or an id that names nothing
    other = patch(local, theirs, {"pinned": True})
    unknown = patch(local, "0" * 32, {"pinned": True})
    shapeless = patch(local, "not-an-id", {"pinned": True})

    # Then 404, and tenant B's memory is unchanged
    assert (other.status, unknown.status, shapeless.status) == (404, 404, 404)
    assert memories(local, api_key="key-b")["The user lives in Berlin."]["pinned"] is False
