"""The state machine CDK deploys, executed by moto's Step Functions interpreter with the real
handlers in-process (each Lambda task dispatched by the `Handler` its function deploys with):
turn -> memory row -> outbox stream -> hype -> searchable; a transient failure retried; a wait
for the model budget waited in the state machine; a permanent failure caught to the failure
path.
"""

from __future__ import annotations

import importlib
import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from memwrite.adapters.aws.dynamodb_ledger import DynamoTurnLedger
from memwrite.errors import BudgetWait, StageInputError, StoreUnavailable
from memwrite.execution.dispatch import plan_executions
from memwrite.models import QueuedTurn
from memwrite.records.memory import MemoryUnit
from memwrite.schema import TABLES
from memwrite_local.runtime.runner import LocalContext, api_gateway_event
from tests.infrastructure.asl import ACCOUNT, REGION, function_handlers, state_machine_definition
from tests.infrastructure.conftest import Synthesized
from tests.queued import queued_turn
from tests.sources import record_trace
from tests.streams import stream_event

MOTO_CONFIG = {"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}


class Aws:
    """moto with the deployed tables, the pipeline DLQ and the state machine."""

    def __init__(self, synth: Synthesized) -> None:
        template = synth.json
        self.template = template
        self.handlers = function_handlers(template)
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        for table in TABLES:
            dynamodb.create_table(**table.create_table_kwargs(f"memwrite-{table.logical_name}"))
            os.environ[f"{table.logical_name.upper()}_TABLE"] = f"memwrite-{table.logical_name}"
        sqs = boto3.client("sqs", region_name=REGION)
        queue_urls = {
            logical_id: sqs.create_queue(
                QueueName=logical_id + (".fifo" if r["Properties"].get("FifoQueue") else ""),
                Attributes={"FifoQueue": "true"} if r["Properties"].get("FifoQueue") else {},
            )["QueueUrl"]
            for logical_id, r in template["Resources"].items()
            if r["Type"] == "AWS::SQS::Queue"
        }
        self.pipeline_dlq = next(
            url for k, url in queue_urls.items() if k.startswith("QueuesPipelineDlq")
        )
        # Where hype hands webhook deliveries (its WEBHOOK_QUEUE_URL as deployed)
        self.webhook_queue = next(
            url for k, url in queue_urls.items() if k.startswith("WebhookLaneQueue")
        )
        self.sfn = boto3.client("stepfunctions", region_name=REGION)
        self.arn = self.sfn.create_state_machine(
            name="pipeline",
            definition=state_machine_definition(template, queue_urls),
            roleArn=f"arn:aws:iam::{ACCOUNT}:role/pipeline",
            type="EXPRESS",
        )["stateMachineArn"]

    def handler_of(self, logical_id: str) -> Callable[[dict[str, Any], Any], Any]:
        module_name, _, attribute = self.handlers[logical_id].rpartition(".")
        handler: Callable[[dict[str, Any], Any], Any] = getattr(
            importlib.import_module(module_name), attribute
        )
        return handler

    def outbox_consumer(self) -> Callable[[dict[str, Any], Any], Any]:
        """The handler of the function the template maps the outbox's stream to."""
        (mapping,) = [
            r["Properties"]
            for r in self.template["Resources"].values()
            if r["Type"] == "AWS::Lambda::EventSourceMapping"
            and "StartingPosition" in r["Properties"]
        ]
        assert mapping["EventSourceArn"]["Fn::GetAtt"][0].startswith("TablesOutbox")
        return self.handler_of(mapping["FunctionName"]["Ref"])

    def api_handler(self, method: str, path_part: str) -> Callable[[dict[str, Any], Any], Any]:
        """The handler of the function the API integrates for `method` on `.../<path_part>`."""
        resources = self.template["Resources"]
        (uri,) = [
            r["Properties"]["Integration"]["Uri"]
            for r in resources.values()
            if r["Type"] == "AWS::ApiGateway::Method"
            and r["Properties"]["HttpMethod"] == method
            and resources[r["Properties"]["ResourceId"]["Ref"]]["Properties"]["PathPart"]
            == path_part
        ]
        (function_id,) = [
            part["Fn::GetAtt"][0]
            for part in uri["Fn::Join"][1]
            if isinstance(part, dict) and "Fn::GetAtt" in part
        ]
        return self.handler_of(function_id)

    def execute(self, turns: list[QueuedTurn], name: str) -> dict[str, Any]:
        # Their traces, recorded as ingest records them before it enqueues a turn (persist
        # commits only while a turn's trace exists).
        ledger = DynamoTurnLedger(boto3.client("dynamodb", region_name=REGION), "memwrite-turns")
        for t in turns:
            record_trace(ledger, t.tenant, t.user_id, t.trace_id)
        (planned,) = plan_executions([(f"m{i}", t) for i, t in enumerate(turns)])
        arn = self.sfn.start_execution(
            stateMachineArn=self.arn, name=name, input=planned.payload()
        )["executionArn"]
        while (result := self.sfn.describe_execution(executionArn=arn))["status"] == "RUNNING":
            time.sleep(0.02)  # a busy poll starves moto's executor threads of the GIL
        return dict(result)

    def items(self, table: str) -> list[dict[str, Any]]:
        return boto3.client("dynamodb", region_name=REGION).scan(TableName=f"memwrite-{table}")[
            "Items"
        ]

    def memory_values(self) -> list[str | None]:
        return [
            MemoryUnit.model_validate_json(item["doc"]["S"]).value
            for item in self.items("memories")
            if "doc" in item
        ]

    def dead_lettered(self) -> list[dict[str, Any]]:
        messages = (
            boto3.client("sqs", region_name=REGION)
            .receive_message(QueueUrl=self.pipeline_dlq, MaxNumberOfMessages=10)
            .get("Messages", [])
        )
        return [json.loads(m["Body"]) for m in messages]


Fault = Callable[[str, int], Exception | None]  # (handler module, call number) -> error to raise


@pytest.fixture
def aws(
    synthesized: dict[str, Synthesized], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[tuple[Aws, list[Fault]]]:
    from moto import mock_aws
    from moto.awslambda_simple.models import LambdaSimpleBackend

    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
        "POWERTOOLS_METRICS_DISABLED": "true",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)  # offline: the rule extractor
    monkeypatch.delenv("MEMWRITE_CONFIG", raising=False)  # the offline embedder, not Titan
    for variable in ("OPENSEARCH_ENDPOINT", "OPENSEARCH_SERVICE"):
        monkeypatch.delenv(variable, raising=False)
    # The embedded index in one file, shared by dedupe, persist, hype and query as the
    # collection is on AWS (":memory:" would give each function its own).
    monkeypatch.setenv("MEMWRITE_INDEX_PATH", str(tmp_path / "index.sqlite"))
    faults: list[Fault] = []
    calls: dict[str, int] = {}
    with mock_aws(config=MOTO_CONFIG):  # type: ignore[arg-type]
        deployment = Aws(synthesized["dev"])
        monkeypatch.setenv("WEBHOOK_QUEUE_URL", deployment.webhook_queue)

        def invoke(  # noqa: PLR0917 (moto's LambdaSimpleBackend.invoke signature)
            self: object,
            function_name: str,
            qualifier: object,
            body: Any,
            headers: Any,
            response_headers: Any,
        ) -> bytes:
            module_name, _, attribute = deployment.handlers[
                function_name.rsplit(":", maxsplit=1)[-1]
            ].rpartition(".")
            module = importlib.import_module(module_name)
            calls[module_name] = calls.get(module_name, 0) + 1
            try:
                for fault in faults:
                    if (error := fault(module_name, calls[module_name])) is not None:
                        raise error
                result = getattr(module, attribute)(json.loads(body), LocalContext())
            except Exception as exc:  # the Lambda runtime's boundary: a failed invocation
                response_headers["x-amz-function-error"] = "Unhandled"
                return json.dumps(
                    {"errorType": type(exc).__name__, "errorMessage": str(exc)}
                ).encode()
            return json.dumps(result).encode()

        monkeypatch.setattr(LambdaSimpleBackend, "invoke", invoke)
        for stage_dir in ("extract", "resolve_refs", "dedupe", "conflict", "persist"):
            stage = importlib.import_module(f"functions.{stage_dir}.handler").handler
            stage.deps.cache_clear()
            stage.metering.cache_clear()
        for module in ("dead_letter", "hype", "api"):
            importlib.import_module(f"functions.{module}.handler").deps.cache_clear()
        importlib.import_module("functions.hype.handler").metering.cache_clear()
        yield deployment, faults


def turn(text: str, turn_id: str) -> QueuedTurn:
    return queued_turn(text, turn_id)


def test_a_turn_becomes_a_memory_row(aws: tuple[Aws, list[Fault]]) -> None:
    deployment, _ = aws
    # When the deployed definition runs one batch
    result = deployment.execute([turn("I live in Berlin.", "a" * 32)], "ok")
    # Then it succeeded, reports the batch done, and the memory and its outbox row exist
    assert result["status"] == "SUCCEEDED", result
    assert json.loads(result["output"]) == [{"status": "done", "turn_ids": ["a" * 32]}]
    assert deployment.memory_values() == ["Berlin"]
    assert deployment.items("outbox")
    assert deployment.dead_lettered() == []


def search(deployment: Aws, query: str) -> list[dict[str, Any]]:
    """`POST /v1/search` through the function the API integrates, as API Gateway calls it
    once the authorizer has put the tenant in the request context."""
    body = json.dumps({"user_id": "dana", "query": query, "k": 5})
    event = api_gateway_event("POST", "/v1/search", {"Content-Type": "application/json"}, body)
    event["requestContext"]["authorizer"] = {"tenant_id": "acme"}
    response = deployment.api_handler("POST", "search")(event, LocalContext())
    assert response["statusCode"] == 200, response
    results: list[dict[str, Any]] = json.loads(response["body"])["results"]
    return results


def test_memory_row_reaches_the_search_index(aws: tuple[Aws, list[Fault]]) -> None:
    """End to end on the deployed wiring: the state machine's definition writes the memory
    and its outbox row; the outbox's stream records go to the function the template maps the
    stream to (hype); the API's search route then finds the memory.

    OpenSearch cannot run here (no server, no Docker; moto has no data plane), so the index is
    the embedded one (`memwrite.adapters.sqlite.embedded_index`: SQLite FTS5 + vectors, the same
    `MemoryIndex` contract the OpenSearch adapter's tests hold it to) in one file shared by
    every function, and the embedder is the offline one (WordLlama) instead of Titan (moto's
    Bedrock returns empty bodies). Everything else is the deployed code and the deployed definition.
    """
    deployment, _ = aws
    # Given a turn the deployed state machine turned into a memory row and an outbox row
    result = deployment.execute([turn("I live in Berlin.", "d" * 32)], "indexed")
    assert result["status"] == "SUCCEEDED", result
    assert search(deployment, "Where does the user live?") == []
    # When the outbox's stream records reach the stream consumer
    event = stream_event("memwrite-outbox", REGION)
    assert [r["eventName"] for r in event["Records"]] == ["INSERT"]
    response = deployment.outbox_consumer()(event, LocalContext())
    # Then no record failed and the memory is searchable
    assert response == {"batchItemFailures": []}
    (found,) = search(deployment, "Where does the user live?")
    assert found["text"] == "The user lives in Berlin."
    # And its outbox row is done, and the trace that wrote it shows the hype span
    assert all("pending_key" not in row for row in deployment.items("outbox"))
    assert any(s["sk"]["S"].startswith("hype#") for s in deployment.items("spans"))


def test_a_transient_failure_is_retried(aws: tuple[Aws, list[Fault]]) -> None:
    deployment, faults = aws
    # Given conflict's first call fails with a transient error (DynamoDB throttled)
    faults.append(
        lambda module, n: (
            StoreUnavailable("throttled")
            if module == "functions.conflict.handler" and n == 1
            else None
        )
    )
    # When the batch runs
    result = deployment.execute([turn("I live in Lisbon.", "b" * 32)], "retry")
    # Then the Retry ran conflict again and the memory was stored
    assert result["status"] == "SUCCEEDED", result
    assert json.loads(result["output"])[0]["status"] == "done"
    assert deployment.memory_values() == ["Lisbon"]


def test_a_batch_waiting_for_the_model_budget_waits_its_place_then_runs_again(
    aws: tuple[Aws, list[Fault]],
) -> None:
    deployment, faults = aws
    # Given extract finds the model budget empty once: its place in line is 0.4 s away
    extract_calls: list[int] = []

    def budget_empty_once(module: str, n: int) -> Exception | None:
        if module != "functions.extract.handler":
            return None
        extract_calls.append(n)
        return BudgetWait(0.4, 3.0) if n == 1 else None

    faults.append(budget_empty_once)
    # When the batch runs
    result = deployment.execute([turn("I live in Madrid.", "f" * 32)], "budget-wait")
    # Then the iteration waited the delay the error gave, in whole seconds, once
    history = deployment.sfn.get_execution_history(executionArn=result["executionArn"])
    waits = [
        json.loads(e["stateEnteredEventDetails"]["input"])["budget"]
        for e in history["events"]
        if e["type"] == "WaitStateEntered"
    ]
    assert [w["wait"]["wait_s"] for w in waits] == [1]
    assert waits[0]["waited_s"] == 1
    # And ran extract again on the same batch, which then went through every stage
    assert extract_calls == [1, 2]
    assert result["status"] == "SUCCEEDED", result
    assert json.loads(result["output"]) == [{"status": "done", "turn_ids": ["f" * 32]}]
    assert deployment.memory_values() == ["Madrid"]
    assert deployment.dead_lettered() == []


def test_a_batch_that_would_wait_past_the_execution_limit_is_dead_lettered(
    aws: tuple[Aws, list[Fault]],
) -> None:
    deployment, faults = aws
    # Given the deployed definition with its limit on waits per execution cut from 240 s to
    # 1 s (moto really waits), and an extract that finds the budget empty every time
    definition = json.loads(
        deployment.sfn.describe_state_machine(stateMachineArn=deployment.arn)["definition"]
    )
    inner = definition["States"]["Batches"]["ItemProcessor"]["States"]
    (guard,) = inner["extract: within the execution"]["Choices"]
    guard["NumericGreaterThan"] = 1
    deployment.arn = deployment.sfn.create_state_machine(
        name="pipeline-short-wait",
        definition=json.dumps(definition),
        roleArn=f"arn:aws:iam::{ACCOUNT}:role/pipeline",
        type="EXPRESS",
    )["stateMachineArn"]
    faults.append(
        lambda module, n: BudgetWait(0.2, 3.0) if module == "functions.extract.handler" else None
    )
    # When the batch runs
    result = deployment.execute([turn("I live in Bilbao.", "9" * 32)], "budget-too-long")
    # Then it waited once (1 s), and instead of a second wait took the failure path
    assert result["status"] == "SUCCEEDED", result
    (outcome,) = json.loads(result["output"])
    assert outcome == {
        "status": "dead_lettered",
        "stage": "extract",
        "error": "BudgetWait",
        "turn_ids": ["9" * 32],
    }
    (message,) = deployment.dead_lettered()
    assert message["batch"]["turns"][0]["turn_id"] == "9" * 32
    assert deployment.memory_values() == []


def test_a_permanent_failure_is_dead_lettered_with_nothing_half_written(
    aws: tuple[Aws, list[Fault]],
) -> None:
    deployment, faults = aws
    # Given persist fails for good
    faults.append(
        lambda module, n: (
            StageInputError("bad payload") if module == "functions.persist.handler" else None
        )
    )
    # When the batch runs
    result = deployment.execute([turn("I live in Porto.", "c" * 32)], "catch")
    # Then the iteration took the failure path, not a retry loop
    assert result["status"] == "SUCCEEDED", result
    (outcome,) = json.loads(result["output"])
    assert outcome == {
        "status": "dead_lettered",
        "stage": "persist",
        "error": "StageInputError",
        "turn_ids": ["c" * 32],
    }
    # And the batch is in the pipeline DLQ with its turns, for a redrive
    (message,) = deployment.dead_lettered()
    assert message["stage"] == "persist" and message["batch"]["turns"][0]["turn_id"] == "c" * 32
    # And the turn has an error span naming the stage
    spans = [s for s in deployment.items("spans") if s["sk"]["S"].startswith("dead_letter#")]
    assert len(spans) == 1
    # And nothing of the memory was written
    assert deployment.memory_values() == []
    assert deployment.items("outbox") == []


def _quick_retries(state: dict[str, Any]) -> None:
    """Every Retry of `state` and the states below it down to one attempt a second later."""
    for retry in state.get("Retry", []):
        retry.update(IntervalSeconds=1, MaxAttempts=1)
    for inner in state.get("ItemProcessor", {}).get("States", {}).values():
        _quick_retries(inner)


def test_a_failure_path_that_fails_sends_the_whole_execution_to_the_dlq(
    aws: tuple[Aws, list[Fault]],
) -> None:
    deployment, faults = aws
    # Given the deployed definition (its retries shortened, moto really waits them) and a
    # batch whose persist fails for good while the failure path's span writer fails too
    definition = json.loads(
        deployment.sfn.describe_state_machine(stateMachineArn=deployment.arn)["definition"]
    )
    for state in definition["States"].values():
        _quick_retries(state)
    deployment.arn = deployment.sfn.create_state_machine(
        name="pipeline-quick",
        definition=json.dumps(definition),
        roleArn=f"arn:aws:iam::{ACCOUNT}:role/pipeline",
        type="EXPRESS",
    )["stateMachineArn"]
    faults.append(
        lambda module, n: (
            StageInputError("bad payload")
            if module in {"functions.persist.handler", "functions.dead_letter.handler"}
            else None
        )
    )
    # When the batch runs (no function waits for it: the state machine alone must keep it)
    result = deployment.execute([turn("I live in Faro.", "e" * 32)], "map-failed")
    # Then the Map's Catch took the execution's failure path
    assert result["status"] == "SUCCEEDED", result
    assert json.loads(result["output"])["status"] == "dead_lettered"
    # And every batch of the execution is in the pipeline DLQ with its turns, for a redrive
    (message,) = deployment.dead_lettered()
    assert message["stage"] == "execution"
    assert [t["turn_id"] for b in message["batches"] for t in b["turns"]] == ["e" * 32]
    assert message["failure"]["Error"]
    # And nothing of the memory was written
    assert deployment.memory_values() == []
