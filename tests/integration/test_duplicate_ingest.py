"""Re-ingesting the same turns is a no-op: duplicates are reported, never enqueued twice."""

from __future__ import annotations

CONVERSATION = (
    "hi",
    "I live in Berlin with my partner Alex and our dog Pixel.",
    ("assistant", "Berlin is a great city. Anything else?"),
    "Yeah, got it. By the way my team is switching from Jira to Linear next month.",
    "Priya said the Inbox3 deadline is Friday",
)


def _survivors(response) -> list[str]:
    skipped = {item["turn_id"] for item in response.body["skipped"]}
    return [tid for tid in response.body["turn_ids"] if tid not in skipped]


def test_same_request_twice_enqueues_each_survivor_once(local, make_body):
    # Given a request whose three survivors were accepted once
    body = make_body(*CONVERSATION)
    first = local.post_turns(body)
    assert first.status == 202
    survivors = _survivors(first)
    assert first.body["accepted"] == len(survivors) == 3

    # When the client re-sends exactly the same request (a retry after a timeout)
    second = local.post_turns(body)

    # Then nothing new is accepted: the survivors are reported as duplicates, not as failures
    # and not as rate-limited; the skips are reported again with the same reasons
    assert second.status == 202
    assert second.body["accepted"] == 0
    assert sorted(second.body["duplicates"]) == sorted(survivors)
    assert second.body["failed"] == []
    assert second.body["turn_ids"] == first.body["turn_ids"]
    assert second.body["skipped"] == first.body["skipped"]
    # And the queue holds each survivor exactly once
    assert sorted(m["turn_id"] for m in local.take_bodies()) == sorted(survivors)
    # Without an Idempotency-Key every request opens its own trace
    assert second.body["trace_id"] != first.body["trace_id"]


def test_idempotency_key_reuses_the_trace(local, make_body):
    # Given a request sent with an Idempotency-Key
    body = make_body(*CONVERSATION)
    headers = {"Idempotency-Key": "retry-7f3a"}
    first = local.post_turns(body, headers=headers)

    # When the client retries it with the same key
    second = local.post_turns(body, headers=headers)

    # Then both responses carry the same trace id, and the retry enqueues nothing new
    assert first.status == second.status == 202
    assert second.body["trace_id"] == first.body["trace_id"]
    assert second.body["accepted"] == 0
    assert sorted(second.body["duplicates"]) == sorted(_survivors(first))
    assert len(local.take_messages()) == 3
    # And another key opens another trace
    third = local.post_turns(body, headers={"Idempotency-Key": "retry-other"})
    assert third.body["trace_id"] != first.body["trace_id"]


def test_a_turn_repeated_inside_one_request_is_one_turn(local, make_body):
    # Given a request that carries the same user turn twice in the same session
    fact = "I live in Berlin with my partner Alex and our dog Pixel."
    body = make_body(fact, "Priya said the Inbox3 deadline is Friday", fact)

    # When it is posted
    response = local.post_turns(body)

    # Then both positions carry the same id, it is accepted once and queued once (its two
    # spans share one DynamoDB key: the batch stays valid, no false 503)
    assert response.status == 202
    ids = response.body["turn_ids"]
    assert ids[0] == ids[2] != ids[1]
    assert response.body["accepted"] == 2
    assert response.body["skipped"] == []
    assert sorted(m["turn_id"] for m in local.take_bodies()) == sorted({ids[0], ids[1]})


def test_idempotent_retry_leaves_the_trace_unchanged(local, make_body):
    # Given a request sent with an Idempotency-Key, whose trace shows its survivors passing
    body = make_body(*CONVERSATION)
    headers = {"Idempotency-Key": "retry-unchanged"}
    first = local.post_turns(body, headers=headers)
    before = local.get_trace(first.body["trace_id"]).body

    # When the client retries it with the same key
    local.post_turns(body, headers=headers)

    # Then the trace still says what happened: its survivors passed, nothing more was discarded
    after = local.get_trace(first.body["trace_id"]).body
    results = {span["item_id"]: span["result"] for span in after["spans"]}
    assert all(results[tid] == "pass" for tid in _survivors(first))
    assert after["outcome"] == before["outcome"]


def test_idempotency_key_reused_for_another_body_does_not_corrupt_the_trace(local, make_body):
    # Given a trace opened by a request with an Idempotency-Key
    headers = {"Idempotency-Key": "reused-key"}
    first = local.post_turns(
        make_body("I live in Berlin with my partner Alex.", session_id="s1"), headers=headers
    )

    # When a different request is sent with the same key (a client bug)
    second = local.post_turns(
        make_body("I work at Globex as a site reliability engineer.", session_id="s2"),
        headers=headers,
    )

    # Then it is either refused, or it leaves the first trace self-consistent: every span
    # belongs to a turn the trace lists, and the first request's turn is still accounted for
    assert second.status in (202, 409, 422)
    trace = local.get_trace(first.body["trace_id"]).body
    assert {span["item_id"] for span in trace["spans"]} == set(trace["turn_ids"])
    assert first.body["turn_ids"][0] in trace["turn_ids"]


def test_retry_of_a_request_with_a_repeated_turn_is_a_duplicate_not_a_503(local, make_body):
    # Given an accepted request that carries the same turn twice
    fact = "I live in Berlin with my partner Alex and our dog Pixel."
    body = make_body(fact, fact)
    assert local.post_turns(body).status == 202

    # When the client sends it again
    retry = local.post_turns(body)

    # Then the retry is told the turn is already in, and nothing is queued again
    assert retry.status == 202
    assert retry.body["duplicates"] == [retry.body["turn_ids"][0]]
    assert len(local.take_messages()) == 1
