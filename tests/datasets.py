"""Loaders for the real conversation data in ../shared/data (never copied into the repo)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
LOCOMO_DEV = SHARED_DATA / "locomo-dev" / "locomo-dev.json"
CRI_PERSONA = SHARED_DATA / "cri-persona-1" / "conversations.jsonl"


@dataclass(frozen=True)
class LocomoTurn:
    conversation: str
    dia_id: str
    speaker: str
    text: str
    fact_bearing: bool  # a QA evidence turn or cited by an observation


def _evidence_ids(sample: dict[str, object]) -> set[str]:
    ids: set[str] = set()
    for qa in sample["qa"]:  # type: ignore[attr-defined]
        ids.update(str(e).strip() for e in qa.get("evidence", []))
    for session in sample["observation"].values():  # type: ignore[attr-defined]
        for facts in session.values():
            ids.update(str(dia_id).strip() for _, dia_id in facts)
    return ids


def load_locomo(path: Path = LOCOMO_DEV) -> list[LocomoTurn]:
    turns: list[LocomoTurn] = []
    for sample in json.loads(path.read_text(encoding="utf-8")):
        evidence = _evidence_ids(sample)
        conversation = sample["conversation"]
        sessions = sorted(
            (key for key in conversation if key.startswith("session_") and key[8:].isdigit()),
            key=lambda key: int(key[8:]),
        )
        for key in sessions:
            for turn in conversation[key]:
                turns.append(
                    LocomoTurn(
                        conversation=sample["sample_id"],
                        dia_id=turn["dia_id"],
                        speaker=turn["speaker"],
                        text=turn["text"],
                        fact_bearing=turn["dia_id"] in evidence,
                    )
                )
    return turns


def load_cri_messages(path: Path = CRI_PERSONA) -> list[dict[str, object]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]
