"""`memwrite.client` against a live `memwrite serve` (a real process over a real socket): the
whole agent loop, pagination, idempotent retries, and one typed exception per refusal."""

from __future__ import annotations

import asyncio
import uuid
from datetime import date
from typing import Any

import httpx
import pytest

from memwrite.client import (
    AsyncMemwriteClient,
    InvalidRequest,
    MemwriteClient,
    NotFound,
    RetryPolicy,
    ServiceUnreachable,
    Unauthenticated,
)
from tests.client.conftest import API_KEY, OTHER_KEY
from tests.serve_process import ServeProcess

TURNS = [
    {"role": "user", "content": "I live in Berlin with my partner Alex and our dog Pixel."},
    {"role": "user", "content": "I work as a nurse at the Charité hospital."},
    {"role": "user", "content": "I prefer tea over coffee in the morning."},
]


def user() -> str:
    return f"dana-{uuid.uuid4().hex[:8]}"


def test_an_agent_stores_waits_and_recalls_through_the_client(serve: ServeProcess) -> None:
    dana = user()
    with MemwriteClient(serve.base_url, api_key=API_KEY) as mw:
        # When an agent adds turns and waits for their trace
        ack = mw.add(user_id=dana, session_id="s-1", turns=TURNS)
        trace = mw.wait(ack.trace_id, timeout=30)
        # Then the trace is complete, and its memories are found by search
        assert ack.accepted == len(TURNS)
        assert trace.status == "complete", trace.status
        assert trace.outcome.stored >= 1
        hits = mw.search(user_id=dana, query="where does she live?", k=5)
        assert hits and any("Berlin" in hit.text for hit in hits)  # offline: an episode
        assert all(hit.user_id == dana and hit.score > 0 for hit in hits)
        assert {hit.kind for hit in hits} <= {"memory", "episode"}
        # And each memory reads back, with the traces behind it
        hits = mw.search(user_id=dana, query="nurse tea coffee", k=5, kinds=["memory"])
        assert hits and {hit.kind for hit in hits} == {"memory"}
        assert hits[0].memory_id is not None
        memory = mw.get_memory(hits[0].memory_id)
        assert memory.memory_id == hits[0].memory_id
        assert memory.chain[-1].memory_id == memory.memory_id or memory.chain
        why = mw.memory_traces(memory.memory_id)
        assert ack.trace_id in {t.trace_id for t in why.traces}
        assert [t.trace_id for t in mw.traces(dana)] == [ack.trace_id]


def test_memories_iterates_every_page(serve: ServeProcess) -> None:
    dana = user()
    with MemwriteClient(serve.base_url, api_key=API_KEY) as mw:
        mw.wait(mw.add(user_id=dana, session_id="s-1", turns=TURNS).trace_id, timeout=30)
        stored = {m.memory_id for m in mw.memories(dana)}
        # When the pages are one memory each
        paged = [m.memory_id for m in mw.memories(dana, page_size=1)]
    # Then every memory comes once, across as many pages
    assert len(stored) >= 2
    assert sorted(paged) == sorted(stored)


def test_replay_rollback_and_erase(serve: ServeProcess) -> None:
    dana = user()
    with MemwriteClient(serve.base_url, api_key=API_KEY) as mw:
        ack = mw.add(user_id=dana, session_id="s-1", turns=TURNS)
        trace = mw.wait(ack.trace_id, timeout=30)
        # When the trace is replayed unchanged: nothing differs, nothing is written
        diff = mw.replay(ack.trace_id, config={})
        assert diff.trace_id == ack.trace_id
        assert diff.before.stored == diff.after.stored
        # When it is rolled back: exactly its memories go
        record = mw.rollback(ack.trace_id)
        assert sorted(record.removed) == sorted(set(trace.outcome.memory_ids))
        assert list(mw.memories(dana)) == []
        # And erasing the user reports what it removed, then nothing is left
        erased = mw.erase_user(dana)
        assert erased.erased and erased.user_id == dana
        assert list(mw.traces(dana)) == []


def test_add_retried_after_a_lost_answer_writes_once(serve: ServeProcess) -> None:
    # Given a network that loses the first answer after the server has handled the request
    real = httpx.HTTPTransport()
    sent: list[httpx.Request] = []

    class LosesFirstAnswer(httpx.BaseTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            sent.append(request)
            response = real.handle_request(request)
            if len(sent) == 1:
                response.read()
                raise httpx.ReadError("connection reset", request=request)
            return response

    dana = user()
    retry = RetryPolicy(base_delay=0.01)
    with MemwriteClient(serve.base_url, API_KEY, retry=retry, transport=LosesFirstAnswer()) as mw:
        # When the client adds turns (and retries once, on its own)
        ack = mw.add(user_id=dana, session_id="s-1", turns=TURNS)
    # Then both attempts carried one Idempotency-Key, and the retry wrote nothing new
    keys = {request.headers["Idempotency-Key"] for request in sent}
    assert len(sent) == 2 and len(keys) == 1
    assert ack.accepted == 0 and sorted(ack.duplicates) == sorted(ack.turn_ids)
    with MemwriteClient(serve.base_url, api_key=API_KEY) as mw:
        assert [t.trace_id for t in mw.traces(dana)] == [ack.trace_id]


def test_two_logical_adds_get_two_keys(serve: ServeProcess) -> None:
    real = httpx.HTTPTransport()
    keys: list[str] = []

    class Recording(httpx.BaseTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            keys.append(request.headers["Idempotency-Key"])
            return real.handle_request(request)

    dana = user()
    # When the same turns are added twice, as two calls
    with MemwriteClient(serve.base_url, API_KEY, transport=Recording()) as mw:
        first = mw.add(user_id=dana, session_id="s-1", turns=TURNS[:1])
        second = mw.add(user_id=dana, session_id="s-1", turns=TURNS[:1])
    # Then each call had its own key (two traces; the content-addressed turn ids still dedupe)
    assert len(set(keys)) == 2
    assert first.trace_id != second.trace_id
    assert second.accepted == 0 and second.duplicates == first.turn_ids


def test_each_refusal_is_its_typed_exception_with_the_field_errors(serve: ServeProcess) -> None:
    with MemwriteClient(serve.base_url, api_key=API_KEY) as mw:
        # An invalid body: 400, naming the fields
        with pytest.raises(InvalidRequest) as invalid:
            mw.add(user_id="dana", session_id="s-1", turns=[])
        assert invalid.value.status == 400
        assert [e.field for e in invalid.value.errors] == ["turns"]
        with pytest.raises(InvalidRequest) as bad_k:
            mw.search(user_id="dana", query="x", k=0)
        assert bad_k.value.errors[0].field == "k"
        # An unknown id: 404
        with pytest.raises(NotFound):
            mw.trace("0" * 64)
        with pytest.raises(NotFound):
            mw.get_memory("no-such-memory")
    # A wrong key: 401
    with MemwriteClient(serve.base_url, api_key="wrong") as mw, pytest.raises(Unauthenticated):
        mw.search(user_id="dana", query="x")


def test_a_malformed_turn_is_refused_locally_as_the_server_refuses_it(serve: ServeProcess) -> None:
    # Given a turn with `text` instead of `content`, beside a good one
    turns = [TURNS[0], {"role": "user", "text": "I live in Berlin."}]
    # When the server is sent it as is, it answers 400 naming the fields
    raw = httpx.post(
        f"{serve.base_url}/v1/turns",
        json={"user_id": "dana", "session_id": "s-1", "turns": turns},
        headers={"x-api-key": API_KEY},
    )
    assert raw.status_code == 400
    expected = raw.json()["errors"]
    assert [e["field"] for e in expected] == ["turns[1].content", "turns[1].text"]

    # Then the sync and the async client refuse it before sending, with the same field errors
    def errors_of(refused: pytest.ExceptionInfo[InvalidRequest]) -> list[dict[str, Any]]:
        assert (refused.value.status, refused.value.code) == (400, "invalid_request")
        return [e.model_dump() for e in refused.value.errors]

    with MemwriteClient(serve.base_url, api_key=API_KEY) as mw:
        with pytest.raises(InvalidRequest) as refused:
            mw.add(user_id="dana", session_id="s-1", turns=turns)
        assert errors_of(refused) == expected

    async def add_async() -> None:
        async with AsyncMemwriteClient(serve.base_url, api_key=API_KEY) as mw:
            await mw.add(user_id="dana", session_id="s-1", turns=turns)

    with pytest.raises(InvalidRequest) as refused_async:
        asyncio.run(add_async())
    assert errors_of(refused_async) == expected


def test_another_tenant_sees_nothing(serve: ServeProcess) -> None:
    dana = user()
    with MemwriteClient(serve.base_url, api_key=API_KEY) as mw:
        ack = mw.add(user_id=dana, session_id="s-1", turns=TURNS)
        mw.wait(ack.trace_id, timeout=30)
    with MemwriteClient(serve.base_url, api_key=OTHER_KEY) as other:
        assert other.search(user_id=dana, query="Berlin") == []
        with pytest.raises(NotFound):
            other.trace(ack.trace_id)


def test_delete_one_memory_sync_and_async_another_tenant_gets_404(serve: ServeProcess) -> None:
    dana = user()
    with MemwriteClient(serve.base_url, api_key=API_KEY) as mw:
        ack = mw.add(user_id=dana, session_id="s-1", turns=TURNS)
        stored = sorted(set(mw.wait(ack.trace_id, timeout=30).outcome.memory_ids))
        first, second = stored[0], stored[1]
        # When another tenant deletes one: 404, and it stays
        with MemwriteClient(serve.base_url, api_key=OTHER_KEY) as other, pytest.raises(NotFound):
            other.delete_memory(first)
        assert mw.get_memory(first).memory_id == first
        # When the tenant deletes it (sync), then another one (async)
        record = mw.delete_memory(first)

        async def delete_async() -> str:
            async with AsyncMemwriteClient(serve.base_url, api_key=API_KEY) as amw:
                return (await amw.delete_memory(second)).memory_id

        deleted_async = asyncio.run(delete_async())
        # Then both are gone, the rest of the request stays, and a repeat is a 404
        assert (record.memory_id, record.user_id, record.trace_id) == (first, dana, ack.trace_id)
        assert deleted_async == second
        assert {m.memory_id for m in mw.memories(dana)} == set(stored) - {first, second}
        with pytest.raises(NotFound):
            mw.delete_memory(first)


def test_an_unreachable_server_raises_after_the_retries() -> None:
    retry = RetryPolicy(attempts=2, base_delay=0.01)
    unreachable = MemwriteClient("http://127.0.0.1:9", api_key=API_KEY, retry=retry)
    with unreachable as mw, pytest.raises(ServiceUnreachable):
        mw.search(user_id="dana", query="x")


def test_the_async_client_does_the_same(serve: ServeProcess) -> None:
    dana = user()

    async def agent() -> dict[str, Any]:
        async with AsyncMemwriteClient(serve.base_url, api_key=API_KEY) as mw:
            ack = await mw.add(user_id=dana, session_id="s-1", turns=TURNS)
            trace = await mw.wait(ack.trace_id, timeout=30)
            hits = await mw.search(user_id=dana, query="where does she live?", k=5)
            memories = [m async for m in mw.memories(dana, page_size=1)]
            with pytest.raises(NotFound):
                await mw.trace("0" * 64)
            return {"trace": trace, "hits": hits, "memories": memories}

    found = asyncio.run(agent())
    assert found["trace"].status == "complete"
    assert any("Berlin" in hit.text for hit in found["hits"])
    assert len(found["memories"]) >= 2


def test_tenant_settings_steer_what_is_remembered_through_serve(serve: ServeProcess) -> None:
    dana = user()
    with (
        MemwriteClient(serve.base_url, api_key=API_KEY) as mw,
        MemwriteClient(serve.base_url, api_key=OTHER_KEY) as other,
    ):
        # Given a tenant that drops memories about health
        stored = mw.put_settings({"extraction": {"exclude_topics": ["health"]}})
        assert stored.extraction is not None
        assert stored.extraction["exclude_topics"] == ["health"]
        assert mw.settings().extraction == stored.extraction
        # When its agent sends a health fact and a location fact
        turns = [
            {"role": "user", "content": "I live in Berlin."},
            {"role": "user", "content": "I am allergic to peanuts."},
        ]
        trace = mw.wait(mw.add(user_id=dana, session_id="s-1", turns=turns).trace_id, timeout=30)
        # Then only the location is remembered, the other dropped with its typed reason
        assert {m.value for m in mw.memories(dana)} == {"Berlin"}
        reasons = [span.reason for span in trace.spans if span.reason]
        assert {"type": "ExcludedTopic", "topic": "health"} in reasons
        # And another tenant's settings are untouched; bad settings are refused, naming the field
        assert other.settings().extraction is None
        with pytest.raises(InvalidRequest) as refused:
            mw.put_settings({"extraction": {"instructions": "x" * 2_001}})
        assert refused.value.errors[0].field.startswith("extraction.instructions")
        assert mw.settings().extraction == stored.extraction
        mw.put_settings({})


def test_export_erase_import_through_serve(serve: ServeProcess) -> None:
    # Given a user's memories on a live `memwrite serve`, exported
    dana = user()
    with MemwriteClient(serve.base_url, api_key=API_KEY) as mw:
        mw.wait(mw.add(user_id=dana, session_id="s-1", turns=TURNS).trace_id, timeout=30)
        exported = mw.export_user(dana)
        before = sorted(m.memory_id for m in mw.memories(dana))
        # When the user is erased and the export imported (the async client, the second time)
        mw.erase_user(dana)
        report = mw.import_user(dana, exported)

        async def again() -> Any:
            async with AsyncMemwriteClient(serve.base_url, api_key=API_KEY) as amw:
                return await amw.import_user(dana, exported), await amw.export_user(dana)

        repeat, exported_again = asyncio.run(again())
        # Then the same memories are back, the repeat wrote nothing, the export is the same
        assert report.imported["memories"] == len(before) > 0
        assert sorted(m.memory_id for m in mw.memories(dana)) == before
        assert set(repeat.imported.values()) == {0}
        assert exported_again == exported
        # And a bad line is an InvalidRequest naming its field
        with pytest.raises(InvalidRequest) as refused:
            mw.import_user(dana, exported.replace('"kind":"memory"', '"kind":"spell"', 1))
        assert refused.value.errors[0].field == "kind"


def test_pin_and_expire_a_memory_through_serve(serve: ServeProcess) -> None:
    dana = user()
    with MemwriteClient(serve.base_url, api_key=API_KEY) as mw:
        mw.wait(mw.add(user_id=dana, session_id="s-1", turns=TURNS).trace_id, timeout=30)
        memory = next(iter(mw.memories(dana)))
        # When the memory is pinned, then given an expiry in the past
        pinned = mw.patch_memory(memory.memory_id, pinned=True)
        expired = mw.patch_memory(memory.memory_id, expires_at="2020-01-01T00:00:00Z")
        # Then both show, it leaves the list and stays readable by id
        assert pinned.pinned and pinned.expires_at is None
        assert expired.pinned and expired.expires_at is not None
        assert memory.memory_id not in {m.memory_id for m in mw.memories(dana)}
        assert mw.get_memory(memory.memory_id).expires_at == expired.expires_at
        # And a bad field is a 400 naming it; an unknown memory a 404
        with pytest.raises(InvalidRequest) as invalid:
            mw.patch_memory(memory.memory_id, pinned="often")  # type: ignore[arg-type]
        assert "pinned" in str(invalid.value.errors)
        with pytest.raises(NotFound):
            mw.patch_memory("0" * 32, pinned=True)


def test_direct_memories_through_serve(serve: ServeProcess) -> None:
    dana = user()
    with MemwriteClient(serve.base_url, api_key=API_KEY) as mw:
        # When an agent writes a memory directly, pinned
        memory = {"type": "fact", "attribute": "lives_in", "value": "Lisbon", "pinned": True}
        ack = mw.add_memories(dana, [memory])
        trace = mw.wait(ack.trace_id, timeout=30)
        # Then it is stored as written, pinned, with no extraction call
        assert trace.status == "complete", trace.status
        stored = list(mw.memories(dana))
        assert [(m.text, m.pinned) for m in stored] == [("The user lives in Lisbon.", True)]
        # And a bad one is a 400 naming the field
        with pytest.raises(InvalidRequest) as invalid:
            mw.add_memories(dana, [{"type": "mood", "attribute": "a", "value": "b"}])
        assert "memories[0].type" in str(invalid.value.errors)


def test_usage_counts_the_tenants_turns_only_and_names_a_bad_bound(serve: ServeProcess) -> None:
    with (
        MemwriteClient(serve.base_url, api_key=API_KEY) as mw,
        MemwriteClient(serve.base_url, api_key=OTHER_KEY) as other,
    ):
        # Given the tenants' usage so far (the server is shared by the tests)
        before, theirs = mw.usage(), other.usage()
        # When one tenant adds turns and they are distilled
        ack = mw.add(user_id=user(), session_id="s-1", turns=TURNS)
        mw.wait(ack.trace_id, timeout=30)
        # Then its usage counts them, and the other tenant's does not
        after = mw.usage()
        assert after.tenant == "tenant-client"
        assert after.turns_in >= before.turns_in + len(TURNS)
        assert after.turns_kept >= before.turns_kept + ack.accepted
        assert after.embeddings > before.embeddings
        assert other.usage().turns_in == theirs.turns_in
        # And a range of days counts those days' hours, `to` exclusive in the answer
        past = mw.usage(since=date(2025, 1, 1), until="2025-01-31")
        assert (past.from_.isoformat(), past.to.isoformat()) == (
            "2025-01-01T00:00:00+00:00",
            "2025-02-01T00:00:00+00:00",
        )
        assert past.turns_in == 0
        # And a bound after the other is refused, naming it
        with pytest.raises(InvalidRequest) as refused:
            mw.usage(since="2026-11-20", until="2026-11-10")
        assert [error.field for error in refused.value.errors] == ["from"]
