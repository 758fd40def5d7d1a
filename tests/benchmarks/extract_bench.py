"""Extraction cost on real conversations: how much the rules handle, LLM calls per turn.

Replays each dataset as the pipeline sees it: every turn through the pre-filter, survivors
grouped per user and session into SQS-sized batches (10 turns, in order), the rules on every
survivor, and the LLM calls `extract_with_llm` would make for the turns the rules did not fully
handle (counted with `count_llm_calls`, no model is called).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from memwrite.config.settings import PipelineConfig
from memwrite.extract.llm import count_llm_calls
from memwrite.extract.rules import extract_with_rules
from memwrite.models import Role
from memwrite.pre_filter.checks import screen
from memwrite.prompts.extract import BatchTurn, ExtractPromptInput, SessionTurn
from tests.datasets import load_cri_messages, load_locomo

BATCH_TURNS = 10  # SQS delivers up to 10 messages of a FIFO group per batch


@dataclass(frozen=True)
class Turn:
    user: str
    session: str
    role: Role
    text: str
    at: datetime


def locomo_turns() -> list[Turn]:
    base = datetime(2023, 1, 1, tzinfo=UTC)
    return [
        # Both speakers are people talking about themselves: each is a user of the agent.
        Turn(
            f"{t.conversation}/{t.speaker}",
            f"{t.conversation}/{t.dia_id.split(':')[0]}",
            Role.USER,
            t.text,
            base + timedelta(minutes=index),
        )
        for index, t in enumerate(load_locomo())
    ]


def cri_turns() -> list[Turn]:
    return [
        Turn(
            "marcus",
            str(m["session_id"]),
            Role(str(m["role"])),
            str(m["content"]),
            datetime.fromisoformat(str(m["timestamp"])).replace(tzinfo=UTC),
        )
        for m in load_cri_messages()
    ]


@dataclass(frozen=True)
class Survivor:
    turn: Turn
    text: str  # what the pre-filter kept
    fully_covered: bool


def _batches(survivors: list[Survivor]) -> Iterable[list[Survivor]]:
    groups: dict[tuple[str, str], list[Survivor]] = {}
    for item in survivors:
        groups.setdefault((item.turn.user, item.turn.session), []).append(item)
    for group in groups.values():
        for start in range(0, len(group), BATCH_TURNS):
            yield group[start : start + BATCH_TURNS]


def _session_turn(item: Survivor) -> SessionTurn:  # as the session log replays it
    return SessionTurn(role=item.turn.role, text=item.text, timestamp=item.turn.at)


def measure(name: str, turns: list[Turn], config: PipelineConfig) -> dict[str, Any]:
    kept: list[tuple[Turn, str]] = []
    for turn in turns:
        text = screen(turn.text, config.pre_filter).text
        role_passes = turn.role is Role.USER or config.pre_filter.extract_from_assistant
        if text is not None and role_passes:
            kept.append((turn, text))
    rule_seconds = []
    survivors: list[Survivor] = []
    candidates = 0
    for turn, text in kept:
        started = time.perf_counter()
        rules = extract_with_rules(text, role=turn.role.value)
        rule_seconds.append(time.perf_counter() - started)
        candidates += len(rules.candidates)
        survivors.append(Survivor(turn, text, rules.fully_covered))

    # The same batches and context the extract stage builds (memwrite.extract.stage.run).
    llm_calls = 0
    llm_batches = 0
    history: dict[tuple[str, str], list[SessionTurn]] = {}
    for batch in _batches(survivors):
        context = history.setdefault((batch[0].turn.user, batch[0].turn.session), [])
        if not all(item.fully_covered for item in batch):
            inp = ExtractPromptInput(
                turns=tuple(
                    BatchTurn(
                        turn_id=str(index),
                        role=item.turn.role,
                        text=item.text,
                        timestamp=item.turn.at,
                    )
                    for index, item in enumerate(batch)
                ),
                session_turns=tuple(context[-config.extract.max_source_turns :]),
            )
            llm_calls += count_llm_calls(inp, config.extract)
            llm_batches += 1
        context.extend(_session_turn(item) for item in batch)

    fully = sum(1 for item in survivors if item.fully_covered)
    return {
        "dataset": name,
        "turns_in": len(turns),
        "prefilter_survivors": len(survivors),
        "fully_handled_by_rules": fully,
        "share_of_survivors_fully_handled_by_rules": round(fully / max(len(survivors), 1), 3),
        "rule_candidates": candidates,
        "rule_candidates_per_turn_in": round(candidates / len(turns), 3),
        "llm_batches": llm_batches,
        "llm_calls": llm_calls,
        "llm_calls_per_turn_in": round(llm_calls / len(turns), 3),
        "llm_calls_per_turn_goal_locomo": 0.6,
        "rule_path_median_us_per_survivor": round(statistics.median(rule_seconds) * 1e6, 1),
    }


def run() -> list[dict[str, Any]]:
    config = PipelineConfig()
    return [
        measure("locomo-dev", locomo_turns(), config),
        measure("cri-persona-1", cri_turns(), config),
    ]
