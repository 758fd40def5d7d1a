"""Dedupe's cosine band (`pipeline.dedupe`), calibrated per embedder on labelled memory pairs:
the precision and recall of the merges tier 2 makes offline, and how many pairs the band sends
to the LLM judge (`make bench`, section `dedupe_band`; `python -m tests.benchmarks.dedupe_band`).

A pair is two memory texts a user's store could hold, labelled same (a restatement: dedupe
should merge) or different (another value, another fact: a merge would lose one):

- written for this project: restatements as the extractor and the rules phrase memories, and
  hard negatives (the same predicate with another value);
- from CRI persona 1 (`../shared/data/cri-persona-1`, MIT): each time-bounded fact's
  description against its value in the memory template (same), the old and new value of each
  fact change (different), and time-bounded facts of one topic with other values (different);
- from LoCoMo (`../shared/data/locomo-dev`, evaluation use only): two observations of one
  speaker in one session, distinct facts about one person (different).

Tier 2 merges at or above `dedupe_merge_threshold`; below `dedupe_distinct_threshold` a pair is
new; in between the judge decides (offline: new). `calibrate` picks, on a 0.01 grid, the merge
threshold of the best F0.5 of tier 2's merges (precision weighs twice recall: a wrong merge
loses a fact, a missed one only costs a duplicate), and the highest distinct threshold that
still lets 95% of the same pairs merge at tier 2 or reach the judge.

Cosine is all this measures: before it, dedupe compares a keyed memory (a fact, a preference)
only with memories of its own entity and attribute whose value shares a word with its own, so
"born in 1990" never meets "born in 1985". Static embedders average their tokens, so a
swapped order ("tea over coffee" / "coffee over tea") looks the same to them: no threshold
below 1 keeps it apart.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from memwrite.config.settings import DedupeConfig
from memwrite.model_ports import Embedder
from memwrite.wiring.search import offline_embedder
from tests.datasets import SHARED_DATA

# (first, second) restatements of one memory, as dedupe sees candidate and stored texts.
SAME: list[tuple[str, str]] = [
    ("The user lives in Berlin.", "The user lives in Berlin, Germany."),
    ("The user lives in Berlin.", "The user is living in Berlin now."),
    ("The user works at Google.", "The user is employed by Google."),
    ("The user works at Google.", "The user works for Google."),
    ("The user is allergic to peanuts.", "The user has a peanut allergy."),
    ("The user loves jazz.", "The user really enjoys jazz music."),
    ("The user hates cilantro.", "The user can't stand cilantro."),
    ("The user's favorite food is ramen.", "The user's favourite dish is ramen."),
    (
        "The user wants answers in short bullet points.",
        "The user prefers short bullet-point answers.",
    ),
    ("The user is a nurse.", "The user works as a nurse."),
    ("The user has a cat named Miso.", "The user owns a cat called Miso."),
    ("The user speaks Portuguese fluently.", "The user is fluent in Portuguese."),
    ("The user is studying law at night school.", "The user studies law at night school."),
    ("The user drives a Tesla.", "The user's car is a Tesla."),
    ("The user's sister is named Ana.", "The user has a sister called Ana."),
    ("The user's partner is named Alex.", "The user's partner is Alex."),
    ("The user is vegetarian.", "The user follows a vegetarian diet."),
    ("The user runs every morning.", "The user goes for a run every morning."),
    ("The user is training for a marathon.", "The user is preparing for a marathon."),
    ("The user plays the guitar.", "The user plays guitar."),
    ("The user likes hiking in the mountains.", "The user enjoys mountain hiking."),
    ("The user's daughter is named Mia.", "The user has a daughter named Mia."),
    ("The user was born in 1990.", "The user's birth year is 1990."),
    ("The user moved to Austin in March.", "The user relocated to Austin in March."),
    (
        "The user's team is switching from Jira to Linear.",
        "The user's team is moving from Jira to Linear.",
    ),
    ("The user is learning Japanese.", "The user is studying Japanese."),
    ("The user prefers tea over coffee.", "The user likes tea more than coffee."),
    ("The user's manager is Priya.", "Priya is the user's manager."),
    ("The user does not eat pork.", "The user doesn't eat pork."),
    ("The user wants replies in Spanish.", "The user prefers replies in Spanish."),
]
# Memories a merge would lose: the same predicate with another value, or a near topic.
DIFFERENT: list[tuple[str, str]] = [
    ("The user lives in Berlin.", "The user lives in Lisbon."),
    ("The user works at Google.", "The user works at Amazon."),
    ("The user is allergic to peanuts.", "The user is allergic to shellfish."),
    ("The user loves jazz.", "The user loves hip hop."),
    ("The user's sister is named Ana.", "The user's sister is named Eva."),
    ("The user has a cat named Miso.", "The user has a dog named Miso."),
    ("The user is a nurse.", "The user is a teacher."),
    ("The user drives a Tesla.", "The user drives a Volvo."),
    ("The user speaks Portuguese fluently.", "The user speaks Spanish fluently."),
    ("The user is learning Japanese.", "The user is learning Korean."),
    ("The user prefers tea over coffee.", "The user prefers coffee over tea."),
    ("The user's daughter is named Mia.", "The user's son is named Mia."),
    ("The user was born in 1990.", "The user was born in 1985."),
    ("The user moved to Austin in March.", "The user moved to Denver in March."),
    ("The user runs every morning.", "The user swims every morning."),
    ("The user plays the guitar.", "The user plays the piano."),
    ("The user's manager is Priya.", "The user's manager is Tom."),
    ("The user likes hiking in the mountains.", "The user likes skiing in the mountains."),
    ("The user wants replies in Spanish.", "The user wants replies in French."),
    ("The user is vegetarian.", "The user is vegan."),
]


@dataclass(frozen=True)
class Pair:
    first: str
    second: str
    same: bool
    source: str


def _template(fact: str, value: str) -> str:
    return f"The user's {fact.replace('_', ' ')} is {value}."


def cri_pairs(root: Path) -> list[Pair]:
    """Same: a time-bounded fact's description and its value in the memory template;
    different: a change's old and new value, and one topic's facts with other values."""
    truth = json.loads((root / "ground_truth.json").read_text(encoding="utf-8"))
    pairs = [
        Pair(
            _template(c["fact"], c["old_value"]), _template(c["fact"], c["new_value"]), False, "cri"
        )
        for c in truth["changes"]
    ]
    facts = truth["temporal_facts"]
    for fact in facts:
        described = fact["description"].replace("Marcus", "The user", 1).rstrip(".") + "."
        topic = fact["query_topic"]
        pairs.append(Pair(described, _template(topic, fact["value"]), True, "cri"))
    for first, second in itertools.combinations(facts, 2):
        if first["query_topic"] == second["query_topic"] and first["value"] != second["value"]:
            texts = (_template(f["query_topic"], f["value"]) for f in (first, second))
            pairs.append(Pair(*texts, False, "cri"))
    return pairs


def locomo_pairs(root: Path, limit: int = 200) -> list[Pair]:
    """Different: two observations of one speaker in one session (distinct facts about one
    person), the first `limit` in file order."""
    pairs: list[Pair] = []
    for conversation in json.loads((root / "locomo-dev.json").read_text(encoding="utf-8")):
        for session in conversation["observation"].values():
            for facts in session.values():
                texts = [text for text, _ in facts]
                pairs.extend(Pair(a, b, False, "locomo") for a, b in itertools.pairwise(texts))
    return pairs[:limit]


def all_pairs() -> list[Pair]:
    own = [Pair(a, b, True, "own") for a, b in SAME] + [
        Pair(a, b, False, "own") for a, b in DIFFERENT
    ]
    return [
        *own,
        *cri_pairs(SHARED_DATA / "cri-persona-1"),
        *locomo_pairs(SHARED_DATA / "locomo-dev"),
    ]


def similarities(embedder: Embedder, pairs: list[Pair]) -> np.ndarray:
    first = embedder.embed([p.first for p in pairs])
    second = embedder.embed([p.second for p in pairs])
    return np.einsum("ij,ij->i", first, second)


def scores(cosines: np.ndarray, same: np.ndarray, merge: float, distinct: float) -> dict[str, Any]:
    """Tier 2's merges offline: precision and recall against the labels, and the judge band."""
    merged = cosines >= merge
    band = (cosines >= distinct) & ~merged
    true = int(np.sum(merged & same))
    return {
        "merge_threshold": merge,
        "distinct_threshold": distinct,
        "merges": int(merged.sum()),
        "precision": round(true / merged.sum(), 3) if merged.any() else None,
        "recall": round(true / same.sum(), 3),
        "same_to_judge": int(np.sum(band & same)),
        "different_to_judge": int(np.sum(band & ~same)),
        # With a judge that is always right: every same pair merges at tier 2 or 3.
        "recall_with_judge": round(float(np.sum((merged | band) & same)) / same.sum(), 3),
    }


JUDGED_RECALL = 0.95  # same pairs that merge at tier 2 or reach the judge


def _f_half(cosines: np.ndarray, same: np.ndarray, merge: float) -> float:
    merged = cosines >= merge
    true = float(np.sum(merged & same))
    if true == 0:
        return 0.0
    precision, recall = true / merged.sum(), true / same.sum()
    return 1.25 * precision * recall / (0.25 * precision + recall)


def calibrate(cosines: np.ndarray, same: np.ndarray) -> tuple[float, float]:
    """(merge, distinct) on a 0.01 grid: the merge threshold of the best F0.5, the highest
    distinct threshold at which `JUDGED_RECALL` of the same pairs are at or above it."""
    grid = [round(t / 100, 2) for t in range(0, 101)]
    merge = max(grid, key=lambda t: (_f_half(cosines, same, t), t))
    reached = [t for t in grid if np.mean(cosines[same] >= t) >= JUDGED_RECALL]
    return merge, min(max(reached, default=0.0), merge)


def run() -> dict[str, Any]:
    pairs = all_pairs()
    same = np.array([p.same for p in pairs])
    default = DedupeConfig()
    report: dict[str, Any] = {
        "pairs": {"same": int(same.sum()), "different": int((~same).sum())},
    }
    for name, band in (("hashing", (0.92, 0.80)), ("wordllama", None)):
        cosines = similarities(offline_embedder(name, None), pairs)  # type: ignore[arg-type]
        merge, distinct = calibrate(cosines, same)
        report[name] = {
            "calibrated": scores(cosines, same, merge, distinct),
            # The band dedupe uses with this embedder: hashing's from before, WordLlama's the
            # defaults of DedupeConfig.
            "configured": scores(
                cosines,
                same,
                *(band or (default.dedupe_merge_threshold, default.dedupe_distinct_threshold)),
            ),
        }
    return report


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
