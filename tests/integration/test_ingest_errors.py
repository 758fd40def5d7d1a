"""`POST /v1/turns` refusals: 400 invalid body, 401 credentials, 413 oversize.

Every refusal names the field at fault, is never a 500, and writes nothing: no message in the
queue, no ledger row, no trace, no span.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import functions.api.handler as api_handler
import functions.pre_filter.handler as pre_filter_handler

VALID_TURN = {"role": "user", "content": "I live in Berlin with my partner Alex."}


def _valid(**changes: Any) -> dict[str, Any]:
    return {"session_id": "s1", "user_id": "dana", "turns": [dict(VALID_TURN)], **changes}


def _assert_nothing_written(local) -> None:
    assert local.take_messages() == []
    assert all(rows == [] for rows in local.table_items().values())


def _without(body: dict[str, Any], field: str) -> dict[str, Any]:
    return {name: value for name, value in body.items() if name != field}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        pytest.param(_without(_valid(), "user_id"), "user_id", id="missing-user_id"),
        pytest.param(_without(_valid(), "session_id"), "session_id", id="missing-session_id"),
        pytest.param(_valid(turns=[]), "turns", id="empty-turns"),
        pytest.param(
            _valid(turns=[VALID_TURN, {"role": "bot", "content": "I am a bot."}]),
            "turns[1].role",
            id="bad-role",
        ),
        pytest.param(
            _valid(turns=[{"role": "user", "content": 42}]), "turns[0].content", id="content-int"
        ),
        pytest.param(
            _valid(turns=[{"role": "user", "content": ""}]), "turns[0].content", id="content-empty"
        ),
        pytest.param(
            _valid(turns=[{**VALID_TURN, "timestamp": "next tuesday"}]),
            "turns[0].timestamp",
            id="bad-timestamp",
        ),
        pytest.param(
            _valid(turns=[{**VALID_TURN, "mood": "happy"}]),
            "turns[0].mood",
            id="unknown-turn-field",
        ),
        pytest.param(_valid(priority="high"), "priority", id="unknown-field"),
        pytest.param(_valid(user_id="dana smith"), "user_id", id="user_id-with-space"),
        pytest.param(_valid(source="rumour"), "source", id="bad-source"),
        pytest.param(42, "body", id="json-number"),
        pytest.param([], "body", id="json-empty-array"),
    ],
)
def test_invalid_body_is_400_naming_the_field(local, body, field):
    # Given a request body that breaks the schema in one place
    raw = json.dumps(body)

    # When the agent posts it
    response = local.post_turns(raw)

    # Then it is refused with a 400 that names exactly that field, and nothing is written
    assert response.status == 400
    assert response.body["error"] == "invalid_request"
    assert [error["field"] for error in response.body["errors"]] == [field]
    assert all(error["message"] for error in response.body["errors"])
    _assert_nothing_written(local)


def _with_turn(**changes: Any) -> str:
    return json.dumps(_valid(turns=[{**VALID_TURN, **changes}]))


DEEP = 10_000
HUGE_INT = "9" * 4_301  # one digit over Python's default int_max_str_digits


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        pytest.param(
            '{"session_id": "s1", "user_id": "dana", "turns": ' + "[" * DEEP + "]" * DEEP + "}",
            "body",
            id="nested-10000-arrays",
        ),
        pytest.param('{"a": ' * DEEP + "1" + "}" * DEEP, "body", id="nested-10000-objects"),
        pytest.param(
            '{"session_id": ' + HUGE_INT + ', "user_id": "dana", "turns": []}',
            "body",
            id="huge-integer",
        ),
        pytest.param(
            _with_turn(timestamp=0).replace('"timestamp": 0', '"timestamp": ' + HUGE_INT),
            "body",
            id="huge-integer-timestamp",
        ),
        pytest.param(
            _with_turn(timestamp=0).replace('"timestamp": 0', '"timestamp": 1e999'),
            "turns[0].timestamp",
            id="infinite-timestamp",
        ),
        pytest.param(
            _with_turn(timestamp=0).replace('"timestamp": 0', '"timestamp": NaN'),
            "turns[0].timestamp",
            id="nan-timestamp",
        ),
        pytest.param(
            _with_turn(timestamp="2026-02-30T09:00:00Z"), "turns[0].timestamp", id="no-such-day"
        ),
        pytest.param(
            _with_turn(timestamp="2026-03-02T25:00:00Z"), "turns[0].timestamp", id="no-such-hour"
        ),
        pytest.param(_with_turn(timestamp=""), "turns[0].timestamp", id="empty-timestamp"),
        pytest.param(
            _with_turn(timestamp="9999-12-31T23:59:59Z"), "turns[0].timestamp", id="year-9999"
        ),
        pytest.param(
            _with_turn(content="I live in Berlin\u0000 with Alex."),
            "turns[0].content",
            id="nul-in-content",
        ),
        pytest.param(
            _with_turn(content="I live in \u001b[31mBerlin\u0007 now."),
            "turns[0].content",
            id="control-characters-in-content",
        ),
        pytest.param(
            _with_turn(content="I live in Berlin \ud800 with Alex."),
            "turns[0].content",
            id="lone-surrogate",
        ),
        pytest.param(json.dumps(_valid(session_id="s1\u0000")), "session_id", id="nul-in-id"),
        pytest.param(_with_turn(role="User"), "turns[0].role", id="role-capitalised"),
        pytest.param(_with_turn(role="user "), "turns[0].role", id="role-trailing-space"),
        pytest.param(_with_turn(role="us\u0435r"), "turns[0].role", id="role-cyrillic-e"),
        pytest.param(_with_turn(role="user\u0000"), "turns[0].role", id="role-with-nul"),
        pytest.param(_with_turn(role=["user"]), "turns[0].role", id="role-as-list"),
    ],
)
def test_hostile_body_is_400_not_500(local, raw, field):
    # Given a body a hostile or careless client might send: absurd nesting, numbers over the
    # parser's limits, characters no person typed, impossible dates, roles that only look right
    # When it is posted
    response = local.post_turns(raw)

    # Then it is a 400 naming the field at fault (never a crash or a 5xx), and nothing is written
    assert response.status == 400
    assert [error["field"] for error in response.body["errors"]] == [field]
    _assert_nothing_written(local)


@pytest.mark.parametrize("method", ["GET", "PUT", "PATCH", "DELETE"])
def test_wrong_method_on_turns_is_4xx(local, method):
    # Given a valid body
    # When it is sent with a method the route does not take
    response = local.runner.call(method, "/v1/turns", _valid())

    # Then it is a client error and nothing is written
    assert 400 <= response.status < 500
    _assert_nothing_written(local)


@pytest.mark.parametrize("raw", ['{"session_id": "s1", "turns": [', "", "not json at all"])
def test_unparseable_body_is_400_not_500(local, raw):
    # Given a body that is not JSON (or no body at all)
    # When the agent posts it
    response = local.post_turns(raw)

    # Then it is a 400 client error with field-level errors, and nothing is written
    assert response.status == 400
    assert response.body["errors"]
    _assert_nothing_written(local)


def test_invalid_json_names_the_body(local):
    # Given a truncated JSON document
    raw = '{"session_id": "s1", "turns": ['

    # When the agent posts it
    response = local.post_turns(raw)

    # Then the error names the body, not a character offset dressed up as a list index
    assert response.status == 400
    assert [error["field"] for error in response.body["errors"]] == ["body"]


def test_array_of_requests_is_400_not_half_processed(local):
    # Given an agent that batches two requests into one JSON array
    first = _valid(session_id="s1", user_id="dana")
    second = _valid(
        session_id="s2",
        user_id="sam",
        turns=[{"role": "user", "content": "I work at Globex as a site reliability engineer."}],
    )

    # When it posts the array
    response = local.post_turns(json.dumps([first, second]))

    # Then the body is refused as a whole (it is not an object): nothing is silently dropped
    assert response.status == 400
    assert [error["field"] for error in response.body["errors"]] == ["body"]
    _assert_nothing_written(local)


@pytest.mark.parametrize("api_key", [None, "not-a-known-key"], ids=["no-key", "unknown-key"])
def test_missing_or_unknown_api_key_is_401(local, api_key):
    # Given a valid request without a credential that maps to a tenant
    body = _valid()

    # When it is posted (with no x-api-key header, or an unknown one)
    event_headers = {} if api_key is None else {"x-api-key": api_key}
    response = local.runner.call("POST", "/v1/turns", body, headers=event_headers, api_key=None)

    # Then it is refused as unauthenticated and nothing is written
    assert response.status == 401
    assert response.body["error"] == "unauthenticated"
    _assert_nothing_written(local)


@pytest.mark.parametrize(
    "configured",
    [
        pytest.param({"config": {"api_keys": {"team-key": "team"}}}, id="config-file"),
        pytest.param({"api_keys": {"team-key": "team"}}, id="MEMWRITE_API_KEYS"),
    ],
)
def test_configured_api_keys_replace_the_default_key(make_local, configured):
    # Given a deployment whose configuration defines its own API keys
    local = make_local(**configured)

    # When the default local key and a configured key are used
    with_default = local.post_turns(_valid(), api_key="local-dev-key")
    with_configured = local.post_turns(_valid(), api_key="team-key")

    # Then only the configured key is valid
    assert with_default.status == 401
    assert with_configured.status == 202
    assert {m["tenant"] for m in local.take_bodies()} == {"team"}


def test_api_keys_from_the_shell_are_honoured(make_local, monkeypatch):
    # Given MEMWRITE_API_KEYS set in the environment the local AWS starts from (as a shell
    # running `memwrite serve` would have it)
    monkeypatch.setenv("MEMWRITE_API_KEYS", "shell-key=shell")

    # When the local AWS starts and both keys are tried
    local = make_local()
    with_shell_key = local.post_turns(_valid(), api_key="shell-key")
    with_default = local.post_turns(_valid(), api_key="local-dev-key")

    # Then the shell's key set is the one in force
    assert with_shell_key.status == 202
    assert with_default.status == 401


def test_trace_read_without_credential_is_401(local):
    # Given a trace written by an authenticated client
    trace_id = local.post_turns(_valid()).body["trace_id"]

    # When it is read without an API key
    response = local.runner.call("GET", f"/v1/traces/{trace_id}", api_key=None)

    # Then the read is refused
    assert response.status == 401


def test_tenant_comes_from_the_authorizer_without_an_api_key(local, load_api_event):
    # Given an API Gateway event whose Lambda authorizer resolved tenant "acme" (no x-api-key)
    event = load_api_event("post_turns_authorizer")
    assert "x-api-key" not in {name.lower() for name in event["headers"]}

    # When API Gateway invokes the pre_filter function with it
    response = local.invoke(pre_filter_handler, event)

    # Then the request is accepted and the queued survivor belongs to tenant "acme"
    assert response.status == 202
    queued = local.take_bodies()
    assert [(m["tenant"], m["user_id"]) for m in queued] == [("acme", "dana")]
    # And its trace is readable by "acme" through the authorizer, but not by the local key
    trace_event = load_api_event("get_trace_authorizer")
    trace_path = f"/v1/traces/{response.body['trace_id']}"
    trace_event["path"] = trace_path
    trace_event["pathParameters"] = {"trace_id": response.body["trace_id"]}
    assert local.invoke(api_handler, trace_event).status == 200
    assert local.get_trace(response.body["trace_id"]).status == 404


def test_authorizer_tenant_wins_over_an_api_key(local, load_api_event):
    # Given an authorizer event for "acme" that also carries the local API key (tenant "local")
    event = load_api_event("post_turns_authorizer")
    event["headers"]["x-api-key"] = local.api_key
    event["multiValueHeaders"]["x-api-key"] = [local.api_key]

    # When the pre_filter function handles it
    response = local.invoke(pre_filter_handler, event)

    # Then the credential the authorizer verified decides the tenant
    assert response.status == 202
    assert {m["tenant"] for m in local.take_bodies()} == {"acme"}


def test_tenant_in_the_body_is_refused(local, load_api_event):
    # Given an authenticated "acme" request whose body tries to name another tenant
    event = load_api_event("post_turns_authorizer")
    body = json.loads(event["body"])
    event["body"] = json.dumps({**body, "tenant": "globex"})

    # When the pre_filter function handles it
    response = local.invoke(pre_filter_handler, event)

    # Then the body is invalid (the tenant is not a body field) and nothing is written
    assert response.status == 400
    assert [error["field"] for error in response.body["errors"]] == ["tenant"]
    _assert_nothing_written(local)


LIMITS = {"max_body_bytes": 4096, "max_turns_per_request": 5, "max_chars_per_turn": 300}


@pytest.fixture
def limited(make_local):
    """A deployment with small ingest limits, loaded from a `MEMWRITE_CONFIG` file."""
    return make_local(config={"pipeline": {"ingest": LIMITS}})


def test_limits_are_inclusive(limited, make_body):
    # Given a request exactly at the turn-count and per-turn limits, under the byte limit
    turns = [f"Fact number {n} about my work: " + "x" * 300 for n in range(5)]
    turns = [text[:300] for text in turns]
    body = make_body(*turns)
    assert len(json.dumps(body).encode()) <= LIMITS["max_body_bytes"]

    # When it is posted
    response = limited.post_turns(body)

    # Then it is accepted
    assert response.status == 202


def test_body_over_max_body_bytes_is_413(limited, make_body):
    # Given 3 turns of 250 characters each (within the turn limits) whose JSON is over 4 KiB
    body = make_body(*["Grüße aus München " + "ü" * 232] * 3)
    raw = json.dumps(body)  # ensure_ascii: each "ü" costs 6 bytes
    assert len(raw.encode()) > LIMITS["max_body_bytes"]

    # When it is posted
    response = limited.post_turns(raw)

    # Then it is refused as too large, naming the body and the limit, and nothing is written
    assert response.status == 413
    assert response.body["errors"][0]["field"] == "body"
    assert response.body["limit"] == LIMITS["max_body_bytes"]
    _assert_nothing_written(limited)


def test_more_turns_than_allowed_is_413(limited, make_body):
    # Given 6 short turns where at most 5 are allowed
    body = make_body(*[f"I visited city number {n} this year." for n in range(6)])

    # When it is posted
    response = limited.post_turns(body)

    # Then it is refused naming the turns list, and nothing is written
    assert response.status == 413
    assert [error["field"] for error in response.body["errors"]] == ["turns"]
    assert response.body["limit"] == LIMITS["max_turns_per_request"]
    _assert_nothing_written(limited)


def test_turn_over_max_chars_is_413_naming_the_turn(limited, make_body):
    # Given four turns where only the fourth is longer than 300 characters
    short = "I live in Berlin with my partner Alex."
    body = make_body(short, short + " Really.", short + " Truly.", "I like " + "tea " * 80)
    assert len(body["turns"][3]["content"]) > LIMITS["max_chars_per_turn"]

    # When it is posted
    response = limited.post_turns(body)

    # Then it is refused naming that turn's content, and nothing (not even the short turns)
    # is written
    assert response.status == 413
    assert [error["field"] for error in response.body["errors"]] == ["turns[3].content"]
    assert response.body["limit"] == LIMITS["max_chars_per_turn"]
    _assert_nothing_written(limited)


def test_timestamp_beyond_the_clock_skew_is_400_naming_the_turn(make_local, make_body):
    # Given a deployment that allows clocks to run one hour ahead
    local = make_local(config={"pipeline": {"ingest": {"max_clock_skew_secs": 3600}}})
    now = datetime.now(UTC)

    def said(ahead: timedelta) -> dict[str, Any]:
        return {**VALID_TURN, "timestamp": (now + ahead).isoformat()}

    # When one turn is dated 30 minutes ahead and the next two hours ahead
    body = make_body(said(timedelta(minutes=30)), said(timedelta(hours=2)))
    refused = local.post_turns(body)

    # Then the request is refused naming the second turn's timestamp, and nothing is written
    assert refused.status == 400
    assert [error["field"] for error in refused.body["errors"]] == ["turns[1].timestamp"]
    assert refused.body["max_clock_skew_secs"] == 3600
    _assert_nothing_written(local)
    # And a turn within the skew is accepted
    assert local.post_turns(make_body(said(timedelta(minutes=30)))).status == 202


@pytest.mark.parametrize(
    ("body", "status"),
    [
        pytest.param("!!not base64", 400, id="not-base64"),
        pytest.param(base64.b64encode(b"\xff\xfe").decode(), 400, id="not-utf8"),
        pytest.param(base64.b64encode(json.dumps(_valid()).encode()).decode(), 202, id="valid"),
    ],
)
def test_base64_encoded_body_is_decoded_or_refused(local, load_api_event, body, status):
    # Given an API Gateway event whose body came base64-encoded (a binary media type)
    event = load_api_event("post_turns_authorizer")
    event["body"] = body
    event["isBase64Encoded"] = True

    # When the pre_filter function handles it
    response = local.invoke(pre_filter_handler, event)

    # Then valid text is processed as any body, and anything else is a 400 naming the body
    assert response.status == status
    if status == 400:
        assert [error["field"] for error in response.body["errors"]] == ["body"]
        _assert_nothing_written(local)
