"""The evaluation data sets, read into one typed model: LoCoMo and CRI.

LoCoMo (`--format locomo`): a JSON list of conversations between two people, in dated
sessions; QA items cite their evidence turns (`dia_id`), and per-session observations cite the
turns they were drawn from. CRI (`--format cri`): one persona's user/assistant messages
(`conversations.jsonl`) and its `ground_truth.json` (fact changes with their key messages,
noise and signal examples). `/work/shared/data/README.md` describes both.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = [
    "ConversationData",
    "DataFormat",
    "DatasetData",
    "EvalTurn",
    "FactChange",
    "Question",
    "read_dataset",
]

# LoCoMo's session dates: "1:56 pm on 8 May, 2023".
_LOCOMO_DATE = "%I:%M %p on %d %B, %Y"
_LOCOMO_SESSION = re.compile(r"session_(\d+)")
# Evidence ids are a list, but a few are written as one string: "D8:6; D9:17".
_ID_SEPARATORS = re.compile(r"[;,\s]+")
CRI_USER = "user"


class DataFormat(StrEnum):
    LOCOMO = "locomo"
    CRI = "cri"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class EvalTurn(_Frozen):
    ref: str
    """The data set's own id of the turn (LoCoMo `dia_id`, CRI `message_id`)."""
    speaker: str
    text: str
    timestamp: datetime
    session: str
    """The data set's session of the turn: the API's `session_id` of its request."""


class Question(_Frozen):
    question: str
    evidence: frozenset[str]
    """Refs of the turns that answer it."""


class FactChange(_Frozen):
    """A CRI ground-truth change: `fact` went from `old_value` to `new_value`."""

    fact: str
    old_value: str
    new_value: str
    key_refs: frozenset[str]


class ConversationData(_Frozen):
    name: str
    turns: tuple[EvalTurn, ...]
    users: tuple[str, ...]
    """The speakers the conversation is run as (once each): the people, not an assistant."""
    questions: tuple[Question, ...]
    fact_bearing: frozenset[str]
    """Refs of the turns that carry a fact the data set knows of."""
    changes: tuple[FactChange, ...] = ()
    noise_refs: tuple[frozenset[str], ...] = ()
    """Per CRI noise example: the refs of the messages that hold its text."""


class DatasetData(_Frozen):
    name: str
    format: DataFormat
    conversations: tuple[ConversationData, ...]


def _ids(raw: Any) -> Iterator[str]:
    """Turn ids as the data writes them: one id, a list of them, or several in one string."""
    for item in raw if isinstance(raw, list) else [raw]:
        yield from (part for part in _ID_SEPARATORS.split(str(item)) if part)


def _locomo_turns(conversation: dict[str, Any]) -> list[EvalTurn]:
    """Every turn in session order; a session's turns at its date, one second apart, so that
    their order is also their time order."""
    sessions = sorted(
        (int(match.group(1)), key)
        for key in conversation
        if (match := _LOCOMO_SESSION.fullmatch(key))
    )
    turns: list[EvalTurn] = []
    for _, key in sessions:
        start = datetime.strptime(conversation[f"{key}_date_time"], _LOCOMO_DATE)
        start = start.replace(tzinfo=UTC)
        turns.extend(
            EvalTurn(
                ref=turn["dia_id"],
                speaker=turn["speaker"],
                text=turn["text"],
                timestamp=start + timedelta(seconds=position),
                session=key,
            )
            for position, turn in enumerate(conversation[key])
        )
    return turns


def _locomo_conversation(sample: dict[str, Any]) -> ConversationData:
    conversation = sample["conversation"]
    questions = tuple(
        Question(question=item["question"], evidence=frozenset(_ids(item["evidence"])))
        for item in sample.get("qa", [])
        if item.get("evidence")
    )
    cited = {
        ref
        for session in sample.get("observation", {}).values()
        for facts in session.values()
        for _, refs in facts
        for ref in _ids(refs)
    }
    evidence = {ref for question in questions for ref in question.evidence}
    turns = _locomo_turns(conversation)
    known = {turn.ref for turn in turns}
    return ConversationData(
        name=sample["sample_id"],
        turns=tuple(turns),
        users=(conversation["speaker_a"], conversation["speaker_b"]),
        questions=questions,
        fact_bearing=frozenset((cited | evidence) & known),
    )


def _locomo_files(path: Path) -> list[Path]:
    return sorted(path.glob("*.json")) if path.is_dir() else [path]


def read_locomo(path: Path) -> DatasetData:
    """A LoCoMo file, or every `*.json` of a directory."""
    conversations = [
        _locomo_conversation(sample)
        for file in _locomo_files(path)
        for sample in json.loads(file.read_text(encoding="utf-8"))
    ]
    if not conversations:
        raise ValueError(f"{path}: no LoCoMo conversations")
    return DatasetData(
        name=path.stem if path.is_file() else path.name,
        format=DataFormat.LOCOMO,
        conversations=tuple(conversations),
    )


def _refs_holding(text: str, turns: Iterable[EvalTurn]) -> frozenset[str]:
    """The messages that are `text`, or failing that, contain it."""
    turns = list(turns)
    exact = frozenset(turn.ref for turn in turns if turn.text == text)
    return exact or frozenset(turn.ref for turn in turns if text in turn.text)


def _cri_time(raw: str) -> datetime:
    parsed = datetime.fromisoformat(raw)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def read_cri(path: Path) -> DatasetData:
    """A CRI data set directory: `conversations.jsonl` and `ground_truth.json`."""
    lines = (path / "conversations.jsonl").read_text(encoding="utf-8").splitlines()
    messages = sorted(
        (json.loads(line) for line in lines if line.strip()), key=lambda m: int(m["message_id"])
    )
    truth = json.loads((path / "ground_truth.json").read_text(encoding="utf-8"))
    turns = tuple(
        EvalTurn(
            ref=str(message["message_id"]),
            speaker=message["role"],
            text=message["content"],
            timestamp=_cri_time(message["timestamp"]),
            session=str(message.get("session_id", path.name)),
        )
        for message in messages
    )
    changes = tuple(
        FactChange(
            fact=change["fact"],
            old_value=change["old_value"],
            new_value=change["new_value"],
            key_refs=frozenset(_ids(change["key_messages"])),
        )
        for change in truth.get("changes", [])
    )
    # A change's new value is queried by its topic; its key messages are the evidence.
    questions = tuple(
        Question(question=change["query_topic"], evidence=frozenset(_ids(change["key_messages"])))
        for change in truth.get("changes", [])
    )
    signals = {
        ref
        for example in truth.get("signal_examples", [])
        for ref in _refs_holding(example["text"], turns)
    }
    key_refs = {ref for change in changes for ref in change.key_refs}
    conversation = ConversationData(
        name=path.name,
        turns=turns,
        users=(CRI_USER,),
        questions=questions,
        fact_bearing=frozenset(signals | key_refs),
        changes=changes,
        noise_refs=tuple(
            _refs_holding(example["text"], turns) for example in truth.get("noise_examples", [])
        ),
    )
    return DatasetData(name=path.name, format=DataFormat.CRI, conversations=(conversation,))


def read_dataset(data_format: DataFormat, path: Path) -> DatasetData:
    if not path.exists():
        raise ValueError(f"{path}: no such file or directory")
    return read_locomo(path) if data_format is DataFormat.LOCOMO else read_cri(path)
