"""Pleasantries on real conversations: dropped at the pre-filter, while a statement after a
greeting is kept.

`pleasantry_labels.jsonl` labels real turns by hand (turn id and label, never the text):
`pleasantry` for a turn that only greets, thanks, agrees or says goodbye ("Thanks, <name>!
Appreciate the kind words."), `statement` for a greeting or a thanks followed by something about
the speaker. Our own wording of both is in `tests/unit/test_pleasantries.py`. Requires
../shared/data; skipped with a reason when it is absent.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memwrite.config.settings import PreFilterConfig
from memwrite.pre_filter.checks import screen
from tests.datasets import CRI_PERSONA, LOCOMO_DEV, load_cri_messages, load_locomo

LABELS = Path(__file__).parent / "pleasantry_labels.jsonl"
DROP_GOAL = 0.8  # at least 4 of 5 pleasantries dropped


@pytest.mark.skipif(
    not (LOCOMO_DEV.exists() and CRI_PERSONA.exists()), reason="../shared/data not found"
)
def test_pleasantries_are_dropped_and_statements_after_greetings_kept() -> None:
    # Given hand-labelled real turns: pleasantries, and statements after a greeting
    texts = {f"locomo:{t.conversation}:{t.dia_id}": t.text for t in load_locomo()}
    texts |= {f"cri:{m['message_id']}": str(m["content"]) for m in load_cri_messages()}
    rows = [json.loads(line) for line in LABELS.read_text(encoding="utf-8").splitlines()]
    config = PreFilterConfig()
    # When each is screened alone
    dropped = {row["turn"]: screen(texts[row["turn"]], config).reason for row in rows}
    pleasantries = [row["turn"] for row in rows if row["label"] == "pleasantry"]
    statements = [row["turn"] for row in rows if row["label"] == "statement"]
    pleasantries_dropped = [turn for turn in pleasantries if dropped[turn] is not None]
    statements_lost = [turn for turn in statements if dropped[turn] is not None]
    print(
        f"\nPleasantries dropped {len(pleasantries_dropped)}/{len(pleasantries)}; statements "
        f"after a greeting kept {len(statements) - len(statements_lost)}/{len(statements)}"
    )
    # Then at least 4 of 5 pleasantries are dropped (a form rule, or too short: "Bye!"), and no
    # statement is lost
    assert len(pleasantries_dropped) >= DROP_GOAL * len(pleasantries)
    assert statements_lost == []
