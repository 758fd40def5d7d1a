"""The offline embedders (`make bench`, section `embedder`; alone:
`python -m tests.benchmarks.embedder_bench`): what loading one costs a fresh process (seconds,
resident memory), and what embedding costs once loaded (one search query; a batch of LoCoMo
turns, as stage 7 and a backfill embed them), WordLlama and hashing side by side in one run.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from memwrite.wiring.search import offline_embedder
from tests.datasets import load_locomo

ROOT = Path(__file__).resolve().parents[2]
LOAD_RUNS = 5
QUERIES = 200
BATCH = 1_000

# A fresh interpreter with memwrite's wiring imported: resident memory and time before and after
# building the embedder (its own imports included) and embedding one text. VmRSS, not
# ru_maxrss: the peak would count the interpreter's own start-up too.
_LOAD = """
import sys, time
from memwrite.wiring.search import offline_embedder

def rss_mb():
    with open("/proc/self/status") as status:
        line = next(l for l in status if l.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024

before = rss_mb()
started = time.perf_counter()
embedder = offline_embedder(sys.argv[1], None)
embedder.embed(["Where does the user live?"])
print(time.perf_counter() - started, rss_mb() - before)
"""


def _load(name: str) -> dict[str, float]:
    env = {**os.environ, "POWERTOOLS_TRACE_DISABLED": "true"}
    runs = [
        tuple(
            float(word)
            for word in subprocess.run(
                [sys.executable, "-c", _LOAD, name],
                capture_output=True,
                text=True,
                check=True,
                cwd=ROOT,
                env=env,
            ).stdout.split()
        )
        for _ in range(LOAD_RUNS)
    ]
    return {
        "load_median_s": round(statistics.median(r[0] for r in runs), 3),
        "rss_added_median_mb": round(statistics.median(r[1] for r in runs), 1),
    }


def run() -> dict[str, Any]:
    texts = [turn.text for turn in load_locomo() if turn.text.strip()]
    queries = [text[:60] for text in texts[:QUERIES]]
    batch = (texts * (BATCH // len(texts) + 1))[:BATCH]
    report: dict[str, Any] = {"load_runs": LOAD_RUNS, "queries": QUERIES, "batch": BATCH}
    embedders = {name: offline_embedder(name, None) for name in ("wordllama", "hashing")}
    for embedder in embedders.values():
        embedder.embed(queries)  # warm: caches and first-call allocations
    per_query: dict[str, list[float]] = {name: [] for name in embedders}
    for query in queries:  # alternated, so both see the same load
        for name, embedder in embedders.items():
            started = time.perf_counter()
            embedder.embed([query])
            per_query[name].append((time.perf_counter() - started) * 1000)
    for name, embedder in embedders.items():
        started = time.perf_counter()
        embedder.embed(batch)
        batch_s = time.perf_counter() - started
        report[name] = {
            **_load(name),
            "dimension": embedder.dimension,
            "query_median_ms": round(statistics.median(per_query[name]), 3),
            "batch_texts_per_s": round(BATCH / batch_s),
        }
    return report


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
