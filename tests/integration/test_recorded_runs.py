"""Recorded runs as regression tests: each `tests/recorded/runs/<name>/` replayed and checked.

A recording (`memwrite eval --llm --record DIR`, format in `memwrite_local.evaluation.recording`)
holds a conversation's `POST /v1/turns` bodies, the model's answers to every request the run
made, and the memories it stored. Replayed, the same bodies go through the whole local pipeline
with a local fake API (`tests.fake_anthropic`) answering each request with the recorded answer
to the same body; the stored memories, the model calls and the failures must be the recorded
ones. A request with no recorded answer means the prompt or the pipeline changed what it asks:
the test names the prompts that moved, and the recording is re-made.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memwrite_local.cli import main
from memwrite_local.evaluation.recording import (
    EXCHANGES_DIR,
    RecordedOutcome,
    outcome_of,
    prompt_versions,
    read_recording,
    recording_dirs,
)
from memwrite_local.runtime.pipeline import run_sessions
from tests.fake_anthropic import serving
from tests.integration.conftest import unset_developer_environment
from tests.make_recorded_run import EXAMPLE, RUNS, record_example
from tests.recorded_api import RecordedExchanges

REPLAY_KEY = "sk-ant-replay"


def replay(
    directory: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> tuple[RecordedOutcome, RecordedExchanges]:
    """The recorded sessions through the pipeline again, answered from the recording."""
    recording = read_recording(directory)
    if recording.provider != "anthropic":
        pytest.skip(f"{directory.name}: recorded through {recording.provider}, replays the API's")
    exchanges = RecordedExchanges(directory / EXCHANGES_DIR)
    unset_developer_environment(monkeypatch)
    monkeypatch.delenv("MEMWRITE_LLM_RECORD", raising=False)
    if recording.config:
        settings = tmp_path / "recorded-config.json"
        settings.write_text(json.dumps(recording.config), encoding="utf-8")
        monkeypatch.setenv("MEMWRITE_CONFIG", str(settings))
    with serving(exchanges.answer) as fake:
        monkeypatch.setenv("ANTHROPIC_API_KEY", REPLAY_KEY)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
        run = run_sessions(recording.sessions, recording.queries, search_k=recording.search_k)
    return outcome_of(run, recording.sessions), exchanges


def moved_prompts(directory: Path) -> str:
    then, now = read_recording(directory).prompts, prompt_versions()
    changed = [f"{name} {then.get(name)} -> {v}" for name, v in now.items() if then.get(name) != v]
    return ", ".join(changed) or "none (the input or the pipeline's requests changed)"


@pytest.mark.parametrize("directory", recording_dirs(RUNS), ids=lambda path: path.name)
def test_a_recorded_run_reproduces_what_it_stored(
    directory: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Given a recorded run, its answers served by request
    # When its sessions go through the pipeline again
    outcome, exchanges = replay(directory, monkeypatch, tmp_path)
    # Then every request found its recorded answer...
    assert not exchanges.unmatched, (
        f"{len(exchanges.unmatched)} request(s) have no recorded answer in {directory.name}; "
        f"prompts changed since: {moved_prompts(directory)}. Re-record it (docs/recording.md)."
    )
    # ...every recorded answer was asked for...
    assert exchanges.unused() == 0
    # ...and the memories, model calls and failures are the recorded ones
    assert outcome == read_recording(directory).outcome


def test_the_example_recording_is_checked_in() -> None:
    # The parametrized replay above has at least the example to run
    assert EXAMPLE in [path.name.removesuffix("-user") for path in recording_dirs(RUNS)]


def test_eval_record_writes_a_run_that_replays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a fake API answering with recorded replies, and keys that must never be written:
    # the model's, and an ingest key of the settings file
    unset_developer_environment(monkeypatch)
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"api_keys": {"sk-ant-ingest": "other"}}), encoding="utf-8")
    monkeypatch.setenv("MEMWRITE_CONFIG", str(settings))
    record = tmp_path / "recordings"
    # When `memwrite eval --llm --record` runs the example conversation against it
    assert record_example(record) == 0
    # Then one run was recorded, its inputs, outcome and every model exchange...
    (directory,) = recording_dirs(record)
    recording = read_recording(directory)
    exchanges = list((directory / EXCHANGES_DIR).iterdir())
    assert recording.outcome.llm_calls == len(exchanges) > 0
    assert {memory.value for memory in recording.outcome.memories} == {"Lisbon", "cilantro"}
    # ...without the key anywhere
    for path in [directory / "run.json", *exchanges]:
        assert "sk-ant" not in path.read_text(encoding="utf-8")
    # And replayed, it reproduces itself
    outcome, replayed = replay(directory, monkeypatch, tmp_path)
    assert not replayed.unmatched
    assert replayed.unused() == 0
    assert outcome == recording.outcome


def test_record_needs_llm_a_key_and_a_new_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    unset_developer_environment(monkeypatch)
    data = tmp_path / "cri"
    data.mkdir()
    (data / "conversations.jsonl").write_text(
        '{"message_id": 1, "role": "user", "content": "I live in Porto.",'
        ' "timestamp": "2025-01-01T00:00:00Z"}\n',
        encoding="utf-8",
    )
    (data / "ground_truth.json").write_text("{}", encoding="utf-8")
    args = ["eval", "--format", "cri", str(data), "--record", str(tmp_path / "rec"), "--json"]
    # When --record is given without --llm, then it is a usage error that says so
    assert main(args) == 2
    assert "--record needs --llm" in capsys.readouterr().err
    # When --llm --record is given without a key, then it fails as --llm does
    assert main([*args, "--llm"]) == 2
    assert "ANTHROPIC_API_KEY" in capsys.readouterr().err
    # When the run's recording directory exists already, then nothing is overwritten
    (tmp_path / "rec" / "cri-user").mkdir(parents=True)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-unused")
    assert main([*args, "--llm"]) == 2
    assert "already holds a recording" in capsys.readouterr().err
    # And no model was called: nothing was recorded
    assert list((tmp_path / "rec").rglob("*.json")) == []
