"""The change feed's pieces: events from outbox rows, the deliveries stage 7 queues and their
backoff, and one signed attempt at a real HTTP receiver on 127.0.0.1 (loopback only) that
checks every signature, fails on purpose and counts what it got."""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from memwrite.claims.candidate import MemoryType, Tier
from memwrite.feed import (
    EVENT_ID_HEADER,
    MAX_ATTEMPTS,
    RETRY_WINDOW_SECS,
    SIGNATURE_HEADER,
    Webhook,
    deliveries_for,
    hook_id,
    post_event,
    retry_delay,
)
from memwrite.guards.egress import LOOPBACK_FLAG
from memwrite.payloads import OutboxChange
from memwrite.records.change_events import (
    EventType,
    WebhookDelivery,
    erasure_row_id,
    event_for_change,
    is_erasure_row,
    user_erased_event,
)
from memwrite.records.memory import MemoryUnit

SECRET = "s3cret-of-sixteen-chars"
AT = datetime(2025, 6, 1, 9, 0, tzinfo=UTC)


class Receiver(ThreadingHTTPServer):
    """Answers `fail_first` requests with a 500, then 204; keeps every body it accepted."""

    def __init__(self, fail_first: int) -> None:
        self.fail_first = fail_first
        self.seen = 0
        self.accepted: list[dict[str, Any]] = []
        self.bad_signatures = 0
        super().__init__(("127.0.0.1", 0), _Handler)


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        expected = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, self.headers[SIGNATURE_HEADER]):
            self.server.bad_signatures += 1
            self.send_response(401)
        else:
            self.server.seen += 1
            if self.server.seen <= self.server.fail_first:
                self.send_response(500)
            else:
                event = json.loads(body)
                assert event["event_id"] == self.headers[EVENT_ID_HEADER]
                self.server.accepted.append(event)
                self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(autouse=True)
def loopback_deployment(monkeypatch: pytest.MonkeyPatch) -> None:
    """These receivers listen on 127.0.0.1: the deployment allows it, as `memwrite serve`."""
    monkeypatch.setenv(LOOPBACK_FLAG, "true")


@pytest.fixture
def receiver(request: pytest.FixtureRequest) -> Iterator[Receiver]:
    server = Receiver(getattr(request, "param", 0))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def hook(server: Receiver, events: list[EventType] | None = None) -> Webhook:
    host, port = server.server_address[:2]
    return Webhook(
        url=f"http://{host}:{port}/hook", secret=SECRET, events=events or list(EventType)
    )


def change(rev: int = 1) -> OutboxChange:
    return OutboxChange(tenant="acme", user_id="dana", memory_id="m" * 32, rev=rev, trace_id="t")


def test_an_outbox_row_is_one_event_with_an_id_of_the_row() -> None:
    # Given a row seen twice, and a later rev of the same memory
    first, again, later = (
        event_for_change(change(), None, AT),
        event_for_change(change(), None, AT),
        event_for_change(change(2), None, AT),
    )
    # Then the same row is the same event id, another rev another one; a gone memory is erased
    assert first.event_id == again.event_id != later.event_id
    assert first.type is EventType.MEMORY_ERASED


def stored(expires_on: datetime | None = None) -> MemoryUnit:
    return MemoryUnit(
        memory_id="m" * 32,
        tenant="acme",
        user_id="dana",
        text="The user lives in Lisbon.",
        type=MemoryType.FACT,
        topic="location",
        importance=0.5,
        confidence=0.85,
        extractor_confidence=0.9,
        tier=Tier.WORKING,
        source="user_explicit",
        source_session="s",
        trace_id="t",
        turn_id="turn",
        created_at=AT,
        observed_at=AT,
        last_seen=AT,
        corroborated_by=["turn"],
        entity="user",
        entity_id="e-user",
        attribute="lives_in",
        value="Lisbon",
        predicate_is_stateful=True,
        expires_on=expires_on,
    )


def test_a_memory_past_the_users_expiry_is_an_expired_event() -> None:
    # Given a memory whose user expiry (PATCH expires_at) has passed, and one whose has not
    past = stored(expires_on=AT - timedelta(days=1))
    future = stored(expires_on=AT + timedelta(days=1))
    # When their outbox rows become events / Then the first is expired, the second updated
    assert event_for_change(change(2), past, AT).type is EventType.MEMORY_EXPIRED
    assert event_for_change(change(2), future, AT).type is EventType.MEMORY_UPDATED
    assert event_for_change(change(1), stored(), AT).type is EventType.MEMORY_CREATED
    # And one the expiry sweep announced is expired whatever the clock of the delivery says
    announced = future.model_copy(update={"expiry_announced": True})
    assert event_for_change(change(3), announced, AT).type is EventType.MEMORY_EXPIRED


def test_an_erasure_row_is_one_user_erased_event_at_the_erasures_time() -> None:
    # Given the rows of two erasures of a user, the first seen twice
    def erasure(at: datetime) -> OutboxChange:
        return OutboxChange(tenant="acme", user_id="dana", memory_id=erasure_row_id(at), rev=1)

    first, again = user_erased_event(erasure(AT)), user_erased_event(erasure(AT))
    later = user_erased_event(erasure(AT + timedelta(microseconds=1)))
    # Then a row is one event id, each erasure its own, at the erasure's time, naming no memory
    assert first.event_id == again.event_id != later.event_id
    assert first.type is EventType.USER_ERASED
    assert (first.user_id, first.memory_id, first.at) == ("dana", None, AT)
    # And an erasure row is never taken for a memory's or an episode's
    assert is_erasure_row(erasure(AT).memory_id)
    assert not is_erasure_row("m" * 32) and not is_erasure_row("episode:turn-1")


@pytest.mark.parametrize("receiver", [1], indirect=True)
def test_one_attempt_posts_the_signed_event_once_and_reports_the_answer(
    receiver: Receiver,
) -> None:
    # Given a receiver that answers 500 once
    event = event_for_change(change(), None, AT)

    # When the event is posted twice, one attempt each
    with httpx.Client() as client:
        failed = post_event(event, hook(receiver), client)
        accepted = post_event(event, hook(receiver), client)

    # Then each call was one request: the first failed with its status, the second accepted
    assert (failed.status, failed.delivered) == (500, False)
    assert (accepted.status, accepted.delivered) == (204, True)
    assert receiver.seen == 2
    assert [e["event_id"] for e in receiver.accepted] == [event.event_id]
    assert receiver.bad_signatures == 0


def test_no_answer_is_a_failed_attempt_naming_the_transport_error() -> None:
    # Given a webhook on a port nothing listens on
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    dead = Webhook(url=f"http://127.0.0.1:{port}/hook", secret=SECRET, events=list(EventType))
    # When the event is posted / Then there is no status, only the transport error's name
    with httpx.Client() as client:
        result = post_event(event_for_change(change(), None, AT), dead, client)
    assert result.status is None and not result.delivered
    assert result.error == "ConnectError"


def test_a_wrong_secret_is_refused_and_only_subscribed_webhooks_get_a_delivery(
    receiver: Receiver,
) -> None:
    event = event_for_change(change(), None, AT)
    wrong = hook(receiver).model_copy(update={"secret": "another-secret-value"})
    with httpx.Client() as client:
        refused = post_event(event, wrong, client)
    assert (refused.status, refused.delivered) == (401, False)
    assert receiver.bad_signatures == 1
    # And a delivery is made for each webhook subscribed to the event's type, a URL once
    subscribed = hook(receiver)
    unsubscribed = hook(receiver, [EventType.USER_ERASED]).model_copy(
        update={"url": "https://elsewhere.example.com/hook"}
    )
    deliveries = deliveries_for(event, 1, [subscribed, unsubscribed, subscribed])
    assert [d.hook_id for d in deliveries] == [hook_id(str(subscribed.url))]


def test_a_delivery_id_is_a_function_of_the_outbox_row_and_the_webhook() -> None:
    # Given the same row turned into its event twice (a redelivered row), and a later rev
    first, again = (event_for_change(change(), None, AT) for _ in range(2))
    later = event_for_change(change(2), None, AT)
    one, other = hook_id("https://a.example.com/hook"), hook_id("https://b.example.com/hook")
    # Then the same row and webhook are the same delivery; another webhook or row another one
    same = WebhookDelivery(event=first, hook_id=one, rev=1)
    assert same.delivery_id == WebhookDelivery(event=again, hook_id=one, rev=1).delivery_id
    assert same.delivery_id != WebhookDelivery(event=first, hook_id=other, rev=1).delivery_id
    assert same.delivery_id != WebhookDelivery(event=later, hook_id=one, rev=2).delivery_id
    # And the message names the webhook by its id only: no URL, no secret
    assert "example.com" not in same.model_dump_json()


def test_the_backoff_doubles_to_fifteen_minutes_and_retries_outlast_an_hour() -> None:
    # Given the schedule of a delivery that keeps failing
    delays = [retry_delay(attempt) for attempt in range(1, MAX_ATTEMPTS + 1)]
    # Then it starts at 30 s, doubles, and never waits more than 15 minutes
    assert delays[:6] == [30, 60, 120, 240, 480, 900]
    assert max(delays) == 900 and delays == sorted(delays)
    # And the last attempt comes 18,030 s (5 h) after the first: more than an hour
    assert RETRY_WINDOW_SECS == sum(delays[:-1]) == 18_030
    assert RETRY_WINDOW_SECS > 3_600


def test_webhooks_are_https_except_to_loopback() -> None:
    with pytest.raises(ValueError, match="https"):
        Webhook(url="http://example.com/hook", secret=SECRET, events=[EventType.MEMORY_CREATED])
    Webhook(url="https://example.com/hook", secret=SECRET, events=[EventType.MEMORY_CREATED])
