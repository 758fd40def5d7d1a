"""Rate gate: identical content from one user within the window is skipped, across instances."""

from __future__ import annotations

import functions.pre_filter.handler as pre_filter_handler
from memwrite_local.runtime.aws import LOCAL_API_KEY

FACT = "I live in Berlin with my partner Alex and our dog Pixel."
RATE_LIMITED = {"type": "RateLimited", "window_secs": 60}


def _reason_of(response) -> dict | None:
    skipped = {item["turn_id"]: item["reason"] for item in response.body["skipped"]}
    return skipped.get(response.body["turn_ids"][0])


def test_same_content_from_same_user_in_another_session_is_rate_limited(local, make_body):
    # Given a user whose fact was accepted in one session
    first = local.post_turns(make_body(FACT, session_id="s1"))
    assert first.body["accepted"] == 1

    # When the same content arrives from another session within the 60 s window
    second = local.post_turns(make_body(FACT, session_id="s2"))

    # Then it is skipped as rate-limited, and only the first one is queued
    assert second.status == 202
    assert second.body["accepted"] == 0
    assert _reason_of(second) == RATE_LIMITED
    assert [m["session_id"] for m in local.take_bodies()] == ["s1"]


def test_rate_gate_holds_across_lambda_instances(local, make_body):
    # Given a fact accepted by one Lambda instance
    assert local.post_turns(make_body(FACT, session_id="s1")).body["accepted"] == 1

    # When a new instance (empty in-process cache) receives it from another session
    pre_filter_handler.deps.cache_clear()
    second = local.post_turns(make_body(FACT, session_id="s2"))

    # Then the shared DynamoDB claim still rate-limits it
    assert _reason_of(second) == RATE_LIMITED
    assert len(local.take_messages()) == 1


def test_resending_the_same_turn_is_a_duplicate_not_rate_limited(local, make_body):
    # Given a fact accepted in session s1, and the same content rate-limited in session s2
    first = local.post_turns(make_body(FACT, session_id="s1"))
    assert _reason_of(local.post_turns(make_body(FACT, session_id="s2"))) == RATE_LIMITED

    # When the client re-sends the s1 turn, to this instance and to a fresh one
    same_instance = local.post_turns(make_body(FACT, session_id="s1"))
    pre_filter_handler.deps.cache_clear()
    new_instance = local.post_turns(make_body(FACT, session_id="s1"))

    # Then each time it is recognised as the same turn: a duplicate, never rate-limited
    for resent in (same_instance, new_instance):
        assert resent.status == 202
        assert resent.body["skipped"] == []
        assert resent.body["duplicates"] == first.body["turn_ids"]
    assert len(local.take_messages()) == 1


def test_rate_gate_is_scoped_to_tenant_and_user(make_local, make_body):
    # Given two tenants, and a fact accepted for tenant "local"'s user dana
    local = make_local(api_keys={LOCAL_API_KEY: "local", "other-key": "other"})
    assert local.post_turns(make_body(FACT, user_id="dana")).body["accepted"] == 1

    # When the same content arrives from another user, and from the other tenant's dana
    other_user = local.post_turns(make_body(FACT, session_id="s2", user_id="sam"))
    other_tenant = local.post_turns(
        make_body(FACT, session_id="s3", user_id="dana"), api_key="other-key"
    )

    # Then neither is rate-limited: repeats only count within one tenant's user
    assert other_user.body["accepted"] == 1
    assert other_tenant.body["accepted"] == 1
    assert len(local.take_messages()) == 3


def test_rate_window_is_configurable_per_tenant(make_local, make_body):
    # Given tenant "local" configured with no rate window (0 s disables the gate)
    local = make_local(config={"tenants": {"local": {"rate_limit_window_secs": 0}}})

    # When the same content arrives from two sessions
    first = local.post_turns(make_body(FACT, session_id="s1"))
    second = local.post_turns(make_body(FACT, session_id="s2"))

    # Then both are accepted
    assert first.body["accepted"] == second.body["accepted"] == 1
    assert len(local.take_messages()) == 2


def test_a_history_is_rate_limited_by_when_its_turns_were_said(local, make_body):
    # Given one request replaying a history: the same words minutes apart, then seconds apart
    said = [
        ("2026-03-02T09:00:00Z", FACT),
        ("2026-03-02T09:04:00Z", FACT),
        ("2026-03-02T09:04:20Z", FACT),
    ]
    body = make_body(*({"role": "user", "content": c, "timestamp": t} for t, c in said))
    # When it is ingested
    response = local.post_turns(body)
    # Then the repeat four minutes later counts, the one twenty seconds after it is limited
    skipped = {item["turn_id"]: item["reason"] for item in response.body["skipped"]}
    assert response.body["accepted"] == 2
    assert [skipped.get(tid) for tid in response.body["turn_ids"]] == [None, None, RATE_LIMITED]


def test_resending_a_history_reports_every_turn_a_duplicate_whatever_the_window(local, make_body):
    # Given a history accepted once: the same words four minutes apart, each turn accepted
    said = [("2026-03-02T09:00:00Z", FACT), ("2026-03-02T09:04:00Z", FACT)]
    body = make_body(*({"role": "user", "content": c, "timestamp": t} for t, c in said))
    first = local.post_turns(body)
    assert first.body["accepted"] == 2

    # When the client re-sends it (the later turn now holds the rate slot of those words)
    resent = local.post_turns(body)

    # Then every turn is a duplicate, none rate-limited, and nothing is queued twice
    assert resent.status == 202
    assert resent.body["skipped"] == []
    assert resent.body["duplicates"] == sorted(first.body["turn_ids"])
    assert resent.body["accepted"] == 0
    assert len(local.take_messages()) == 2


def test_a_turn_accepted_before_the_window_moved_on_is_still_a_duplicate(local, make_body):
    # Given a turn accepted at 09:00, and the same words accepted again from another session
    # at 09:05 (after the 60 s window), which now holds the rate slot
    early = {"role": "user", "content": FACT, "timestamp": "2026-03-02T09:00:00Z"}
    later = {"role": "user", "content": FACT, "timestamp": "2026-03-02T09:05:00Z"}
    first = local.post_turns(make_body(early, session_id="s1"))
    assert local.post_turns(make_body(later, session_id="s2")).body["accepted"] == 1

    # When the 09:00 turn is re-sent, to this instance and to a fresh one
    same_instance = local.post_turns(make_body(early, session_id="s1"))
    pre_filter_handler.deps.cache_clear()
    new_instance = local.post_turns(make_body(early, session_id="s1"))

    # Then it is a duplicate each time, not rate-limited, and its trace span says so
    for resent in (same_instance, new_instance):
        assert resent.body["skipped"] == []
        assert resent.body["duplicates"] == first.body["turn_ids"]
    trace = local.get_trace(new_instance.body["trace_id"])
    assert [s["reason"]["type"] for s in trace.body["spans"]] == ["DuplicateTurn"]
    assert len(local.take_messages()) == 2
