"""The backfill route hands the work to the backfill function (docs/episodes.md, Backfill):
202 with a trace id, the asynchronous invoke (botocore Stubber), the backfill function's run
of that event under the trace; the schedule's fan-out, one invoke per user with a pending
episode."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber

import functions.api.handler as api_handler
import functions.backfill.handler as backfill_handler
from memwrite.adapters.aws.lambda_backfill import LambdaBackfillStarter
from memwrite.adapters.in_memory import InMemoryBackfillJobs
from memwrite.backfill import start_pending
from memwrite_local.runtime.runner import LocalContext
from tests.integration.conftest import Local, MakeLocal
from tests.integration.test_episodes_outage import (
    ANSWERS,
    ModelApi,
    ingest_all,
    install_backfill,
    install_live,
)

FUNCTION = "memwrite-dev-backfill"


def _kept_through_an_outage(local: Local, monkeypatch: pytest.MonkeyPatch, *users: str) -> None:
    api = ModelApi(*ANSWERS * len(users))
    api.down = True
    install_live(api, monkeypatch)
    for user in users:
        ingest_all(local, user)
    api.down = False
    install_backfill(api, monkeypatch)


def _stubbed_lambda(monkeypatch: pytest.MonkeyPatch) -> tuple[Stubber, list[dict[str, Any]]]:
    """The api function's starter on a Lambda client whose Invoke calls are stubbed; the
    events sent are collected."""
    client = boto3.client("lambda", region_name="us-east-1")
    sent: list[dict[str, Any]] = []

    def keep(params: dict[str, Any], **_: Any) -> None:
        sent.append(json.loads(params["Payload"]))

    client.meta.events.register("provide-client-params.lambda.Invoke", keep)
    monkeypatch.setattr(
        api_handler.deps(), "backfill_starter", LambdaBackfillStarter(client, FUNCTION)
    )
    return Stubber(client), sent


def test_the_route_answers_202_and_the_backfill_function_runs_the_event_under_its_trace(
    make_local: MakeLocal, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a user's two episodes kept through an outage, the model back, the api function
    # handing backfills to the backfill function by Lambda's asynchronous invoke
    local = make_local(backend="sqlite")
    _kept_through_an_outage(local, monkeypatch, "dana")
    stubber, sent = _stubbed_lambda(monkeypatch)
    stubber.add_response(
        "invoke",
        {"StatusCode": 202},
        {"FunctionName": FUNCTION, "InvocationType": "Event", "Payload": ANY},
    )

    # When the backfill is asked for
    with stubber:
        reply = local.runner.call("POST", "/v1/users/dana/backfill", {})
        stubber.assert_no_pending_responses()

    # Then it answers 202 with a trace id, having invoked the backfill function once with
    # {tenant, user_id, trace_id}, and nothing ran inside the call
    assert reply.status == 202, reply.body
    trace_id = reply.body["trace_id"]
    assert reply.body == {"user_id": "dana", "trace_id": trace_id}
    [event] = sent
    assert event == {"tenant": event["tenant"], "user_id": "dana", "trace_id": trace_id}
    assert local.get_trace(trace_id).status == 404
    pending = local.runner.call("GET", "/v1/users/dana/episodes?status=pending").body
    assert len(pending["episodes"]) == 2

    # When the backfill function runs that event
    result = backfill_handler.lambda_handler(event, LocalContext())
    local.runner.drain()

    # Then both episodes are distilled under the trace the route answered with
    assert (result["trace_id"], result["episodes"], result["extracted"]) == (trace_id, 2, 2)
    trace = local.get_trace(trace_id).body
    assert trace["status"] == "complete"
    assert sorted(trace["turn_ids"]) == sorted(e["turn_id"] for e in pending["episodes"])
    listed = local.runner.call("GET", "/v1/users/dana/episodes").body["episodes"]
    assert [e["backfill_trace_id"] for e in listed] == [trace_id, trace_id]


def test_nothing_pending_starts_nothing_and_a_refused_invoke_is_a_503(
    make_local: MakeLocal, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a user's pending episodes and a Lambda that refuses the invoke
    local = make_local(backend="sqlite")
    _kept_through_an_outage(local, monkeypatch, "dana")
    stubber, sent = _stubbed_lambda(monkeypatch)
    stubber.add_client_error("invoke", "TooManyRequestsException", http_status_code=429)

    # When the backfill is asked for / Then a 503, and the episodes stay pending
    with stubber:
        refused = local.runner.call("POST", "/v1/users/dana/backfill", {})
    assert refused.status == 503, refused.body
    pending = local.runner.call("GET", "/v1/users/dana/episodes?status=pending").body
    assert len(pending["episodes"]) == 2

    # And a range with no pending episode answers 202 with no trace, invoking nothing
    with stubber:
        empty = local.runner.call("POST", "/v1/users/dana/backfill", {"until": "2001-01-01"})
    assert (empty.status, empty.body) == (202, {"user_id": "dana", "trace_id": None})
    assert len(sent) == 1  # the refused invoke's only


def test_the_schedule_fans_out_one_handed_over_run_per_user_with_pending_episodes(
    make_local: MakeLocal, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given two users with episodes kept through an outage, and the backfill function's own
    # starter recording what it hands over
    local = make_local(backend="sqlite")
    _kept_through_an_outage(local, monkeypatch, "dana", "sam")
    handed = InMemoryBackfillJobs()
    monkeypatch.setattr(backfill_handler, "starter", lambda: handed)

    # When the schedule runs the backfill function
    fan_out = backfill_handler.lambda_handler({}, LocalContext())

    # Then it distilled nothing itself and handed one job per user over, each with its trace
    assert local.runner.call("GET", "/v1/users/dana/episodes?status=pending").body["episodes"]
    jobs = handed.take()
    assert sorted(job.user_id for job in jobs) == ["dana", "sam"]
    assert fan_out == {"users": 2, "trace_ids": [job.trace_id for job in jobs]}
    # And a run is bounded: one user at most hands one job over
    assert len(start_pending(backfill_handler.deps(), handed, max_users=1)) == 1

    # When each job runs as its own invocation
    for job in jobs:
        event = job.model_dump(mode="json", exclude_none=True)
        result = backfill_handler.lambda_handler(event, LocalContext())
        assert (result["trace_id"], result["extracted"]) == (job.trace_id, 2)
    local.runner.drain()

    # Then every episode is extracted, each user's under its own trace
    for job in jobs:
        assert local.get_trace(job.trace_id).body["status"] == "complete"
        listed = local.runner.call("GET", f"/v1/users/{job.user_id}/episodes").body["episodes"]
        assert {e["status"] for e in listed} == {"extracted"}
