"""A turn's identity: tenant, user, session, role, content and the client's timestamp.

Two users of one session are two speakers; the same words said again later are a new
observation; a retry (same words, same timestamp) stays a duplicate end to end.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.integration.conftest import Local

BERLIN = "I live in Berlin now."
LISBON = "I live in Lisbon now."


def active_facts(local: Local, user_id: str) -> dict[str, str]:
    """attribute -> value of the user's memories that nothing superseded."""
    rows = local.table_items()[local.aws.handler_env()["MEMORIES_TABLE"]]
    docs = [json.loads(row["doc"]["S"]) for row in rows]
    return {
        doc["attribute"]: doc["value"]
        for doc in docs
        if doc["user_id"] == user_id and doc["superseded_by"] is None
    }


def _said(content: str, timestamp: str) -> dict[str, Any]:
    return {"role": "user", "content": content, "timestamp": timestamp}


def test_two_users_saying_the_same_words_in_one_session_both_get_their_memory(local, make_body):
    # Given dana's turn accepted in a shared session
    dana = local.post_turns(make_body(BERLIN, session_id="shared", user_id="dana"))
    assert dana.status == 202

    # When sam, in the same session, says exactly the same words
    sam = local.post_turns(make_body(BERLIN, session_id="shared", user_id="sam"))

    # Then sam's turn is his own (not a duplicate of dana's), and after the pipeline ran each
    # of them has the memory
    assert sam.status == 202
    assert sam.body["accepted"] == 1
    assert sam.body["duplicates"] == []
    assert sam.body["turn_ids"] != dana.body["turn_ids"]
    assert local.runner.drain().failed == {}
    assert active_facts(local, "dana") == {"lives_in": "Berlin"}
    assert active_facts(local, "sam") == {"lives_in": "Berlin"}


def test_saying_the_same_thing_again_later_is_a_new_observation(make_local, make_body):
    # Given a deployment without the rate gate (it judges bursts by receive time, and this whole
    # history arrives in one request), and a user who lived in Berlin, moved to Lisbon, then
    # moved back, saying so word for word
    local = make_local(config={"pipeline": {"pre_filter": {"rate_limit_window_secs": 0}}})
    moves = make_body(
        _said(BERLIN, "2025-01-10T08:00:00Z"),
        _said(LISBON, "2025-06-01T09:00:00Z"),
        _said(BERLIN, "2026-02-01T09:00:00Z"),
        user_id="sam",
    )

    # When the conversation is ingested and the pipeline runs
    first = local.post_turns(moves)
    assert local.runner.drain().failed == {}

    # Then the later "Berlin" is its own turn, and the current state says Berlin
    assert first.status == 202
    assert first.body["accepted"] == 3
    assert len(set(first.body["turn_ids"])) == 3
    assert active_facts(local, "sam") == {"lives_in": "Berlin"}


def test_reingesting_a_timestamped_conversation_is_a_no_op_end_to_end(local, make_body):
    # Given a timestamped conversation ingested once, through the whole pipeline
    moves = make_body(
        _said(BERLIN, "2025-01-10T08:00:00Z"),
        _said(LISBON, "2025-06-01T09:00:00Z"),
        user_id="sam",
    )
    first = local.post_turns(moves)
    assert local.runner.drain().failed == {}
    before = local.table_items()[local.aws.handler_env()["MEMORIES_TABLE"]]

    # When the same conversation is sent again (the same instants, one in another offset)
    again = dict(moves, turns=[dict(moves["turns"][0]), dict(moves["turns"][1])])
    again["turns"][1]["timestamp"] = "2025-06-01T10:00:00+01:00"
    second = local.post_turns(again)

    # Then every turn is a duplicate, nothing is queued, and the memories are unchanged
    assert second.status == 202
    assert second.body["turn_ids"] == first.body["turn_ids"]
    assert sorted(second.body["duplicates"]) == sorted(first.body["turn_ids"])
    assert local.take_messages() == []
    assert local.table_items()[local.aws.handler_env()["MEMORIES_TABLE"]] == before


def test_without_a_timestamp_the_same_words_in_a_session_are_the_same_turn(local, make_body):
    # Given a turn sent without a timestamp
    first = local.post_turns(make_body(BERLIN))

    # When the same words come again in the same session, again without a timestamp
    second = local.post_turns(make_body(BERLIN))

    # Then it is taken for a re-send (the documented rule): a duplicate, not a new observation
    assert second.body["turn_ids"] == first.body["turn_ids"]
    assert second.body["duplicates"] == first.body["turn_ids"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"user_id": "sam"}, "user_id"),
        ({"source": "agent_inferred"}, "source"),
        ({"agent_id": "other-bot"}, "agent_id"),
    ],
)
def test_idempotency_key_reused_with_another_sender_is_422(local, make_body, change, field):
    # Given a request accepted under an Idempotency-Key
    headers = {"Idempotency-Key": "req-42"}
    body = make_body(BERLIN, agent_id="support-bot")
    first = local.post_turns(body, headers=headers)
    assert first.status == 202
    queued = len(local.take_messages())
    rows_before = local.table_items()

    # When the same key comes with the same turns but another user, source or agent
    second = local.post_turns({**body, **change}, headers=headers)

    # Then it is refused naming the key and what changed, not replayed as the first trace,
    # and nothing more is queued
    assert second.status == 422
    assert [error["field"] for error in second.body["errors"]] == ["Idempotency-Key"]
    assert field in second.body["errors"][0]["message"]
    assert queued == 1
    assert local.take_messages() == []
    assert local.table_items() == rows_before
    trace = local.get_trace(first.body["trace_id"]).body
    assert (trace["user_id"], trace["turn_ids"]) == ("user-1", first.body["turn_ids"])
