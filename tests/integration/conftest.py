"""Integration fixtures: the real handlers on moto (or SQLite), one fresh backend per test.

`make_local(...)` enters a `LocalAws` (tables, FIFO queue, environment), or with
`backend="sqlite"` a `LocalSqlite` in the test's temporary directory, with optional config and
API keys, and builds a `LocalRunner` against it; `local` is the default one (moto). The returned
`Local` also reads what the handlers left behind: queue messages and DynamoDB items (moto),
memories (either backend).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
import pytest
from moto.dynamodb.exceptions import MockValidationException
from moto.dynamodb.responses import DynamoHandler

from memwrite.adapters.sqlite.database import DATABASE_FILE
from memwrite.guards.egress import LOOPBACK_FLAG
from memwrite.records.memory import MemoryUnit
from memwrite.wiring import build_memory_store
from memwrite_local.runtime.aws import LOCAL_API_KEY, LOCAL_TENANT, LocalAws
from memwrite_local.runtime.backend import LocalBackend
from memwrite_local.runtime.embedded import LocalSqlite, local_backend
from memwrite_local.runtime.runner import ApiResult, LocalContext, LocalRunner
from tests.integration.webhook_receiver import Receiver

REPO_ROOT = Path(__file__).resolve().parents[2]
API_EVENTS = REPO_ROOT / "events" / "api"
_SQLITE_TABLES = "SELECT name FROM sqlite_master WHERE type = 'table'"


@dataclass
class Local:
    """One test's backend plus the runner that calls the real handlers."""

    backend: LocalBackend
    runner: LocalRunner
    api_key: str = LOCAL_API_KEY
    tenant: str = LOCAL_TENANT

    @property
    def aws(self) -> LocalAws:
        assert isinstance(self.backend, LocalAws), "a moto-only helper"
        return self.backend

    def memories(self, user_id: str) -> list[MemoryUnit]:
        """What the pipeline stored for the user, read through the backend's memory store."""
        return build_memory_store().memories_of(self.tenant, user_id)

    @property
    def queue_url(self) -> str:
        assert self.aws.resources is not None
        return self.aws.resources.queue_url

    def post_turns(
        self,
        body: dict[str, Any] | str | None,
        *,
        api_key: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> ApiResult:
        return self.runner.call(
            "POST", "/v1/turns", body, headers=headers, api_key=api_key or self.api_key
        )

    def get_trace(self, trace_id: str, *, api_key: str | None = None) -> ApiResult:
        return self.runner.call("GET", f"/v1/traces/{trace_id}", api_key=api_key or self.api_key)

    @staticmethod
    def runner_context() -> LocalContext:
        return LocalContext()

    def take_messages(self) -> list[dict[str, Any]]:
        """Receive and delete every queued message, with its FIFO system attributes."""
        sqs = boto3.client("sqs")
        taken: list[dict[str, Any]] = []
        while True:
            messages = sqs.receive_message(
                QueueUrl=self.queue_url,
                MaxNumberOfMessages=10,
                WaitTimeSeconds=0,
                MessageSystemAttributeNames=["All"],
            ).get("Messages", [])
            if not messages:
                return taken
            for message in messages:
                taken.append(message)
                sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"])

    def peek_bodies(self) -> list[dict[str, Any]]:
        """The queued message bodies, left in the queue (visible again at once) for a drain."""
        sqs = boto3.client("sqs")
        messages = sqs.receive_message(
            QueueUrl=self.queue_url, MaxNumberOfMessages=10, VisibilityTimeout=0
        ).get("Messages", [])
        assert len(messages) < 10, "peek sees at most one receive's worth of messages"
        return [json.loads(message["Body"]) for message in messages]

    def take_bodies(self) -> list[dict[str, Any]]:
        return [json.loads(message["Body"]) for message in self.take_messages()]

    def table_items(self) -> dict[str, list[dict[str, Any]]]:
        """Every item of every DynamoDB table that exists, by table name."""
        dynamodb = boto3.client("dynamodb")
        items: dict[str, list[dict[str, Any]]] = {}
        for name in dynamodb.list_tables()["TableNames"]:
            pages = dynamodb.get_paginator("scan").paginate(TableName=name)
            items[name] = [item for page in pages for item in page.get("Items", [])]
        return items

    def stored_text(self) -> str:
        """Everything the backend's tables hold, as one JSON text: DynamoDB items (moto) or
        the rows of every table in the SQLite file."""
        if not isinstance(self.backend, LocalSqlite):
            return json.dumps(self.table_items())
        with closing(sqlite3.connect(self.backend.data_dir / DATABASE_FILE)) as database:
            tables = [name for (name,) in database.execute(_SQLITE_TABLES)]
            rows = {
                table: database.execute(f"SELECT * FROM {table}").fetchall() for table in tables
            }
        return json.dumps(rows)

    def ledger_keys(self) -> list[str]:
        """Partition keys of the turns ledger rows (`TURN#...`): what was recorded as enqueued."""
        return [
            item["pk"]["S"]
            for rows in self.table_items().values()
            for item in rows
            if item["pk"]["S"].startswith("TURN#")
        ]

    @staticmethod
    def invoke(handler_module: ModuleType, event: dict[str, Any]) -> ApiResult:
        """Call a Lambda handler with a raw API Gateway event, as API Gateway would.

        REST (v1) proxy responses may carry headers in `headers` or `multiValueHeaders`;
        both are merged so a test sees every header a client would.
        """
        response = handler_module.lambda_handler(event, LocalContext())
        headers = dict(response.get("headers") or {})
        for name, values in (response.get("multiValueHeaders") or {}).items():
            headers.setdefault(name, ",".join(values))
        return ApiResult(
            status=int(response["statusCode"]),
            headers=headers,
            body=json.loads(response.get("body") or "{}"),
        )


MakeLocal = Callable[..., Local]


def _batch_request_key(request: dict[str, Any], key_names: list[str]) -> str:
    attributes = (
        request["PutRequest"]["Item"]
        if "PutRequest" in request
        else request["DeleteRequest"]["Key"]
    )
    return json.dumps({name: attributes[name] for name in key_names}, sort_keys=True)


@pytest.fixture(autouse=True)
def batch_writes_refuse_duplicate_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto as strict as DynamoDB: one BatchWriteItem may not name the same key twice.

    DynamoDB refuses two requests on one key in a batch whatever the items hold; moto only
    refuses byte-identical items, so a repeated key with a different payload passes there.
    """
    original = DynamoHandler.batch_write_item

    def strict(self: DynamoHandler) -> Any:
        for table_name, requests in self.body["RequestItems"].items():
            table = self.dynamodb_backend.get_table(table_name)
            key_names = [name for name in (table.hash_key_attr, table.range_key_attr) if name]
            keys = [_batch_request_key(request, key_names) for request in requests]
            if len(keys) != len(set(keys)):
                raise MockValidationException("Provided list of item keys contains duplicates")
        return original(self)

    monkeypatch.setattr(DynamoHandler, "batch_write_item", strict)


def unset_developer_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hermetic: no real model calls, no real AWS endpoint, whatever the developer's shell has."""
    for name in ("ANTHROPIC_API_KEY", "AWS_ENDPOINT_URL", "MEMWRITE_API_KEYS", "MEMWRITE_CONFIG"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def make_local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MakeLocal]:
    """Factory: a fresh `LocalAws` + `LocalRunner`, left (environment restored) at teardown.

    `config` is written to a JSON file named by `MEMWRITE_CONFIG`; `api_keys` maps key ->
    tenant (`MEMWRITE_API_KEYS`); `env` adds any other variable; `backend` is `moto` or
    `sqlite`. One per test: moto's in-process mock is global, so two at once would share state.
    """
    entered: list[LocalBackend] = []
    unset_developer_environment(monkeypatch)

    def factory(
        *,
        config: dict[str, Any] | None = None,
        api_keys: dict[str, str] | None = None,
        env: dict[str, str] | None = None,
        backend: str = "moto",
    ) -> Local:
        assert not entered, "one LocalAws per test"
        extra_env = dict(env or {})
        if config is not None:
            path = tmp_path / "memwrite-config.json"
            path.write_text(json.dumps(config), encoding="utf-8")
            extra_env["MEMWRITE_CONFIG"] = str(path)
        if api_keys is not None:
            extra_env["MEMWRITE_API_KEYS"] = ",".join(f"{k}={t}" for k, t in api_keys.items())
        chosen = local_backend(backend, tmp_path / "data", extra_env)
        chosen.__enter__()
        entered.append(chosen)
        # LocalRunner clears the handlers' cached deps: each test is a cold start.
        return Local(backend=chosen, runner=LocalRunner())

    yield factory
    for chosen in entered:
        chosen.__exit__(None, None, None)


@pytest.fixture
def local(make_local: MakeLocal) -> Local:
    return make_local()


@pytest.fixture
def load_api_event() -> Callable[[str], dict[str, Any]]:
    """A sample API Gateway proxy event from `events/api/<name>.json` (a fresh copy each time)."""

    def load(name: str) -> dict[str, Any]:
        event: dict[str, Any] = json.loads((API_EVENTS / f"{name}.json").read_text("utf-8"))
        return event

    return load


def _turn(content: str, role: str = "user", timestamp: str | None = None) -> dict[str, Any]:
    turn: dict[str, Any] = {"role": role, "content": content}
    if timestamp is not None:
        turn["timestamp"] = timestamp
    return turn


@pytest.fixture
def make_body() -> Callable[..., dict[str, Any]]:
    """`make_body("text", ("assistant", "text"), session_id=...)`: a `POST /v1/turns` body."""

    def build(
        *turns: str | tuple[str, str] | dict[str, Any],
        session_id: str = "session-1",
        user_id: str = "user-1",
        **extra: Any,
    ) -> dict[str, Any]:
        built = []
        for turn in turns:
            if isinstance(turn, str):
                built.append(_turn(turn))
            elif isinstance(turn, tuple):
                built.append(_turn(turn[1], role=turn[0]))
            else:
                built.append(turn)
        return {"session_id": session_id, "user_id": user_id, "turns": built, **extra}

    return build


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    """A webhook receiver on 127.0.0.1, serving until the test ends (the deployment lets
    webhooks reach the loopback, as `memwrite serve` does)."""
    monkeypatch.setenv(LOOPBACK_FLAG, "true")
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
