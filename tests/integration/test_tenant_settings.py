"""`GET|PUT /v1/settings` through the real handlers on both backends (moto and SQLite): stored
per tenant, validated by the config file's models, and applied by the pre-filter (ingest) and
extraction on the next request."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from tests.integration.conftest import Local, MakeLocal

USER = "dana"
KEYS = {"key-a": "tenant-a", "key-b": "tenant-b"}
SETTINGS: dict[str, Any] = {
    "user_skip_patterns": [{"name": "standup", "pattern": "standup notes?:.*"}],
    "extraction": {
        "instructions": "Remember the tools the user works with.",
        "topics": [{"name": "tools", "description": "Software the user works with."}],
        "exclude_topics": ["health"],
    },
    "webhooks": [
        {
            "url": "https://hooks.example.com/memwrite",
            "secret": "0123456789abcdef0123",
            "events": ["memory.created", "memory.superseded"],
        }
    ],
}


@pytest.fixture(params=["moto", "sqlite"])
def local(request: pytest.FixtureRequest, make_local: MakeLocal) -> Local:
    return make_local(api_keys=KEYS, backend=request.param)


def put(local: Local, body: Any, key: str = "key-a") -> Any:
    return local.runner.call("PUT", "/v1/settings", body, api_key=key)


def get(local: Local, key: str = "key-a") -> Any:
    return local.runner.call("GET", "/v1/settings", api_key=key)


def test_settings_are_stored_for_the_callers_tenant_only(local: Local) -> None:
    # Given a tenant with no stored settings
    assert get(local).body["extraction"] is None
    # When it stores its settings
    stored = put(local, SETTINGS)
    # Then they come back as stored, and another tenant's are untouched
    assert stored.status == 200, stored.body
    again = get(local)
    assert again.status == 200
    assert again.body == stored.body
    assert again.body["extraction"]["exclude_topics"] == ["health"]
    assert again.body["webhooks"][0]["events"] == ["memory.created", "memory.superseded"]
    assert get(local, "key-b").body["webhooks"] is None


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"extraction": {"instructions": "x" * 2_001}}, "extraction.instructions"),
        ({"extraction": {"topics": [{"name": "tools"}]}}, "extraction.topics[0].description"),
        ({"user_skip_patterns": [{"name": "bad", "pattern": "("}]}, "user_skip_patterns[0]"),
        ({"allowed_pii": ["password"]}, "allowed_pii"),
        (
            {"webhooks": [{"url": "http://example.com", "secret": "s" * 20, "events": []}]},
            "webhooks[0]",
        ),
        ({"verifier_min_importance": 2}, "verifier_min_importance"),
        *(
            (
                {"webhooks": [{"url": url, "secret": "s" * 20, "events": ["memory.created"]}]},
                "webhooks[0].url",
            )
            for url in (
                "https://169.254.169.254/latest/meta-data/",  # the metadata service
                "https://10.1.2.3/hook",
                "https://[::1]/hook",
                "https://0x7f000001/hook",
                "http://127.0.0.1:9001/2018-06-01/runtime",  # no loopback on this deployment
            )
        ),
        ({"tenant": "someone-else"}, "tenant"),
    ],
)
def test_bad_settings_are_400_naming_the_field_and_nothing_is_stored(
    local: Local, body: dict[str, Any], field: str
) -> None:
    # Given stored settings
    assert put(local, SETTINGS).status == 200
    # When a bad document is PUT
    refused = put(local, body)
    # Then it is a 400 naming the field, and the stored settings are unchanged
    assert refused.status == 400, refused.body
    assert any(error["field"].startswith(field) for error in refused.body["errors"]), refused.body
    assert get(local).body["extraction"]["exclude_topics"] == ["health"]


def test_a_webhook_name_that_resolves_inside_is_400_naming_the_url(
    local: Local, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a name whose DNS answers a private address
    def resolve(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        assert host == "inside.example.com"
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.7", port))]

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    hook = {"url": "https://inside.example.com/h", "secret": "s" * 20, "events": ["user.erased"]}
    # When it is PUT as a webhook / Then it is refused, naming the URL and the address
    refused = put(local, {"webhooks": [hook]})
    assert refused.status == 400, refused.body
    assert refused.body["errors"][0]["field"] == "webhooks[0].url"
    assert "10.0.0.7" in refused.body["errors"][0]["message"]
    assert get(local).body["webhooks"] is None


def test_a_body_that_is_no_object_is_400(local: Local) -> None:
    assert put(local, "[1, 2]").status == 400
    assert put(local, "{not json").status == 400


def reasons_in(local: Local, trace_id: str) -> list[dict[str, Any]]:
    trace = local.get_trace(trace_id, api_key="key-a")
    assert trace.status == 200, trace.body
    return [span["reason"] for span in trace.body["spans"] if span.get("reason")]


def test_stored_settings_steer_the_pre_filter_and_extraction(local: Local) -> None:
    # Given tenant A's skip pattern and excluded topic
    assert put(local, SETTINGS).status == 200
    turns = [
        {"role": "user", "content": "Standup notes: shipped the login page today."},
        {"role": "user", "content": "I live in Berlin."},
        {"role": "user", "content": "I am allergic to peanuts."},
    ]
    # When tenant A and tenant B send the same turns
    traces = {}
    for key in KEYS:
        body = {"session_id": "s-1", "user_id": USER, "turns": turns}
        answer = local.post_turns(body, api_key=key)
        assert answer.status == 202, answer.body
        traces[key] = answer.body["trace_id"]
        skipped = [entry["reason"]["type"] for entry in answer.body["skipped"]]
        # Then only tenant A's pre-filter drops the standup note (its own rule)
        assert skipped == (["UserRule"] if key == "key-a" else [])
    report = local.runner.drain()
    assert report.failed == {}
    # And only tenant A loses the health memory, to its topic filter
    assert values_of(local, "key-a") == {"Berlin"}
    assert {"type": "ExcludedTopic", "topic": "health"} in reasons_in(local, traces["key-a"])
    assert values_of(local, "key-b") == {"Berlin", "peanuts"}


def values_of(local: Local, key: str) -> set[str]:
    listed = local.runner.call("GET", f"/v1/users/{USER}/memories", api_key=key)
    assert listed.status == 200, listed.body
    return {memory["value"] for memory in listed.body["memories"]}
