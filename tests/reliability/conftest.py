"""The chaos suite's fixtures: the integration suite's backends (`make_local`, SQLite by
default here, moto where a fault is DynamoDB's), the final state a clean run leaves
(`tests.reliability.final_state`), to which every faulty run is compared, and one
`memwrite serve` process for the API tests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from memwrite_local.runtime.embedded import local_backend
from memwrite_local.runtime.runner import LocalRunner
from tests.integration.conftest import (  # noqa: F401 (fixtures shared with the integration suite)
    Local,
    MakeLocal,
    batch_writes_refuse_duplicate_keys,
    make_body,
    make_local,
    unset_developer_environment,
)
from tests.reliability.final_state import FinalState
from tests.reliability.runs import ingest
from tests.reliability.served import API_KEYS, Served
from tests.serve_process import running_serve

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
