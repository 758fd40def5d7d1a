"""An import passes the API's guards (through the real handlers, moto and SQLite): a secret in
any imported text refuses its line with a 400 naming the line, the field and the kind, a field
out of the API's bounds is a 400 naming it, and nothing is written either way. And import over
HTTP takes what export over HTTP gives: an export of over 1 MB round-trips through the handler
and through `memwrite serve`'s server, whose ingest body limit (256 KiB) is far below it."""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from memwrite.config.settings import IngestLimits
from memwrite_local.runtime.server import LocalServer, make_server
from tests.integration.conftest import Local, MakeLocal
from tests.reliability.final_state import final_state

USER = "dana"
NDJSON = {"Content-Type": "application/x-ndjson"}
TURNS = [
    {"role": "user", "content": "I live in Berlin.", "timestamp": "2025-01-05T10:00:00Z"},
    {
        "role": "user",
        "content": "We packed everything up and settled in Porto this May, Lisbon got too pricey.",
        "timestamp": "2025-06-02T09:00:00Z",
    },
]
ONE_MB = 1_048_576


@pytest.fixture(params=["moto", "sqlite"])
def local(make_local: MakeLocal, request: pytest.FixtureRequest) -> Local:
    return make_local(backend=str(request.param))


def _ingest(local: Local) -> None:
    body = {"session_id": "s-1", "user_id": USER, "turns": TURNS}
    assert local.post_turns(body).status == 202
    assert local.runner.drain().failed == {}


def _export(local: Local) -> str:
    result = local.runner.call("GET", f"/v1/users/{USER}/export")
    assert result.status == 200, result.body
    return result.text


def _import(local: Local, text: str) -> Any:
    return local.runner.call("POST", f"/v1/users/{USER}/import", text, headers=NDJSON)


def _with_line(exported: str, kind: str, change: Any) -> tuple[str, int]:
    """The export with the first line of `kind` changed; and that line's number."""
    lines = exported.splitlines()
    at = next(i for i, line in enumerate(lines) if json.loads(line)["kind"] == kind)
    record = json.loads(lines[at])
    change(record)
    lines[at] = json.dumps(record)
    return "\n".join(lines) + "\n", at + 1


SECRETS = "My password is hunter2hunter2 and card 4111111111111111."


def _set_text(record: dict[str, Any]) -> None:
    record["episode"]["turn"]["text"] = SECRETS


def _set_preceding(record: dict[str, Any]) -> None:
    # The turn before, which search indexes with the episode: its words pass the firewall too.
    record["episode"]["turn"]["preceding"] = SECRETS


def _set_confidence(record: dict[str, Any]) -> None:
    record["memory"]["confidence"] = 7.5


def _set_question(record: dict[str, Any]) -> None:
    record["memory"]["search_questions"] = ["Mail me at dana@example.com?"]


@pytest.mark.parametrize(
    ("kind", "change", "field", "says"),
    [
        ("episode", _set_text, "episode.turn.text", "password"),
        ("episode", _set_preceding, "episode.turn.preceding", "password"),
        ("memory", _set_question, "memory.search_questions[0]", "email"),
        ("memory", _set_confidence, "memory.confidence", "less than or equal to 1"),
    ],
)
def test_an_import_the_api_would_refuse_is_a_400_and_writes_nothing(
    local: Local, kind: str, change: Any, field: str, says: str
) -> None:
    # Given an export of a user with a memory and an episode, then the user erased
    _ingest(local)
    exported = _export(local)
    local.runner.call("DELETE", f"/v1/users/{USER}/memories")
    empty = final_state(local)
    # When a line of it is changed the way the API would never have stored it, and imported
    body, line = _with_line(exported, kind, change)
    refused = _import(local, body)
    # Then a 400 names the line, the field and the kind, and nothing was written
    assert refused.status == 400, refused.body
    assert refused.body["line"] == line
    assert refused.body["errors"][0]["field"] == field
    assert says in refused.body["errors"][0]["message"]
    assert final_state(local) == empty
    # And the same turn sent to /v1/turns is refused by the same firewall
    if kind == "episode":
        turn = {"role": "user", "content": "My password is hunter2hunter2, remember it."}
        sent = local.post_turns({"session_id": "s-2", "user_id": USER, "turns": [turn]})
        assert sent.body["skipped"][0]["reason"]["type"] == "PolicyBlocked"


def _big_export(local: Local) -> str:
    """A real export line of an episode, repeated under new ids to more than 1 MB."""
    _ingest(local)
    deadline = time.monotonic() + 30  # a served test's queue worker may hold the batch
    while True:
        lines = _export(local).splitlines()
        episodes = [line for line in lines if json.loads(line)["kind"] == "episode"]
        if episodes or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    header = lines[0]
    episode = json.loads(episodes[0])
    copies = []
    while sum(len(line) + 1 for line in copies) < ONE_MB * 1.2:
        turn_id = uuid.uuid4().hex
        record = json.loads(json.dumps(episode))
        record["episode"]["turn"]["turn_id"] = turn_id
        record["episode"]["turn"]["text"] += f" Note {len(copies)}."
        copies.append(json.dumps(record))
    local.runner.call("DELETE", f"/v1/users/{USER}/memories")
    return "\n".join([header, *copies]) + "\n"


def test_an_export_of_over_1_mb_round_trips_through_the_handler(make_local: MakeLocal) -> None:
    # Given a user whose export is over 1 MB (imported once to build it)
    local = make_local(backend="sqlite")
    assert _import(local, _big_export(local)).status == 200
    exported = _export(local)
    assert len(exported.encode()) > ONE_MB
    # When the user is erased and the export imported back through the handler
    local.runner.call("DELETE", f"/v1/users/{USER}/memories")
    answer = _import(local, exported)
    # Then it is taken whole, and the store exports the same bytes
    assert answer.status == 200, answer.body
    assert _export(local) == exported


@pytest.fixture
def served(make_local: MakeLocal) -> Iterator[tuple[Local, str, LocalServer]]:
    local = make_local(backend="sqlite")
    limits = IngestLimits()
    httpd = make_server(
        local.runner,
        0,
        max_body_bytes=limits.max_body_bytes,
        max_import_bytes=limits.max_import_bytes,
    )
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield local, f"http://127.0.0.1:{httpd.server_address[1]}", httpd
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


def _http(base: str, method: str, path: str, key: str, body: bytes | None = None) -> Any:
    headers = {"x-api-key": key, **(NDJSON if body is not None else {})}
    request = urllib.request.Request(base + path, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_an_export_of_over_1_mb_round_trips_over_http(
    served: tuple[Local, str, LocalServer],
) -> None:
    # Given `memwrite serve` (ingest bodies up to 256 KiB) and a user exporting over 1 MB
    local, base, _ = served
    big = _big_export(local).encode()
    path = f"/v1/users/{USER}/import"
    assert _http(base, "POST", path, local.api_key, big)[0] == 200
    status, exported = _http(base, "GET", f"/v1/users/{USER}/export", local.api_key)
    assert status == 200 and len(exported) > IngestLimits().max_body_bytes * 4
    # When the user is erased and the export posted back over HTTP
    assert _http(base, "DELETE", f"/v1/users/{USER}/memories", local.api_key)[0] == 200
    status, answer = _http(base, "POST", path, local.api_key, exported)
    # Then it is imported (no 413), and exports the same bytes again
    assert status == 200, answer[:500]
    assert _http(base, "GET", f"/v1/users/{USER}/export", local.api_key) == (200, exported)
    # And an ingest body of the same size is still a 413 (its own limit)
    assert _status_before_body(base, "/v1/turns", local.api_key, len(exported)) == 413


def _status_before_body(base: str, path: str, key: str, length: int) -> int:
    """The status `memwrite serve` answers to a POST declaring `length` bytes, read before the
    body is sent: the server refuses an oversized body from its Content-Length alone and
    closes the connection, so a client still sending would meet a broken pipe."""
    host, port = base.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        connection.putrequest("POST", path)
        connection.putheader("x-api-key", key)
        connection.putheader("Content-Length", str(length))
        connection.endheaders()
        return connection.getresponse().status
    finally:
        connection.close()


def test_an_import_of_an_excluded_topic_is_a_400_and_writes_nothing(local: Local) -> None:
    # Given an export holding a location memory, the user erased, then location excluded
    _ingest(local)
    exported = _export(local)
    local.runner.call("DELETE", f"/v1/users/{USER}/memories")
    body = {"extraction": {"exclude_topics": ["location"]}}
    assert local.runner.call("PUT", "/v1/settings", body).status == 200
    empty = final_state(local)
    # When the export is imported
    refused = _import(local, exported)
    # Then the memory's line is refused naming its topic, and nothing is written
    assert refused.status == 400, refused.body
    assert refused.body["errors"][0]["field"] == "memory.topic"
    assert final_state(local) == empty
