"""`memwrite serve`: the same HTTP API on 127.0.0.1, driven over a real socket."""

from __future__ import annotations

import http.client
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

import functions.ingest.handler as ingest_handler
from memwrite.adapters.sqs import SqsTurnQueue
from memwrite_local.serve import make_server

TIMEOUT_SECS = 5
BODY = {
    "session_id": "s1",
    "user_id": "dana",
    "turns": [
        {"role": "user", "content": "hi"},
        {"role": "user", "content": "I live in Berlin with my partner Alex and our dog Pixel."},
    ],
}


@dataclass(frozen=True)
class HttpReply:
    status: int
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass(frozen=True)
class Server:
    base_url: str

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> HttpReply:
        request = urllib.request.Request(
            self.base_url + path, data=body, method=method, headers=headers or {}
        )
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_SECS) as reply:
                return HttpReply(reply.status, dict(reply.headers), json.loads(reply.read()))
        except urllib.error.HTTPError as error:
            return HttpReply(error.code, dict(error.headers), json.loads(error.read()))


@pytest.fixture
def server(local) -> Iterator[Server]:
    """`make_server` on an ephemeral loopback port, served from a thread, always shut down."""
    httpd = make_server(local.runner, 0)
    host, port = httpd.server_address[:2]
    assert host == "127.0.0.1"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield Server(f"http://127.0.0.1:{port}")
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=TIMEOUT_SECS)
    assert not thread.is_alive()


def _json_headers(local) -> dict[str, str]:
    return {"Content-Type": "application/json", "x-api-key": local.api_key}


def test_post_then_get_trace_over_http(local, server):
    # Given the local API served on 127.0.0.1
    # When an agent posts turns over HTTP
    posted = server.request("POST", "/v1/turns", json.dumps(BODY).encode(), _json_headers(local))

    # Then it gets the 202 with the skip reasons and the trace id
    assert posted.status == 202
    assert posted.headers["Content-Type"] == "application/json"
    assert posted.body["accepted"] == 1
    assert posted.body["skipped"][0]["reason"]["type"] == "TooShort"

    # And the trace of that request is readable over HTTP
    trace = server.request(
        "GET", f"/v1/traces/{posted.body['trace_id']}", headers={"x-api-key": local.api_key}
    )
    assert trace.status == 200
    assert trace.body["status"] == "complete"
    assert trace.body["turn_ids"] == posted.body["turn_ids"]
    # And the server's consumer drained the survivor from the queue, as SQS would trigger it
    assert local.take_messages() == []


def test_http_errors_keep_their_status(local, server):
    # Given the local API served on 127.0.0.1
    # When requests without a key, with an invalid body, and to an unknown path arrive
    no_key = server.request(
        "POST", "/v1/turns", json.dumps(BODY).encode(), {"Content-Type": "application/json"}
    )
    invalid = server.request(
        "POST", "/v1/turns", json.dumps({**BODY, "turns": []}).encode(), _json_headers(local)
    )
    unknown = server.request("GET", "/v2/nothing", headers={"x-api-key": local.api_key})

    # Then each gets its own status, not a 500
    assert no_key.status == 401
    assert invalid.status == 400
    assert invalid.body["errors"][0]["field"] == "turns"
    assert unknown.status == 404


def test_retry_after_reaches_http_clients(local, server, monkeypatch):
    # Given SQS refusing every entry
    class RefuseAll:
        def send_message_batch(self, **kwargs: Any) -> dict[str, Any]:
            failed = [
                {"Id": e["Id"], "SenderFault": False, "Code": "InternalError"}
                for e in kwargs["Entries"]
            ]
            return {"Successful": [], "Failed": failed}

    monkeypatch.setattr(
        ingest_handler.deps().ingest, "queue", SqsTurnQueue(RefuseAll(), local.queue_url)
    )

    # When an agent posts turns over HTTP
    posted = server.request("POST", "/v1/turns", json.dumps(BODY).encode(), _json_headers(local))

    # Then the 503 tells it when to retry
    assert posted.status == 503
    assert posted.headers.get("Retry-After") == "2"


def test_query_string_does_not_break_routing(local, server):
    # Given a trace
    posted = server.request("POST", "/v1/turns", json.dumps(BODY).encode(), _json_headers(local))

    # When it is read with a query string (as a browser or cache-buster would add)
    trace = server.request(
        "GET",
        f"/v1/traces/{posted.body['trace_id']}?verbose=1",
        headers={"x-api-key": local.api_key},
    )

    # Then the path still routes to the trace
    assert trace.status == 200


def test_non_utf8_body_is_400(local, server):
    # Given a client that sends bytes that are not UTF-8
    raw = b'{"session_id": "s1", "user_id": "\xff\xfe", "turns": []}'

    # When it posts them
    try:
        reply = server.request("POST", "/v1/turns", raw, _json_headers(local))
    except (http.client.RemoteDisconnected, ConnectionError) as exc:
        pytest.fail(f"connection dropped without a response: {exc!r}")

    # Then it gets a client error, as for any other invalid body
    assert reply.status == 400


@pytest.mark.parametrize("method", ["PUT", "PATCH", "OPTIONS", "HEAD", "GET"])
def test_unrouted_method_is_4xx_over_http(local, server, method):
    # Given the local API served on 127.0.0.1
    # When a client uses a method that /v1/turns does not take
    request = urllib.request.Request(
        server.base_url + "/v1/turns", method=method, headers=_json_headers(local)
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECS) as reply:
            status = reply.status
    except urllib.error.HTTPError as error:
        status = error.code

    # Then the API answers with a client error, not http.server's 501
    assert 400 <= status < 500


@pytest.mark.parametrize("declared", ["abc", "-1", "²"])
def test_malformed_content_length_is_400(local, server, declared):
    # Given a client that declares a Content-Length that is not a byte count
    host, port = server.base_url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=TIMEOUT_SECS)
    connection.putrequest("POST", "/v1/turns")
    connection.putheader("Content-Length", declared)
    connection.putheader("x-api-key", local.api_key)
    connection.endheaders()

    # When the server reads the request
    reply = connection.getresponse()

    # Then it is refused naming the header, and the server neither hangs nor drops the connection
    assert reply.status == 400
    assert json.loads(reply.read())["errors"][0]["field"] == "Content-Length"
    connection.close()
