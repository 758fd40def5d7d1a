"""`GET /v1/traces/{trace_id}`: what happened to every turn of a request, per tenant."""

from __future__ import annotations

import pytest

import functions.api.handler as api_handler
from memwrite.errors import StoreUnavailable
from memwrite_local.runtime.runner import DrainReport

KEYS = {"k1": "t1", "k2": "t2"}


@pytest.fixture
def two_tenants(make_local):
    return make_local(api_keys=KEYS)


def test_trace_has_a_span_with_a_typed_reason_for_every_turn(two_tenants, make_body):
    # Given a request of tenant t1 mixing skipped, redacted and passing turns
    body = make_body(
        "hi",
        "ok thanks 👍",
        ("assistant", "Berlin is a great city. Is there anything else?"),
        ("tool", '{"weather": "sunny", "temperature_c": 21}'),
        "I live in Berlin with my partner Alex and our dog Pixel.",
        "Please charge my card 4111 1111 1111 1111 for the Lisbon trip.",
        session_id="s1",
        user_id="dana",
    )
    posted = two_tenants.post_turns(body, api_key="k1")
    ids = posted.body["turn_ids"]

    # When t1 reads the trace
    response = two_tenants.get_trace(posted.body["trace_id"], api_key="k1")

    # Then it has one pre_filter span per turn, and is in progress: two survivors still have
    # later stages ahead of them
    assert response.status == 200
    trace = response.body
    assert trace["trace_id"] == posted.body["trace_id"]
    assert (trace["user_id"], trace["session_id"]) == ("dana", "s1")
    assert trace["status"] == "in_progress"
    assert trace["turn_ids"] == ids
    spans = {span["item_id"]: span for span in trace["spans"] if span["stage"] == "pre_filter"}
    assert set(spans) == set(ids)
    assert {span["trace_id"] for span in trace["spans"]} == {posted.body["trace_id"]}
    # And each skipped turn's span carries the same typed reason the POST response gave
    for skipped in posted.body["skipped"]:
        assert spans[skipped["turn_id"]]["result"] == "reject"
        assert spans[skipped["turn_id"]]["reason"] == skipped["reason"]
    assert spans[ids[3]]["reason"] == {"type": "NonConversationalTurn", "role": "tool"}
    assert spans[ids[4]]["result"] == "pass"
    assert spans[ids[4]]["reason"] is None
    assert spans[ids[5]]["result"] == "transform"
    assert spans[ids[5]]["reason"] == {"type": "Redacted", "kinds": ["card_number"]}
    assert trace["outcome"]["discarded"] == len(posted.body["skipped"]) == 4

    # And once the pipeline has consumed the queue, the trace is complete
    two_tenants.runner.drain()
    assert two_tenants.get_trace(posted.body["trace_id"], api_key="k1").body["status"] == "complete"


def test_duplicate_turns_are_explained_in_the_trace(local, make_body):
    # Given a fact enqueued by a first request
    body = make_body("I live in Berlin with my partner Alex and our dog Pixel.")
    local.post_turns(body)

    # When the same request is re-sent and its trace is read
    again = local.post_turns(body)
    trace = local.get_trace(again.body["trace_id"]).body

    # Then the trace says why nothing was enqueued this time, and needs nothing more
    assert [(s["stage"], s["result"], s["reason"]) for s in trace["spans"]] == [
        ("pre_filter", "reject", {"type": "DuplicateTurn"})
    ]
    assert trace["status"] == "complete"


def test_a_deferred_turn_counts_as_an_episode_kept_not_as_discarded(local, make_body):
    # Given no model, and a turn whose second clause no rule reads (kept as an episode)
    posted = local.post_turns(make_body("I adore ramen, but cilantro is vile.", user_id="dana"))
    local.runner.drain()

    # When its trace is read
    trace = local.get_trace(posted.body["trace_id"]).body

    # Then the outcome counts the episode kept, and nothing discarded
    assert [e["status"] for e in trace["episodes"]] == ["pending"]
    assert trace["outcome"] | {"memory_ids": []} == {
        "stored": 0,
        "merged": 0,
        "discarded": 0,
        "episodes": 1,
        "memory_ids": [],
    }


def test_unknown_trace_is_404(two_tenants):
    # Given a tenant with no trace of that id
    # When it reads a trace id that was never issued
    response = two_tenants.get_trace("0123456789abcdef0123456789abcdef", api_key="k1")

    # Then it is not found
    assert response.status == 404


def test_another_tenants_trace_is_404(two_tenants, make_body):
    # Given a trace of tenant t1
    posted = two_tenants.post_turns(
        make_body("I live in Berlin with my partner Alex and our dog Pixel."), api_key="k1"
    )
    trace_id = posted.body["trace_id"]
    assert two_tenants.get_trace(trace_id, api_key="k1").status == 200

    # When tenant t2 asks for it
    response = two_tenants.get_trace(trace_id, api_key="k2")

    # Then t2 learns nothing: the same 404 as for an id that does not exist
    assert response.status == 404
    assert "spans" not in response.body
    assert "user_id" not in response.body


ID_ROUTES = [
    ("GET", "/v1/traces/{}", "trace_id"),
    ("POST", "/v1/traces/{}/replay", "trace_id"),
    ("POST", "/v1/traces/{}/rollback", "trace_id"),
    ("GET", "/v1/memories/{}", "memory_id"),
    ("GET", "/v1/memories/{}/traces", "memory_id"),
]
WRONG_SHAPES = [
    "x" * 3000,  # past DynamoDB's 2 KB key limit: a ValidationException there
    "0123456789ABCDEF0123456789ABCDEF",
    "0123456789abcdef0123456789abcde",
    "0123456789abcdef0123456789abcdef0",
    "g" * 32,
    "..",
]


@pytest.mark.parametrize("backend", ["moto", "sqlite"])
def test_an_id_of_the_wrong_shape_is_the_unknown_ids_404_and_never_reaches_the_store(
    make_local, backend, monkeypatch
):
    local = make_local(backend=backend, api_keys=KEYS)
    # Given a store that refuses every read of a trace or memory, as DynamoDB refuses a key
    # over 2 KB (moto does not)
    deps = api_handler.deps()

    def refused(*args, **kwargs):
        raise StoreUnavailable("DynamoDB GetItem failed: ValidationException")

    for target, name in (
        (deps.ledger, "get_trace"),
        (deps.replay().ledger, "get_trace"),
        (deps.rollback.rollbacks, "rollback_of"),
        (deps.query.reader, "memory_by_id"),
    ):
        monkeypatch.setattr(target, name, refused)
    for method, template, field in ID_ROUTES:
        body = {"config": {}} if template.endswith("/replay") else None
        # A well-formed id reaches the store (and its failure is a 503)
        reached = local.runner.call(method, template.format("0" * 32), body, api_key="k1")
        assert reached.status == 503, (template, reached.body)
        # When a path carries an id of any other shape / Then it is the unknown id's 404
        for wrong in WRONG_SHAPES:
            response = local.runner.call(method, template.format(wrong), body, api_key="k1")
            assert (response.status, response.body) == (
                404,
                {"error": "not_found", field: wrong},
            ), (template, wrong[:40])


@pytest.mark.parametrize("backend", ["moto", "sqlite"])
def test_a_trace_is_complete_only_once_what_it_stored_is_searchable(make_local, make_body, backend):
    # Given a stored fact whose pipeline has run, while stage 7 (the outbox's consumer) has
    # not yet indexed it, as in `memwrite serve` between a batch and its outbox pass
    local = make_local(backend=backend)
    posted = local.post_turns(make_body("I live in Lisbon.", user_id="dana"))
    trace_id = posted.body["trace_id"]
    index_outbox = local.runner.index_outbox
    local.runner.index_outbox = lambda report, stop=None: None
    local.runner.drain()

    def search() -> list[str]:
        body = {"user_id": "dana", "query": "Where does the user live?", "k": 5}
        return [
            hit["text"] for hit in local.runner.call("POST", "/v1/search", body).body["results"]
        ]

    # When a client waits on the trace
    # Then it is not complete yet: a search would not find the memory
    assert local.memories("dana")
    assert search() == []
    assert local.get_trace(trace_id).body["status"] == "in_progress"

    # And once stage 7 has indexed the trace's rows, it is complete and the search finds it
    index_outbox(DrainReport())
    trace = local.get_trace(trace_id).body
    assert trace["status"] == "complete"
    assert "The user lives in Lisbon." in search()
    assert any(span["stage"] == "hype" for span in trace["spans"])
