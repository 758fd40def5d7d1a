"""The rule fast-path on real conversations: is what it stores right, and how much does it handle?

Every memory the rules make on LoCoMo-dev and the CRI persona (user turns) was read against its
source sentence and labelled right or wrong by hand in `rule_labels.jsonl` (turn id, memory key,
polarity, label; never the conversation text). The rules run in production without an LLM
looking over their shoulder, so their precision must stay >= 0.95. A memory without a label
fails the test: a rule change that makes new memories needs them read and labelled first. The
same holds for the memories the rules mark as explicit corrections (which replace pinned
memories): each needs a label that says `"correction": true`.
Requires ../shared/data; skipped with a reason when it is absent.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from memwrite.extract.rules import extract_with_rules
from tests.datasets import CRI_PERSONA, LOCOMO_DEV, load_cri_messages, load_locomo

LABELS = Path(__file__).parent / "rule_labels.jsonl"
PRECISION_GOAL = 0.95

LabelKey = tuple[str, str, bool]
"""(turn id, 'entity|attribute|value', negated)"""


@dataclass(frozen=True)
class RuleTurn:
    turn_id: str
    text: str
    fact_bearing: bool


def _turns() -> list[RuleTurn]:
    locomo = [
        RuleTurn(f"locomo:{t.conversation}:{t.dia_id}", t.text, t.fact_bearing)
        for t in load_locomo()
    ]
    cri = [
        RuleTurn(f"cri:{m['message_id']}", str(m["content"]), fact_bearing=False)
        for m in load_cri_messages()
        if m["role"] == "user"
    ]
    return locomo + cri


def _labels() -> tuple[dict[LabelKey, str], set[LabelKey]]:
    """The label of each memory, and the memories labelled as the user's explicit corrections."""
    labels: dict[LabelKey, str] = {}
    corrections: set[LabelKey] = set()
    for line in LABELS.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        key = (row["turn"], row["key"], row["negated"])
        labels[key] = row["label"]
        if row.get("correction"):
            corrections.add(key)
    return labels, corrections


@pytest.mark.skipif(
    not (LOCOMO_DEV.exists() and CRI_PERSONA.exists()), reason="../shared/data not found"
)
def test_rule_memories_on_real_chat_are_right() -> None:
    # Given every LoCoMo-dev turn and CRI user turn, and the hand labels of rule memories
    turns = _turns()
    labels, labelled_corrections = _labels()
    # When the rules read each turn
    made: list[LabelKey] = []
    marked: list[LabelKey] = []  # stated as explicit corrections
    handled = with_memory = 0
    right_turns: set[str] = set()
    for turn in turns:
        found = extract_with_rules(turn.text, source_turn_id=turn.turn_id)
        handled += found.fully_covered
        with_memory += bool(found.candidates)
        for c in found.candidates:
            key = (turn.turn_id, f"{c.entity}|{c.attribute}|{c.value}", c.negated)
            made.append(key)
            if c.correction:
                marked.append(key)
            if labels.get(key) == "right":
                right_turns.add(turn.turn_id)
    unlabelled = [key for key in made if key not in labels]
    right = sum(labels.get(key) == "right" for key in made)
    labelled_right = sum(label == "right" for label in labels.values())
    precision = right / len(made) if made else 1.0
    fact_bearing = [t for t in turns if t.fact_bearing]
    fact_turns_hit = sum(t.turn_id in right_turns for t in fact_bearing)
    print(
        f"\nRule path on {len(turns)} real turns (LoCoMo-dev + CRI user turns), "
        f"{len(labels)} hand-labelled memories:\n"
        f"  precision {precision:.3f} ({right}/{len(made)} memories right)\n"
        f"  recall of the labelled right memories {right / labelled_right:.3f} "
        f"({right}/{labelled_right})\n"
        f"  turns handled without an LLM {handled / len(turns):.3f} ({handled}/{len(turns)}); "
        f"turns with a rule memory {with_memory}\n"
        f"  LoCoMo fact-bearing turns with a right rule memory {fact_turns_hit}/{len(fact_bearing)}"
        "\n"
        f"  memories marked as explicit corrections {len(marked)}"
    )
    # Then every memory has been read and labelled, and at least 95 % of them are right
    assert unlabelled == [], f"label these rule memories by hand in {LABELS.name}: {unlabelled}"
    assert precision >= PRECISION_GOAL
    # And every correction the rules mark was read as one
    misread = [key for key in marked if key not in labelled_corrections]
    assert misread == [], f"corrections not labelled as such in {LABELS.name}: {misread}"


SAMPLE = Path(__file__).parent / "rule_sample.jsonl"


@pytest.mark.skipif(
    not (LOCOMO_DEV.exists() and CRI_PERSONA.exists()), reason="../shared/data not found"
)
def test_rule_memories_on_the_hand_read_sample_are_right() -> None:
    # Given 150 real user turns the rules fire on or nearly fire on (a rule's pattern matches
    # inside a clause, or a claim verb opens one), each read by hand: the memories the rules
    # made labelled right or wrong, and the simple claim they left to the model where one was
    rows = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()]
    texts = {turn.turn_id: turn.text for turn in _turns()}
    # When the rules read each turn
    made = right = deferred = 0
    unlabelled: list[tuple[str, str]] = []
    for row in rows:
        labels = {(m["key"], m["negated"]): m["label"] for m in row["memories"]}
        found = extract_with_rules(texts[row["turn"]], source_turn_id=row["turn"])
        deferred += not found.fully_covered
        for c in found.candidates:
            key = (f"{c.entity}|{c.attribute}|{c.value}", c.negated)
            made += 1
            right += labels.get(key) == "right"
            if key not in labels:
                unlabelled.append((row["turn"], key[0]))
    missed = sum("missed" in row for row in rows)
    precision = right / made if made else 1.0
    print(
        f"\nRule path on the hand-read sample ({len(rows)} turns): precision {precision:.3f} "
        f"({right}/{made} memories right); turns left to the model {deferred}; simple claims "
        f"the rules left to the model {missed}"
    )
    # Then every memory was read, and at least 95 % of them are right
    assert unlabelled == [], f"label these rule memories by hand in {SAMPLE.name}: {unlabelled}"
    assert precision >= PRECISION_GOAL
