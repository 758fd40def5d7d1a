"""A recorded run: one conversation through the pipeline with the model's answers, replayable.

`memwrite eval --llm --record DIR` writes one directory per run (a conversation as one of its
users) under `DIR`:

    DIR/<data set>-<conversation>-<user>/
      run.json       what went in (the `POST /v1/turns` bodies, the searches, the settings
                     file's content), what it ran with (model, prompt versions) and what came
                     out (`RecordedOutcome`: the memories stored, the model calls, failed turns)
      exchanges/     every model request and answer, one file each
                     (`memwrite.adapters.anthropic.recording`, via `MEMWRITE_LLM_RECORD`)

Dropped under `tests/recorded/runs/`, it is a regression test (`tests/integration/
test_recorded_runs.py`): the same sessions go through the pipeline again, each request is
answered with the recorded answer to the same request body, and the outcome must be the same.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from memwrite.records.memory import MemoryUnit
from memwrite_local.runtime.pipeline import LocalRun

__all__ = [
    "EXCHANGES_DIR",
    "RECORDING_FORMAT",
    "RUN_FILE",
    "RecordedMemory",
    "RecordedOutcome",
    "RunRecording",
    "outcome_of",
    "prompt_versions",
    "read_recording",
    "recording_dirs",
    "write_recording",
]

RECORDING_FORMAT = 1  # bump when run.json's shape changes
RUN_FILE = "run.json"
EXCHANGES_DIR = "exchanges"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RecordedMemory(_Frozen):
    """A stored memory, by what it says: no ids or wall-clock times, which a replay changes."""

    turn: str  # the content of the turn it was drawn from
    text: str
    type: str
    topic: str
    entity: str
    attribute: str
    value: str
    negated: bool
    tier: str
    active: bool
    superseded: bool
    search_questions: list[str]


class RecordedOutcome(_Frozen):
    """What a replay must reproduce."""

    memories: list[RecordedMemory]
    llm_calls: int
    failed_turns: int


class RunRecording(_Frozen):
    """`run.json`."""

    format: int = RECORDING_FORMAT
    name: str
    provider: str
    model: str
    prompts: dict[str, str]  # each prompt's VERSION when recorded
    config: dict[str, Any]  # the MEMWRITE_CONFIG file's content when recorded ({}: defaults)
    sessions: list[dict[str, Any]]  # the `POST /v1/turns` bodies, in order
    queries: list[str]
    search_k: int
    outcome: RecordedOutcome


def prompt_versions() -> dict[str, str]:
    """Every prompt's VERSION now: a replay that misses a request names the ones that moved."""
    from memwrite.prompts import dedupe, extract, hype, resolve_refs, verify

    return {
        module.VERSION.split(".")[0]: module.VERSION
        for module in (extract, verify, hype, dedupe, resolve_refs)
    }


def outcome_of(run: LocalRun, sessions: Sequence[Mapping[str, Any]]) -> RecordedOutcome:
    """The outcome of `run`, whose input was `sessions` (in the order they were sent)."""
    contents = [turn["content"] for session in sessions for turn in session["turns"]]
    turn_ids: list[str] = run.trace["turn_ids"]
    content_of = dict(zip(turn_ids, contents, strict=True))
    return RecordedOutcome(
        memories=sorted(
            (_recorded_memory(memory, content_of) for memory in run.memories),
            key=lambda memory: memory.model_dump_json(),
        ),
        llm_calls=run.trace["llm_calls"],
        failed_turns=len(run.failed),
    )


def _recorded_memory(memory: MemoryUnit, content_of: Mapping[str, str]) -> RecordedMemory:
    return RecordedMemory(
        turn=content_of.get(memory.turn_id, memory.turn_id),
        text=memory.text,
        type=memory.type.value,
        topic=memory.topic,
        entity=memory.entity,
        attribute=memory.attribute,
        value=memory.value,
        negated=memory.negated,
        tier=memory.tier.value,
        active=memory.active,
        superseded=memory.superseded_by is not None,
        search_questions=list(memory.search_questions),
    )


def write_recording(directory: Path, recording: RunRecording) -> Path:
    """`recording` as `directory/run.json`, written whole or not at all."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / RUN_FILE
    temporary = directory / f".{RUN_FILE}.{os.getpid()}.tmp"
    temporary.write_text(recording.model_dump_json(indent=2) + "\n", encoding="utf-8")
    temporary.replace(path)
    return path


def read_recording(directory: Path) -> RunRecording:
    text = (directory / RUN_FILE).read_text(encoding="utf-8")
    return RunRecording.model_validate(json.loads(text))


def recording_dirs(root: Path) -> list[Path]:
    """Every recorded run under `root` (a directory holding `run.json`), in name order."""
    return sorted(path.parent for path in root.rglob(RUN_FILE))
