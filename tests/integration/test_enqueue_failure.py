"""SQS refuses some survivors: the client is told exactly which, and a re-send repairs it.

The deployed adapter (`SqsTurnQueue`) is kept; only the boto3 client under it is wrapped so
that SQS answers a batch with per-entry `Failed` results or refuses a whole batch.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

import functions.pre_filter.handler as pre_filter_handler
from memwrite.adapters.aws.sqs import SqsTurnQueue
from memwrite_local.runtime.runner import api_gateway_event


class RefusingSqs:
    """A real SQS client that refuses chosen entries, or raises for chosen batches.

    `refuse_entry(text)` -> the entry comes back in `Failed`; `refuse_batch(texts)` -> the whole
    `SendMessageBatch` call raises `ClientError`. Everything else reaches the real (moto) queue.
    """

    def __init__(self, real: Any) -> None:
        self._real = real
        self.refuse_entry: Callable[[str], bool] = lambda text: False
        self.refuse_batch: Callable[[list[str]], bool] = lambda texts: False
        self.refused_ids: list[str] = []

    def heal(self) -> None:
        self.refuse_entry = lambda text: False
        self.refuse_batch = lambda texts: False

    def send_message_batch(self, **kwargs: Any) -> dict[str, Any]:
        entries: list[dict[str, Any]] = kwargs["Entries"]
        texts = [json.loads(entry["MessageBody"])["text"] for entry in entries]
        if self.refuse_batch(texts):
            self.refused_ids.extend(entry["MessageDeduplicationId"] for entry in entries)
            raise ClientError(
                {"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}},
                "SendMessageBatch",
            )
        refused = [e for e, text in zip(entries, texts, strict=True) if self.refuse_entry(text)]
        passed = [entry for entry in entries if entry not in refused]
        response: dict[str, Any] = {"Successful": [], "Failed": []}
        if passed:
            response = self._real.send_message_batch(**{**kwargs, "Entries": passed})
        self.refused_ids.extend(entry["MessageDeduplicationId"] for entry in refused)
        response.setdefault("Failed", []).extend(
            {"Id": e["Id"], "SenderFault": False, "Code": "InternalError", "Message": "try later"}
            for e in refused
        )
        return response


@pytest.fixture
def refusing_sqs(local, monkeypatch) -> RefusingSqs:
    """Installs a `RefusingSqs` under the pre_filter function's queue adapter for this test."""
    sqs = RefusingSqs(boto3.client("sqs"))
    monkeypatch.setattr(
        pre_filter_handler.deps().ingest, "queue", SqsTurnQueue(sqs, local.queue_url)
    )
    return sqs


def _contains(*needles: str) -> Callable[[str], bool]:
    return lambda text: any(needle in text for needle in needles)


def _post_event(local, body: dict[str, Any]):
    """POST through the Lambda handler itself, so every response header is visible; the
    request context carries the tenant, as the authorizer leaves it on AWS."""
    headers = {"Content-Type": "application/json", "x-api-key": local.api_key}
    event = api_gateway_event("POST", "/v1/turns", headers, json.dumps(body))
    event["requestContext"]["authorizer"] = {"tenant_id": local.tenant}
    return local.invoke(pre_filter_handler, event)


def _ids_at(response, positions: Iterable[int]) -> set[str]:
    return {response.body["turn_ids"][position] for position in positions}


def test_refused_entries_are_reported_and_the_rest_is_accepted(local, refusing_sqs, make_body):
    # Given SQS refuses the entries about Berlin and about Linear, and accepts the others
    refusing_sqs.refuse_entry = _contains("Berlin", "Linear")
    body = make_body(
        "hi",
        "I live in Berlin with my partner Alex and our dog Pixel.",
        "Priya said the Inbox3 deadline is Friday",
        "By the way my team is switching from Jira to Linear next month.",
        "My manager moved our 1:1 to Thursday",
    )

    # When the agent posts the turns
    response = _post_event(local, body)

    # Then the answer is 503 with Retry-After, naming exactly the refused turns
    assert response.status == 503
    assert response.headers["Retry-After"] == "2"
    refused = _ids_at(response, [1, 3])
    assert set(refusing_sqs.refused_ids) == refused
    assert {f["turn_id"] for f in response.body["failed"]} == refused
    assert all(f["error"] == "InternalError" for f in response.body["failed"])
    assert all(f["retry_after_secs"] == 2 for f in response.body["failed"])
    assert response.body["accepted"] == 2
    # And only the accepted turns are in the queue and in the ledger
    accepted = _ids_at(response, [2, 4])
    assert {m["turn_id"] for m in local.take_bodies()} == accepted
    assert {key.rsplit("#", 1)[1] for key in local.ledger_keys()} == accepted
    # And the trace shows the refused turns as errors with a typed EnqueueFailed reason
    trace = local.get_trace(response.body["trace_id"]).body
    assert trace["status"] == "failed"
    spans = {span["item_id"]: span for span in trace["spans"]}
    for tid in refused:
        assert spans[tid]["result"] == "error"
        assert spans[tid]["reason"] == {"type": "EnqueueFailed", "error": "InternalError"}
    assert {spans[tid]["result"] for tid in accepted} == {"pass"}


def test_resending_after_a_partial_failure_enqueues_exactly_the_failed_turns(
    local, refusing_sqs, make_body
):
    # Given a request of which SQS refused one survivor
    refusing_sqs.refuse_entry = _contains("Berlin")
    body = make_body(
        "I live in Berlin with my partner Alex and our dog Pixel.",
        "Priya said the Inbox3 deadline is Friday",
        "My manager moved our 1:1 to Thursday",
    )
    first = _post_event(local, body)
    assert first.status == 503
    failed = {item["turn_id"] for item in first.body["failed"]}
    first_queued = {m["turn_id"] for m in local.take_bodies()}

    # When SQS recovers and the client re-sends the same request
    refusing_sqs.heal()
    second = _post_event(local, body)

    # Then only the previously refused turn is enqueued (not rate-limited against itself),
    # and the others are reported as duplicates
    assert second.status == 202
    assert second.body["accepted"] == 1
    assert second.body["skipped"] == []
    assert set(second.body["duplicates"]) == first_queued
    assert {m["turn_id"] for m in local.take_bodies()} == failed
    assert len(local.ledger_keys()) == 3


def test_a_refused_batch_fails_exactly_its_turns(local, refusing_sqs, make_body):
    # Given twelve survivors (more than one SQS batch) and SQS throttling the batch that
    # carries the fact about city 11
    refusing_sqs.refuse_batch = lambda texts: any("city number 11 " in t for t in texts)
    body = make_body(*[f"I visited city number {n} last year with my family." for n in range(12)])

    # When the agent posts them
    response = _post_event(local, body)

    # Then exactly the turns of the refused batch are reported failed with the SQS error code,
    # and every other survivor is accepted and queued
    assert response.status == 503
    refused = set(refusing_sqs.refused_ids)
    assert 0 < len(refused) < 12
    assert {f["turn_id"] for f in response.body["failed"]} == refused
    assert {f["error"] for f in response.body["failed"]} == {"ThrottlingException"}
    assert response.body["accepted"] == 12 - len(refused)
    queued = {m["turn_id"] for m in local.take_bodies()}
    assert queued == set(response.body["turn_ids"]) - refused
    assert len(local.ledger_keys()) == len(queued)
