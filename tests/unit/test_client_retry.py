"""`memwrite.client`'s retries, on httpx's MockTransport (the server's side is in
tests/client, live): what is retried, how long it waits, and what is never repeated."""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime

import httpx
import pytest

from memwrite.client import (
    InvalidRequest,
    MemwriteClient,
    RetryPolicy,
    RollbackRefused,
    ServiceUnreachable,
    Throttled,
)
from memwrite.client.retry import parse_retry_after

ACK = {"trace_id": "t" * 64, "accepted": 1, "skipped": [], "turn_ids": ["a"]}
TURNS = [{"role": "user", "content": "I live in Berlin."}]
FAST = RetryPolicy(base_delay=0.001, rng=random.Random(7))


def client(transport: httpx.MockTransport) -> MemwriteClient:
    return MemwriteClient("http://memwrite", "k", retry=FAST, transport=transport)


def scripted(
    *answers: httpx.Response | Exception,
) -> tuple[httpx.MockTransport, list[httpx.Request]]:
    seen: list[httpx.Request] = []
    queue = list(answers)

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        answer = queue.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    return httpx.MockTransport(handle), seen


def test_503_and_429_are_retried_with_one_idempotency_key() -> None:
    # Given a server that is unavailable, then throttles, then accepts
    transport, seen = scripted(
        httpx.Response(503, json={"error": "unavailable", "message": "down"}),
        httpx.Response(429, json={"message": "Too Many Requests"}),
        httpx.Response(202, json=ACK),
    )
    with client(transport) as mw:
        ack = mw.add(user_id="dana", session_id="s", turns=TURNS)
    # Then the third attempt's answer is returned; all three carried the same key
    assert ack.trace_id == ACK["trace_id"]
    assert len({r.headers["Idempotency-Key"] for r in seen}) == 1 and len(seen) == 3


def test_retry_after_is_honoured() -> None:
    transport, seen = scripted(
        httpx.Response(503, json={"error": "unavailable"}, headers={"Retry-After": "1"}),
        httpx.Response(202, json=ACK),
    )
    started = time.monotonic()
    with client(transport) as mw:
        mw.add(user_id="dana", session_id="s", turns=TURNS)
    assert time.monotonic() - started >= 1.0 and len(seen) == 2


def test_the_last_429_is_raised_as_throttled_after_every_attempt() -> None:
    transport, seen = scripted(*[httpx.Response(429, json={"message": "slow down"})] * 4)
    with client(transport) as mw, pytest.raises(Throttled) as throttled:
        mw.search(user_id="dana", query="x")
    assert len(seen) == FAST.attempts and throttled.value.status == 429


def test_a_refusal_is_never_retried_and_carries_the_field_errors() -> None:
    body = {"error": "invalid_request", "errors": [{"field": "turns", "message": "too short"}]}
    transport, seen = scripted(httpx.Response(400, json=body))
    with client(transport) as mw, pytest.raises(InvalidRequest) as invalid:
        mw.add(user_id="dana", session_id="s", turns=TURNS)
    assert len(seen) == 1
    assert [(e.field, e.message) for e in invalid.value.errors] == [("turns", "too short")]


def test_a_rollback_whose_answer_was_lost_is_not_sent_again() -> None:
    # Given a connection reset after the request went out (the server may have rolled back)
    transport, seen = scripted(httpx.ReadError("reset"))
    with client(transport) as mw, pytest.raises(ServiceUnreachable):
        mw.rollback("t" * 64)
    # Then it is reported, not repeated (a second rollback would be refused, not a no-op)
    assert len(seen) == 1


def test_a_connection_never_opened_is_retried_even_for_a_rollback() -> None:
    record = {
        "trace_id": "t" * 64,
        "user_id": "dana",
        "rolled_back_at": "2026-01-01T00:00:00Z",
        "requested_via": "api",
        "removed": [],
        "restored": [],
        "updated": [],
    }
    transport, seen = scripted(httpx.ConnectError("refused"), httpx.Response(200, json=record))
    with client(transport) as mw:
        assert mw.rollback("t" * 64).trace_id == "t" * 64
    assert len(seen) == 2


def test_a_409_is_its_own_exception() -> None:
    body = {"error": "rollback_refused", "reason": "later", "message": "m", "memory_ids": ["m1"]}
    transport, _ = scripted(httpx.Response(409, json=body))
    with client(transport) as mw, pytest.raises(RollbackRefused) as refused:
        mw.rollback("t" * 64)
    assert refused.value.body["memory_ids"] == ["m1"]


def test_unknown_fields_of_an_answer_are_kept_not_refused() -> None:
    transport, _ = scripted(httpx.Response(202, json={**ACK, "episode_id": "e1"}))
    with client(transport) as mw:
        ack = mw.add(user_id="dana", session_id="s", turns=TURNS)
    assert ack.model_extra == {"episode_id": "e1"}


def test_retry_after_as_seconds_or_http_date() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert parse_retry_after("2") == 2.0
    assert parse_retry_after("Thu, 01 Jan 2026 00:00:05 GMT", now) == 5.0
    assert parse_retry_after("soon") is None
    # And the wait is never shorter than what the server asked for
    assert all(FAST.delay(attempt, 2.0) >= 2.0 for attempt in range(4))
    assert all(0 <= FAST.delay(attempt) <= FAST.max_delay for attempt in range(10))
