"""Webhooks go only outward (`memwrite.guards.egress`, `memwrite.feed.webhooks`): every spelling of
an internal address is refused when the URL is validated, a name is resolved and checked again at
delivery, and the loopback is reachable only where the deployment (never a tenant) allows it."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from pydantic import ValidationError

from memwrite.config.tenant_overrides import TenantOverrides, Webhook
from memwrite.feed.webhooks import checked_client, post_event
from memwrite.guards.egress import LOOPBACK_FLAG, ip_literal, loopback_allowed
from memwrite.payloads import OutboxChange
from memwrite.records.change_events import ChangeEvent, event_for_change

SECRET = "s" * 20
INSIDE = [
    "https://169.254.169.254/latest/meta-data/",
    "https://[fd00:ec2::254]/",  # the metadata service over IPv6 (unique local)
    "https://10.1.2.3/",
    "https://172.16.0.1/",
    "https://192.168.1.1/",
    "https://100.64.0.1/",  # shared address space (carrier NAT)
    "https://0.0.0.0/",
    "https://127.0.0.1/",
    "https://127.1/",
    "https://0x7f000001/",
    "https://2130706433/",
    "https://017700000001/",
    "https://0x7f.0.0.1/",
    "https://[::1]/",
    "https://[::ffff:127.0.0.1]/",
    "https://[::ffff:a9fe:a9fe]/",  # IPv4-mapped metadata address
    "https://[64:ff9b::a9fe:a9fe]/",  # NAT64 of it
    "https://[2002:a00:1::]/",  # 6to4 of 10.0.0.1
    "https://[fe80::1]/",
    "https://224.0.0.1/",
    "https://[ff02::1]/",
    "https://240.0.0.1/",
    "https://localhost/",
    "https://api.localhost/",
    "http://127.0.0.1:9001/2018-06-01/runtime/invocation/next",  # the Lambda runtime API
]


@pytest.fixture(autouse=True)
def no_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(LOOPBACK_FLAG, raising=False)


def webhook(url: str) -> Webhook:
    return Webhook.model_validate({"url": url, "secret": SECRET, "events": ["memory.created"]})


@pytest.mark.parametrize("url", INSIDE)
def test_every_spelling_of_an_internal_address_is_refused_naming_the_url(url: str) -> None:
    with pytest.raises(ValidationError, match="public addresses") as refused:
        TenantOverrides.model_validate(
            {"webhooks": [{"url": url, "secret": SECRET, "events": ["memory.created"]}]}
        )
    assert refused.value.errors()[0]["loc"] == ("webhooks", 0, "url")


@pytest.mark.parametrize("url", ["https://hooks.example.com/x", "https://93.184.215.14/x"])
def test_public_https_webhooks_are_accepted(url: str) -> None:
    assert str(webhook(url).url) == url


def test_literals_are_read_as_the_c_resolver_reads_them() -> None:
    spellings = ["127.0.0.1", "127.1", "0x7f000001", "2130706433", "017700000001", "0177.0.0.1"]
    assert {str(ip_literal(host)) for host in spellings} == {"127.0.0.1"}
    assert ip_literal("hooks.example.com") is None
    assert ip_literal("0x7f000001.example.com") is None


def test_the_loopback_is_the_deployments_choice_and_never_a_lambdas() -> None:
    assert not loopback_allowed({})
    assert loopback_allowed({LOOPBACK_FLAG: "true"})
    assert not loopback_allowed({LOOPBACK_FLAG: "true", "AWS_LAMBDA_FUNCTION_NAME": "api"})
    with pytest.raises(ValidationError, match="loopback"):
        webhook("http://127.0.0.1:8080/hook")


class _Receiver(ThreadingHTTPServer):
    def __init__(self) -> None:
        self.paths: list[str] = []
        super().__init__(("127.0.0.1", 0), _Handler)


class _Handler(BaseHTTPRequestHandler):
    server: _Receiver

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.server.paths.append(self.path)
        # The first path redirects to the runtime API's port: never followed.
        self.send_response(307 if self.path == "/redirect" else 200)
        self.send_header("Location", "http://127.0.0.1:9001/2018-06-01/runtime")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[_Receiver]:
    server = _Receiver()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def event() -> ChangeEvent:
    change = OutboxChange(tenant="acme", user_id="dana", memory_id="m" * 32, rev=1, trace_id="t")
    return event_for_change(change, None, datetime(2026, 3, 2, tzinfo=UTC))


def test_a_name_that_now_resolves_to_the_loopback_gets_no_connection(
    receiver: _Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a webhook accepted for a public name whose DNS now answers the loopback
    port = receiver.server_address[1]
    hook = webhook(f"https://rebound.example.com:{port}/hook")
    monkeypatch.setattr(
        socket,
        "getaddrinfo",
        lambda *args, **kwargs: [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))],
    )
    # When the event is delivered / Then the attempt is refused and nothing reaches the host
    with checked_client() as client:
        result = post_event(event(), hook, client)
    assert (result.status, result.error) == (None, "RefusedAddress")
    assert receiver.paths == []


def test_where_the_deployment_allows_the_loopback_a_redirect_is_not_followed(
    receiver: _Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LOOPBACK_FLAG, "true")
    host, port = receiver.server_address[:2]
    with checked_client() as client:
        delivered = post_event(event(), webhook(f"http://{host!s}:{port}/hook"), client)
        redirected = post_event(event(), webhook(f"http://{host!s}:{port}/redirect"), client)
    assert delivered.delivered
    assert (redirected.status, redirected.delivered) == (307, False)
    assert receiver.paths == ["/hook", "/redirect"]
