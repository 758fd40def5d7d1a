"""Stage 7 under moto's DynamoDB stream: the outbox's real stream records, delivered to the real
hype handler as Lambda would, with crashes and poison records."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import functions.hype.handler as hype_handler
from memwrite.errors import StoreUnavailable
from tests.integration.conftest import Local
from tests.streams import stream_event as outbox_stream_event


def stream_event(local: Local) -> dict[str, Any]:
    """Every record of the outbox table's stream so far, as the Lambda event source sends it."""
    return outbox_stream_event(local.aws.handler_env()["OUTBOX_TABLE"])


def pending_rows(local: Local) -> list[dict[str, Any]]:
    outbox = local.table_items()[local.aws.handler_env()["OUTBOX_TABLE"]]
    return [row for row in outbox if "pending_key" in row]


def search(local: Local, query: str) -> list[dict[str, Any]]:
    body = {"user_id": "user-1", "query": query, "k": 5}
    response = local.runner.call("POST", "/v1/search", body)
    assert response.status == 200, response.body
    results: list[dict[str, Any]] = response.body["results"]
    return results


@pytest.fixture
def persisted(local: Local, make_body: Callable[..., dict[str, Any]]) -> Local:
    """Two facts persisted by the pipeline; the outbox consumer has not run yet."""
    body = make_body("I live in Lisbon.", "I work at Google as an engineer.")
    assert local.post_turns(body).status == 202
    # The pipeline only: the stream's records are delivered by each test
    local.runner.index_outbox = lambda report, stop=None: None  # type: ignore[method-assign]
    local.runner.drain()
    return local


def test_stream_records_make_memories_searchable_and_rows_done(persisted: Local) -> None:
    # Given the outbox's stream after the pipeline persisted two memories
    event = stream_event(persisted)
    assert {r["eventName"] for r in event["Records"]} == {"INSERT"}
    assert search(persisted, "Where does the user live?") == []

    # When the hype Lambda gets the stream's records
    response = hype_handler.lambda_handler(event, persisted.runner_context())

    # Then no record failed, both memories are searchable, and no outbox row is pending
    assert response == {"batchItemFailures": []}
    found = search(persisted, "Where does the user live?")
    assert found[0]["text"] == "The user lives in Lisbon."
    assert "question" in found[0]["matched"] or "bm25" in found[0]["matched"]
    assert pending_rows(persisted) == []
    # And marking rows done (MODIFY records on the stream) is not work for the consumer
    again = stream_event(persisted)
    assert "MODIFY" in {r["eventName"] for r in again["Records"]}
    assert hype_handler.lambda_handler(again, persisted.runner_context()) == {
        "batchItemFailures": []
    }


def test_a_crash_between_embedding_and_marking_done_is_retried_to_the_same_result(
    persisted: Local, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an outbox whose mark-done fails during the first delivery, after the vectors were
    # written
    _, deps = hype_handler.deps()
    real_mark_done = deps.outbox.mark_done
    outbox_down = True

    def crash_first(changes: Any) -> None:
        if outbox_down:
            raise StoreUnavailable("DynamoDB UpdateItem failed: InternalServerError")
        real_mark_done(changes)

    monkeypatch.setattr(deps.outbox, "mark_done", crash_first)
    event = stream_event(persisted)

    # When the stream delivers the batch: every record fails and stays pending
    first = hype_handler.lambda_handler(event, persisted.runner_context())
    sequence_numbers = {r["dynamodb"]["SequenceNumber"] for r in event["Records"]}
    assert {f["itemIdentifier"] for f in first["batchItemFailures"]} == sequence_numbers
    assert len(pending_rows(persisted)) == len(event["Records"])
    after_crash = search(persisted, "Where does the user live?")

    # And the stream retries the same records
    outbox_down = False
    second = hype_handler.lambda_handler(event, persisted.runner_context())

    # Then the retry succeeds, the rows are done, and search answers exactly as before
    assert second == {"batchItemFailures": []}
    assert pending_rows(persisted) == []
    assert search(persisted, "Where does the user live?") == after_crash
    assert deps.index.count(persisted.tenant, "user-1") == len(sequence_numbers)


def test_a_poison_record_fails_alone(persisted: Local) -> None:
    # Given a batch with one record that is not an outbox row among good ones
    event = stream_event(persisted)
    poison = {
        **event["Records"][0],
        "dynamodb": {
            **event["Records"][0]["dynamodb"],
            "SequenceNumber": "999",
            "NewImage": {"pk": {"S": "no-sort-key"}},
        },
    }
    event["Records"].append(poison)

    # When the hype Lambda processes it
    response = hype_handler.lambda_handler(event, persisted.runner_context())

    # Then only the poison record is reported (for the on-failure destination after retries)
    assert response == {"batchItemFailures": [{"itemIdentifier": "999"}]}
    assert pending_rows(persisted) == []


def test_indexing_shows_in_the_trace_that_wrote_the_memory(
    local: Local, make_body: Callable[..., dict[str, Any]]
) -> None:
    # Given a conversation ingested and run through the pipeline and the outbox consumer
    accepted = local.post_turns(make_body("I live in Lisbon."))
    local.runner.drain()
    # When its trace is read
    trace = local.get_trace(accepted.body["trace_id"]).body
    # Then stage 7 has a span there: the memory it indexed, passed
    hype = [s for s in trace["spans"] if s["stage"] == "hype"]
    assert [s["result"] for s in hype] == ["pass"]
    assert hype[0]["item_id"].startswith(trace["outcome"]["memory_ids"][0])
