"""The chaos suite's fixtures: the integration suite's backends (`make_local`, SQLite by
default here, moto where a fault is DynamoDB's), one conversation, and the final state a clean
run of it leaves (`tests.reliability.final_state`), to which every faulty run is compared.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from memwrite.environment import LambdaEnvironment
from memwrite_local.embedded import local_backend
from memwrite_local.runner import DrainReport, LocalRunner
from tests.integration.conftest import (  # noqa: F401 (fixtures shared with the integration suite)
    Local,
    MakeLocal,
    batch_writes_refuse_duplicate_keys,
    make_body,
    make_local,
    unset_developer_environment,
)
from tests.reliability.final_state import FinalState, final_state, sqlite_state
from tests.serve_process import ServeProcess, running_serve

REPO_ROOT = Path(__file__).resolve().parents[2]
# Ten timestamped turns (a move, a changed taste, a new job): supersessions, merges, skips.
CONVERSATION: dict[str, Any] = json.loads(
    (REPO_ROOT / "events" / "conversations" / "moving.json").read_text(encoding="utf-8")
)
# One key: every run, clean or faulty, writes the same trace id (a client's retries reuse it).
IDEMPOTENCY = {"Idempotency-Key": "reliability-conversation"}


class InjectedCrash(RuntimeError):
    """A crash a test injects (never raised by memwrite itself)."""


def post_conversation(local: Local, body: dict[str, Any] = CONVERSATION) -> None:
    """POST the conversation; a crashed request is retried by the client (same key)."""
    for _ in range(2):
        try:
            response = local.post_turns(body, headers=IDEMPOTENCY)
        except InjectedCrash:
            continue
        assert response.status == 202, response.body
        return
    pytest.fail("the request crashed twice")


def drain(local: Local) -> DrainReport:
    """Drain the queue and the outbox; a crashed stream batch is delivered again (as the
    event source mapping retries a failed invocation)."""
    for _ in range(2):
        try:
            return local.runner.drain()
        except InjectedCrash:
            continue
    pytest.fail("the stream batch crashed twice")


def ingest(local: Local, body: dict[str, Any] = CONVERSATION) -> FinalState:
    """`body` in and drained, nothing reported lost: the final state."""
    post_conversation(local, body)
    report = drain(local)
    assert report.failed == {} and report.index_failed == {}
    return final_state(local)


# A run on a fresh backend: what it needs installed (through `monkeypatch`), then its requests.
Scenario = Callable[[Local, pytest.MonkeyPatch], FinalState]


def conversation(local: Local, monkeypatch: pytest.MonkeyPatch) -> FinalState:
    return ingest(local)


@pytest.fixture(scope="session")
def clean_state(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., FinalState]:
    """`clean_state(backend, scenario=conversation)`: what a run of the scenario without
    faults leaves (computed once per session)."""
    states: dict[tuple[str, Scenario], FinalState] = {}

    def of(backend: str, scenario: Scenario = conversation) -> FinalState:
        if (backend, scenario) not in states:
            data_dir = tmp_path_factory.mktemp(f"clean-{backend}")
            with pytest.MonkeyPatch.context() as monkeypatch:
                unset_developer_environment(monkeypatch)
                with local_backend(backend, data_dir) as chosen:
                    clean = Local(backend=chosen, runner=LocalRunner())
                    states[backend, scenario] = scenario(clean, monkeypatch)
        return states[backend, scenario]

    return of


@pytest.fixture
def expected(clean_state: Callable[..., FinalState]) -> FinalState:
    """The clean run a test's final state must equal (a module may compare with another)."""
    return clean_state("sqlite")


@pytest.fixture
def local(request: pytest.FixtureRequest, expected: FinalState) -> Local:
    """A fresh SQLite backend (the embedded default), entered after the clean run it is
    compared with (a clean run restarts the handlers: it must not happen during a test)."""
    make: MakeLocal = request.getfixturevalue("make_local")
    return make(backend="sqlite")


# `memwrite serve` keys: two tenants whose data must stay apart, one for the fuzzer's noise.
API_KEYS = {"key-a": "tenant-a", "key-b": "tenant-b", "key-fuzz": "tenant-fuzz"}
HTTP_TIMEOUT_SECS = 10


@dataclass(frozen=True)
class Reply:
    status: int
    body: Any  # the JSON answer (every answer of the API is JSON)


@dataclass(frozen=True)
class Served:
    """`memwrite serve` on loopback (a real process) and its data directory."""

    process: ServeProcess
    data_dir: Path

    def request(
        self,
        method: str,
        path: str,
        body: bytes | dict[str, Any] | None = None,
        api_key: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        """One request on a fresh connection (a refused request closes its connection)."""
        raw = json.dumps(body).encode() if isinstance(body, dict) else body
        sent = {"Content-Type": "application/json", **(headers or {})}
        if api_key is not None:
            sent["x-api-key"] = api_key
        connection = http.client.HTTPConnection("127.0.0.1", self.process.port, HTTP_TIMEOUT_SECS)
        try:
            connection.request(method, path, body=raw, headers=sent)
            response = connection.getresponse()
            return Reply(response.status, json.loads(response.read() or b"null"))
        finally:
            connection.close()

    def state(self) -> FinalState:
        environ = {"MEMWRITE_BACKEND": "sqlite", "MEMWRITE_DATA_DIR": str(self.data_dir)}
        return sqlite_state(self.data_dir, LambdaEnvironment.load(environ).embedded_index_path())


@pytest.fixture(scope="session")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One `memwrite serve` for the session, offline (no model key whatever the shell has)."""
    data_dir = tmp_path_factory.mktemp("serve")
    env = {
        "MEMWRITE_API_KEYS": ",".join(f"{key}={tenant}" for key, tenant in API_KEYS.items()),
        "ANTHROPIC_API_KEY": "",
    }
    with running_serve(data_dir, env) as process:
        yield Served(process, data_dir)
