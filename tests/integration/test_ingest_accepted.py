"""`POST /v1/turns` 202 path: response shape, what reaches the queue, content-addressed ids."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

from memwrite_local.runtime.aws import LOCAL_API_KEY


def test_mixed_turns_are_screened_and_survivors_are_enqueued(local, make_body):
    # Given a conversation mixing noise, an assistant turn and three turns carrying facts
    body = make_body(
        "hi",
        "ok thanks 👍",
        {
            "role": "user",
            "content": "I live in Berlin with my partner Alex.",
            "timestamp": "2026-03-02T09:02:00Z",
        },
        ("assistant", "Berlin is a great city. Is there anything else?"),
        {
            "role": "user",
            "content": "Yeah, got it. By the way my team is switching from Jira to Linear.",
            "timestamp": "2026-03-02T09:03:00",  # naive: taken as UTC
        },
        "Priya said the Inbox3 deadline is Friday",
        session_id="onboarding-1",
        user_id="dana",
        agent_id="support-bot",
    )
    before = datetime.now(UTC)

    # When the agent posts it
    response = local.post_turns(body)

    # Then it is accepted with one id per turn, in request order, and typed skip reasons
    assert response.status == 202
    assert set(response.body) == {
        "trace_id",
        "accepted",
        "skipped",
        "turn_ids",
        "duplicates",
        "failed",
    }
    ids = response.body["turn_ids"]
    assert len(ids) == 6
    assert all(re.fullmatch(r"[0-9a-f]{32}", tid) for tid in ids)
    assert response.body["accepted"] == 3
    assert response.body["duplicates"] == []
    assert response.body["failed"] == []
    assert response.body["skipped"] == [
        {"turn_id": ids[0], "reason": {"type": "TooShort", "word_count": 1, "min_words": 3}},
        {"turn_id": ids[1], "reason": {"type": "MatchedSkipPattern", "pattern": "greeting_ack"}},
        {"turn_id": ids[3], "reason": {"type": "AssistantTurn"}},
    ]

    # And exactly the three survivors are in the queue, with the kept text and turn time
    messages = local.take_messages()
    by_id = {message["Attributes"]["MessageDeduplicationId"]: message for message in messages}
    assert len(messages) == 3
    assert set(by_id) == {ids[2], ids[4], ids[5]}
    bodies = {tid: json.loads(m["Body"]) for tid, m in by_id.items()}
    for tid, queued in bodies.items():
        assert queued["turn_id"] == tid
        assert queued["tenant"] == local.tenant
        assert queued["user_id"] == "dana"
        assert queued["session_id"] == "onboarding-1"
        assert queued["agent_id"] == "support-bot"
        assert queued["trace_id"] == response.body["trace_id"]
        assert queued["role"] == "user"
    assert bodies[ids[2]]["text"] == "I live in Berlin with my partner Alex."
    assert bodies[ids[2]]["observed_at"] == "2026-03-02T09:02:00Z"
    # Only the sentence that carries knowledge survives the sentence-level filter.
    assert bodies[ids[4]]["text"] == "By the way my team is switching from Jira to Linear."
    assert bodies[ids[4]]["observed_at"] == "2026-03-02T09:03:00Z"
    # Without a timestamp the turn is observed when it arrived.
    observed = datetime.fromisoformat(bodies[ids[5]]["observed_at"])
    assert before - timedelta(seconds=1) <= observed <= datetime.now(UTC) + timedelta(seconds=1)


def test_fifo_group_is_per_tenant_and_user(make_local, make_body):
    # Given two tenants; tenant "local" has users dana and sam, tenant "other" also has a dana
    local = make_local(api_keys={LOCAL_API_KEY: "local", "other-key": "other"})
    fact = "I moved to Lisbon last spring with my sister."

    # When dana posts from two sessions, sam posts, and the other tenant's dana posts
    for body, key in [
        (make_body(fact, session_id="s1", user_id="dana"), LOCAL_API_KEY),
        (make_body("My manager moved our 1:1 to Thursday", session_id="s2", user_id="dana"), None),
        (make_body(fact, session_id="s3", user_id="sam"), None),
        (make_body(fact, session_id="s4", user_id="dana"), "other-key"),
    ]:
        assert local.post_turns(body, api_key=key).status == 202

    # Then one user's turns share a FIFO group whatever the session, and no one else's do
    groups: dict[tuple[str, str], set[str]] = {}
    for message in local.take_messages():
        queued = json.loads(message["Body"])
        group = message["Attributes"]["MessageGroupId"]
        groups.setdefault((queued["tenant"], queued["user_id"]), set()).add(group)
        assert message["Attributes"]["MessageDeduplicationId"] == queued["turn_id"]
    assert set(groups) == {("local", "dana"), ("local", "sam"), ("other", "dana")}
    assert all(len(group) == 1 for group in groups.values())
    assert len(set().union(*groups.values())) == 3


def test_turn_ids_are_content_addressed(make_local, make_body):
    # Given two tenants and one fact
    local = make_local(api_keys={LOCAL_API_KEY: "local", "other-key": "other"})
    fact = "I just finished the Arrive interview. It went well."

    def id_of(session_id: str, *, role: str = "user", api_key: str = LOCAL_API_KEY) -> str:
        response = local.post_turns(make_body((role, fact), session_id=session_id), api_key=api_key)
        assert response.status == 202
        return str(response.body["turn_ids"][0])

    # When the same content is posted in the same session, another session, with another
    # role, and by another tenant
    first = id_of("s1")
    again = id_of("s1")
    other_session = id_of("s2")
    other_role = id_of("s1", role="assistant")
    other_tenant = id_of("s1", api_key="other-key")

    # Then only the exact same (tenant, user, session, role, content, timestamp) gets the same id
    assert first == again
    assert len({first, other_session, other_role, other_tenant}) == 4


def test_short_answer_is_queued_with_the_question_before_it(local, make_body):
    # Given the assistant's question and the user's one-word answer in one request
    body = make_body(
        ("assistant", "Nice! Which instrument do you play in the band?"),
        "Cello",
        "lol",
        session_id="band-1",
    )

    # When they are posted
    posted = local.post_turns(body)

    # Then the answer is queued with the question as its context, the pleasantry is not
    assert posted.status == 202
    assert [(m["text"], m["context"]) for m in local.take_bodies()] == [
        ("Cello", "Which instrument do you play in the band?")
    ]
    # And the trace says why the short turn passed
    spans = local.get_trace(posted.body["trace_id"]).body["spans"]
    reasons = [span["reason"] for span in spans if span["stage"] == "pre_filter"]
    assert {"type": "ShortAnswer", "word_count": 1, "redacted": []} in reasons
    assert {"type": "TooShort", "word_count": 1, "min_words": 3} in reasons


def test_short_answer_in_a_later_request_gets_the_question_from_the_ledger(local, make_body):
    # Given a request that ends with the assistant's question (holding an e-mail address)
    question = "What's your favourite soup, and is lena.ortiz@fastmail.example still your e-mail?"
    first = local.post_turns(make_body(("assistant", question), session_id="soup-1"))

    # When the user's answer arrives alone, in the next request of the same session
    answer = local.post_turns(make_body("Tomato soup.", session_id="soup-1"))

    # Then the answer is queued with the question, masked, as its context
    assert first.status == answer.status == 202
    masked = "What's your favourite soup, and is [REDACTED:email] still your e-mail?"
    assert [(m["text"], m["context"]) for m in local.take_bodies()] == [("Tomato soup.", masked)]
    spans = local.get_trace(answer.body["trace_id"]).body["spans"]
    assert {"type": "ShortAnswer", "word_count": 2, "redacted": []} in [s["reason"] for s in spans]
    # And the address is stored nowhere
    assert "lena.ortiz" not in json.dumps(local.table_items())


def test_a_question_too_short_to_be_screened_still_waits_for_its_answer(local, make_body):
    # Given a request that ends with a question of two words (under min_words: not screened)
    first = local.post_turns(make_body(("assistant", "Any pets?"), session_id="pets-1"))

    # When the user's answer arrives alone, in the next request of the same session
    answer = local.post_turns(make_body("Two cats.", session_id="pets-1"))

    # Then the answer is queued with that question as its context
    assert first.status == answer.status == 202
    assert [(m["text"], m["context"]) for m in local.take_bodies()] == [("Two cats.", "Any pets?")]


def test_the_ledger_question_belongs_to_its_own_session_and_user(local, make_body):
    # Given a question asked in one session
    local.post_turns(make_body(("assistant", "What's your favourite soup?"), session_id="soup-1"))

    # When "Tomato soup." opens another session, and the same session of another user
    other_session = local.post_turns(make_body("Tomato soup.", session_id="soup-2"))
    other_user = local.post_turns(make_body("Tomato soup.", session_id="soup-1", user_id="ana"))

    # Then it answers nothing there: too short on its own
    for posted in (other_session, other_user):
        assert posted.body["accepted"] == 0
        assert posted.body["skipped"][0]["reason"]["type"] == "TooShort"
