"""`memwrite eval` on the real development data (README "Evaluation"): the report's numbers
stay within sane bounds. Requires ../shared/data; skipped with a reason when it is absent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli_process import run_memwrite_in_process
from tests.datasets import SHARED_DATA

LOCOMO_DIR = SHARED_DATA / "locomo-dev"
CRI_DIR = SHARED_DATA / "cri-persona-1"

pytestmark = pytest.mark.skipif(
    not (LOCOMO_DIR.exists() and CRI_DIR.exists()), reason=f"{SHARED_DATA} not found"
)


def _report(charts: Path, data_format: str, path: Path) -> dict[str, Any]:
    """`memwrite eval --json` of one data set (each test its own: under pytest-xdist the two
    may run on different workers, and neither waits for the other's data set)."""
    result = run_memwrite_in_process(
        "eval", "--json", "--charts", str(charts), "--format", data_format, str(path)
    )
    assert result.returncode == 0, result.stderr
    datasets: list[dict[str, Any]] = json.loads(result.stdout)["datasets"]
    (dataset,) = datasets
    return dataset


def _bounded(dataset: dict[str, Any]) -> None:
    """What holds for any data set: rates are rates, stores are no bigger than their input."""
    assert dataset["failed_turns"] == 0
    assert dataset["llm_calls_per_turn"] == 0.0  # offline: the rule extractor only
    assert 0 < dataset["items_stored"] <= dataset["turns"]
    assert dataset["supersessions"] <= dataset["items_stored"]
    assert sum(dataset["dropped_by_stage"].values()) <= dataset["turns"]
    assert dataset["baseline_items_stored"] == dataset["turns"]
    for recalls in (dataset["recall_at_k"], dataset["baseline_raw_bm25_recall_at_k"]):
        assert 0.0 <= recalls["5"] <= recalls["10"] <= 1.0


def test_locomo_dev(tmp_path: Path) -> None:
    locomo = _report(tmp_path, "locomo", LOCOMO_DIR)
    assert locomo["name"] == "locomo-dev"
    _bounded(locomo)
    # 788 turns in two conversations, each run once per speaker
    assert (locomo["conversation_turns"], locomo["turns"], locomo["runs"]) == (788, 1576, 4)
    # Every QA item with evidence is searched (2 of 304 have none)
    assert locomo["qa_items"] == 302
    # The pre-filter judges forms: it keeps nearly every fact-bearing turn
    assert locomo["fact_bearing_recall"] >= 0.99
    # Chit-chat between friends: the funnel stores a small fraction of the turns
    assert locomo["memories_per_1000_turns"] < 100
    # Raw turns answer the questions' words: the anchor finds many evidence turns
    assert locomo["baseline_raw_bm25_recall_at_k"]["10"] > 0.4


def test_cri_persona(tmp_path: Path) -> None:
    cri = _report(tmp_path, "cri", CRI_DIR)
    assert cri["name"] == "cri-persona-1"
    _bounded(cri)
    assert (cri["conversation_turns"], cri["runs"]) == (2862, 1)
    assert cri["fact_bearing_recall"] >= 0.9
    assert cri["cri"]["changes"] == 7
    assert cri["cri"]["changes_new_active_old_superseded"] <= 7
    # Noise must not become memories: allow a few of the 20
    assert cri["cri"]["noise_examples"] == 20
    assert cri["cri"]["noise_examples_with_memory"] <= 3
