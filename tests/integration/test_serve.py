"""`memwrite serve`: the same HTTP API on 127.0.0.1, driven over a real socket, on SQLite (the
embedded default) with the queue drained by the server's background worker."""

from __future__ import annotations

import http.client
import importlib
import json
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

import functions.pre_filter.handler as pre_filter_handler
from memwrite.models import QueuedTurn
from memwrite.ports import EnqueueResult
from memwrite_local.runtime.server import LocalServer, make_server
from tests.integration.conftest import Local, MakeLocal

TIMEOUT_SECS = 5
MAX_BODY_BYTES = 4_096
SOCKET_TIMEOUT_SECS = 0.5  # short, so the slow-client tests end quickly
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
    httpd: LocalServer

    def wait_for_pipeline(self) -> None:
        assert self.httpd.worker.wait_idle(TIMEOUT_SECS), "the queue worker did not finish"

    def connect(self) -> socket.socket:
        host, port = self.httpd.server_address[:2]
        return socket.create_connection((str(host), int(port)), timeout=TIMEOUT_SECS)

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
def local(make_local: MakeLocal) -> Local:
    return make_local(backend="sqlite")


@pytest.fixture
def server(local: Local) -> Iterator[Server]:
    """`make_server` on an ephemeral loopback port, served from a thread, always shut down."""
    httpd = make_server(
        local.runner, 0, max_body_bytes=MAX_BODY_BYTES, socket_timeout_secs=SOCKET_TIMEOUT_SECS
    )
    host, port = httpd.server_address[:2]
    assert host == "127.0.0.1"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield Server(f"http://127.0.0.1:{port}", httpd)
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

    # And once the server's worker has run the pipeline, the trace is complete over HTTP
    server.wait_for_pipeline()
    trace = server.request(
        "GET", f"/v1/traces/{posted.body['trace_id']}", headers={"x-api-key": local.api_key}
    )
    assert trace.status == 200
    assert trace.body["status"] == "complete"
    assert trace.body["turn_ids"] == posted.body["turn_ids"]
    # And the worker drained the survivor from the queue, as SQS would trigger the pipeline
    assert local.runner.drain().completed_batches == 0
    # And the survivor, beyond the rules offline, is kept whole as a pending episode
    assert [e["status"] for e in trace.body["episodes"]] == ["pending"]
    assert local.memories("dana") == []


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
    invalid_without_key = server.request(
        "POST", "/v1/turns", b'{"turns": 7}', {"Content-Type": "application/json"}
    )

    # Then each gets its own status, not a 500
    assert no_key.status == 401
    assert invalid.status == 400
    assert invalid.body["errors"][0]["field"] == "turns"
    assert unknown.status == 404
    # And a wrong credential is refused before the body is read, as the authorizer does on AWS
    assert invalid_without_key.status == 401
    assert invalid_without_key.body["error"] == "unauthenticated"


def test_retry_after_reaches_http_clients(local, server, monkeypatch):
    # Given a queue refusing every turn
    class RefuseAll:
        def enqueue(self, turns: Sequence[QueuedTurn]) -> EnqueueResult:
            return EnqueueResult(frozenset(), {turn.turn_id: "InternalError" for turn in turns})

    monkeypatch.setattr(pre_filter_handler.deps().ingest, "queue", RefuseAll())

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


@pytest.mark.parametrize("method", ["PUT", "PATCH", "OPTIONS", "GET", "DELETE"])
def test_a_wrong_method_is_a_json_405_naming_the_allowed_one(local, server, method):
    # Given the local API served on 127.0.0.1
    # When a client uses a method that /v1/turns does not take
    reply = server.request(method, "/v1/turns", headers=_json_headers(local))

    # Then the API answers 405 in JSON, saying which method the path takes
    assert reply.status == 405
    assert reply.headers["Allow"] == "POST"
    assert reply.body["error"] == "method_not_allowed"


def test_head_gets_a_405_without_a_body(local, server):
    connection = http.client.HTTPConnection(*server.httpd.server_address[:2], timeout=TIMEOUT_SECS)
    connection.request("HEAD", "/v1/turns")
    reply = connection.getresponse()
    assert reply.status == 405
    assert reply.read() == b""
    connection.close()


def test_an_unknown_method_is_a_json_405_not_an_html_501(local, server):
    # Given a client speaking a method http.server has no handler for
    with server.connect() as raw:
        raw.sendall(b"BREW /v1/turns HTTP/1.1\r\nHost: x\r\n\r\n")
        head, _, body = raw.makefile("rb").read().partition(b"\r\n\r\n")
    # Then the answer is a 405 whose body is JSON
    assert head.startswith(b"HTTP/1.1 405")
    assert json.loads(body)["error"] == "method_not_allowed"


def test_a_header_too_long_gets_a_json_431(local, server):
    # Given a request whose header line is longer than http.server reads
    with server.connect() as raw:
        raw.sendall(b"POST /v1/turns HTTP/1.1\r\nX-Long: " + b"a" * 70_000 + b"\r\n\r\n")
        head, _, body = raw.makefile("rb").read().partition(b"\r\n\r\n")
    # Then the server's own refusal is JSON too
    assert head.startswith(b"HTTP/1.1 431")
    assert json.loads(body)["error"] == "request_header_fields_too_large"


def test_a_body_over_the_limit_is_refused_before_it_is_read(local, server):
    # Given a client that declares a body larger than the limit and sends none of it
    with server.connect() as raw:
        raw.sendall(
            b"POST /v1/turns HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {MAX_BODY_BYTES + 1}\r\n\r\n".encode()
        )
        # When the server reads the headers / Then it answers 413 at once and hangs up
        head, _, body = raw.makefile("rb").read().partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413")
    assert json.loads(body)["limit"] == MAX_BODY_BYTES


def test_a_chunked_body_is_refused(local, server):
    with server.connect() as raw:
        raw.sendall(b"POST /v1/turns HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        head, _, body = raw.makefile("rb").read().partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 411")
    assert json.loads(body)["errors"][0]["field"] == "Content-Length"


def test_a_slow_client_is_timed_out_without_stalling_the_others(local, server):
    # Given a client that sends half a body and then goes silent
    with server.connect() as slow:
        slow.sendall(b'POST /v1/turns HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"session')
        # When another client sends a whole request meanwhile
        other = server.request("POST", "/v1/turns", json.dumps(BODY).encode(), _json_headers(local))
        # Then the other is served, and the slow one gets a 408 once its socket times out
        assert other.status == 202
        head, _, body = slow.makefile("rb").read().partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408")
    assert json.loads(body)["error"] == "request_timeout"


def test_a_request_returns_after_stage_one_while_the_pipeline_runs_behind(
    local, server, monkeypatch
):
    # Given a pipeline whose persist stage is held until released
    persist = importlib.import_module("functions.persist.handler")
    release = threading.Event()
    real = persist.lambda_handler

    def held(event: dict[str, Any], context: Any) -> dict[str, Any]:
        assert release.wait(TIMEOUT_SECS)
        return real(event, context)

    monkeypatch.setattr(persist, "lambda_handler", held)
    # When turns are posted (a claim the rules understand: it goes on to persist)
    body = {**BODY, "turns": [{"role": "user", "content": "I live in Berlin."}]}
    posted = server.request("POST", "/v1/turns", json.dumps(body).encode(), _json_headers(local))
    # Then the 202 arrives while the pipeline is still held: the trace is in progress
    assert posted.status == 202
    path = f"/v1/traces/{posted.body['trace_id']}"
    assert server.request("GET", path, headers=_json_headers(local)).body["status"] == (
        "in_progress"
    )
    # And once released, the worker completes it
    release.set()
    server.wait_for_pipeline()
    assert server.request("GET", path, headers=_json_headers(local)).body["status"] == "complete"


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


def test_a_trace_is_rolled_back_over_http_and_the_worker_reindexes(local, server):
    # Given Paris, then a move to Berlin, each through the server's worker
    headers = _json_headers(local)
    traces = []
    for content, at in [("I live in Paris.", "2025-01-05"), ("I moved to Berlin.", "2025-06-01")]:
        body = {**BODY, "turns": [{"role": "user", "content": content, "timestamp": at}]}
        posted = server.request("POST", "/v1/turns", json.dumps(body).encode(), headers)
        traces.append(posted.body["trace_id"])
        server.wait_for_pipeline()

    # When the move is rolled back over HTTP, without a body
    rolled = server.request("POST", f"/v1/traces/{traces[1]}/rollback", headers=headers)
    server.wait_for_pipeline()

    # Then Paris is back and searchable, Berlin gone
    assert rolled.status == 200, rolled.body
    assert len(rolled.body["removed"]) == len(rolled.body["restored"]) == 1
    query = json.dumps({"user_id": "dana", "query": "Where does the user live?"}).encode()
    found = server.request("POST", "/v1/search", query, headers)
    assert [hit["value"] for hit in found.body["results"]] == ["Paris"]
