"""`make bench`: pre-filter cost per turn, ingest cold-import cost, warm handler time, and
extraction cost (rule coverage, LLM calls per turn) on the real conversations, DynamoDB calls
per candidate by store size, the embedded index's query time at 1k/10k/100k memories, search
recall and read-your-writes, and the embedded mode (offline pipeline per turn on SQLite vs
moto, `memwrite serve` under load), episodes (write cost, search beside 10k of them,
backfill throughput), the offline embedders (load time, memory, embedding cost) and dedupe's
cosine band per embedder (precision and recall of merges).

One section alone: `python -m tests.benchmarks.run --only embedded --serve-seconds 10`.

Medians and ratios measured in one run (this machine is shared and noisy): each number is
compared with a baseline measured alongside it (the pre-filter sections alternate their passes
with the baseline's and time CPU). Where the pre-filter's time goes, part by part:
`python -m tests.benchmarks.prefilter_parts`. Results are printed and written to
bench/results.json.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memwrite.config.settings import PreFilterConfig, Settings
from memwrite.models import Role
from memwrite.pre_filter.checks import pre_filter_turn
from memwrite.pre_filter.rate_gate import RateGate
from tests.benchmarks import (
    dedupe_band,
    embedded_bench,
    embedder_bench,
    episodes_bench,
    extract_bench,
    index_bench,
    search_bench,
    store_bench,
)
from tests.datasets import load_locomo

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "bench" / "results.json"
REPEATS = 7
IMPORT_RUNS = 5
HANDLER_CALLS = 300
SECTIONS = (
    "prefilter",
    "prefilter_cli",
    "ingest_imports",
    "warm_handler",
    "extract",
    "store_ops",
    "index",
    "search",
    "embedded",
    "episodes",
    "embedder",
    "dedupe_band",
)


# The floor both pre-filter benchmarks compare with: one combined compiled regex.
COMBINED_REGEX = re.compile(
    r"^(?:hi|hey|hello|thanks|thank you|ok|okay|sure|cool|great|yes|no|lol|haha|bye)\b"
    r"|^(?:can you|could you|please|tell me|what's)\b|^\W+$|```|<tool_call>"
    r"|\b\d{13,19}\b|AKIA[0-9A-Z]{16}|-----BEGIN",
    re.IGNORECASE,
)


def _paired_medians(ours: Callable[[], None], baseline: Callable[[], None]) -> tuple[float, float]:
    """Median CPU seconds of a pass of each, the passes alternated: on a shared machine both
    then see the same load, and CPU time leaves out the time spent waiting for a core."""
    ours_samples, baseline_samples = [], []
    for _ in range(REPEATS):
        for run, samples in ((ours, ours_samples), (baseline, baseline_samples)):
            started = time.process_time()
            run()
            samples.append(time.process_time() - started)
    return statistics.median(ours_samples), statistics.median(baseline_samples)


def bench_prefilter(texts: list[str]) -> dict[str, Any]:
    config = PreFilterConfig()

    def prefilter_all() -> None:
        gate = RateGate(config.rate_map_max_entries)
        for index, text in enumerate(texts):
            pre_filter_turn(
                content=text,
                role=Role.USER,
                config=config,
                rate_gate=gate,
                rate_scope="bench",
                claimant=str(index),
                now=0.0,
            )

    def baseline_all() -> None:
        for text in texts:
            COMBINED_REGEX.search(text)

    prefilter_all()  # warm caches (compiled user patterns, lru)
    ours_s, base_s = _paired_medians(prefilter_all, baseline_all)
    ours, base = ours_s / len(texts) * 1e6, base_s / len(texts) * 1e6
    return {
        "turns": len(texts),
        "prefilter_median_us_per_turn": round(ours, 2),
        "combined_regex_median_us_per_turn": round(base, 3),
        "ratio_to_combined_regex": round(ours / base, 1),
        "goal_us_per_turn": 5.0,
    }


def bench_prefilter_cli(texts: list[str]) -> dict[str, Any]:
    """`memwrite prefilter` against its floor: the same JSON-lines I/O with one combined regex.

    Both read the same lines from memory and write one JSON line per input, so the ratio is
    what the pre-filter itself adds per turn (goal <= 2x)."""
    from memwrite_local.cli.prefilter import run_prefilter

    stdin = "".join(json.dumps({"role": "user", "content": text}) + "\n" for text in texts)

    def ours() -> None:
        run_prefilter(io.StringIO(stdin), io.StringIO(), io.StringIO())

    def floor() -> None:
        out = io.StringIO()
        for line in io.StringIO(stdin):
            record = json.loads(line)
            skip = COMBINED_REGEX.search(record["content"]) is not None
            decision = {"decision": "skip" if skip else "pass", "reason": None}
            out.write(json.dumps({**decision, "text": None if skip else record["content"]}) + "\n")

    ours()
    ours_s, floor_s = _paired_medians(ours, floor)
    ours_us, floor_us = ours_s / len(texts) * 1e6, floor_s / len(texts) * 1e6
    return {
        "turns": len(texts),
        "cli_median_us_per_turn": round(ours_us, 2),
        "floor_median_us_per_turn": round(floor_us, 2),
        "ratio_to_floor": round(ours_us / floor_us, 2),
        "goal_ratio": 2.0,
    }


def _import_seconds(statement: str) -> float:
    code = (
        "import time; started = time.perf_counter(); "
        f"{statement}; print(time.perf_counter() - started)"
    )
    env = {**os.environ, "POWERTOOLS_TRACE_DISABLED": "true"}
    samples = [
        float(
            subprocess.run(
                [sys.executable, "-c", code],
                capture_output=True,
                text=True,
                check=True,
                cwd=ROOT,
                env=env,
            ).stdout
        )
        for _ in range(IMPORT_RUNS)
    ]
    return statistics.median(samples)


def bench_imports() -> dict[str, Any]:
    boto3_s = _import_seconds("import boto3")
    handler_s = _import_seconds("import functions.pre_filter.handler")
    first_call_s = _import_seconds(
        "import functions.pre_filter.handler, boto3; "
        "boto3.client('dynamodb', region_name='us-east-1'); "
        "boto3.client('sqs', region_name='us-east-1')"
    )
    return {
        "import_boto3_median_ms": round(boto3_s * 1000, 1),
        "import_pre_filter_handler_median_ms": round(handler_s * 1000, 1),
        "ratio_handler_to_boto3": round(handler_s / boto3_s, 2),
        "handler_plus_boto3_clients_median_ms": round(first_call_s * 1000, 1),
        "goal_ratio": 1.5,
    }


def bench_warm_handler() -> dict[str, Any]:
    """A 10-turn request through the real handler with in-memory adapters (no AWS calls)."""
    from functions.pre_filter import handler
    from memwrite.adapters.in_memory import (
        CountingMetrics,
        InMemoryQueue,
        InMemorySpanStore,
        InMemoryTurnLedger,
    )
    from memwrite.metering import Metering
    from memwrite.pre_filter.stage import IngestDeps
    from memwrite.tenants import TenantConfigs
    from memwrite.wiring import PreFilterFunctionDeps
    from memwrite_local.runtime.runner import LocalContext, api_gateway_event

    turns = [t.text for t in load_locomo()[:10]]
    settings = Settings(api_keys={"bench-key": "bench"})
    calls = {"n": 0}

    def fresh_deps() -> PreFilterFunctionDeps:
        return PreFilterFunctionDeps(
            settings=settings,
            configs=TenantConfigs(settings),
            ingest=IngestDeps(
                queue=InMemoryQueue(),
                ledger=InMemoryTurnLedger(),
                spans=InMemorySpanStore(),
                metrics=CountingMetrics(),
                rate_gate=RateGate(10_000),
            ),
            metering=Metering(None, CountingMetrics()),  # counted nowhere, as offline
        )

    current = fresh_deps()
    original_deps = handler.http.deps
    handler.http.deps = lambda: current  # type: ignore[assignment]

    def one_request() -> None:
        nonlocal current
        calls["n"] += 1
        current = fresh_deps()  # every request is new work: no duplicates, no rate limiting
        body = json.dumps(
            {
                "session_id": f"s{calls['n']}",
                "user_id": "u1",
                "turns": [{"role": "user", "content": text} for text in turns],
            }
        )
        event = api_gateway_event("POST", "/v1/turns", {"x-api-key": "bench-key"}, body)
        response = handler.lambda_handler(event, LocalContext())
        assert response["statusCode"] == 202, response

    try:
        one_request()
        samples = []
        for _ in range(HANDLER_CALLS):
            started = time.perf_counter()
            one_request()
            samples.append(time.perf_counter() - started)
    finally:
        handler.http.deps = original_deps  # the later benches run the real handler's wiring
    return {
        "turns_per_request": len(turns),
        "warm_handler_median_ms": round(statistics.median(samples) * 1000, 3),
        "warm_handler_p90_ms": round(statistics.quantiles(samples, n=10)[-1] * 1000, 3),
        "calls": HANDLER_CALLS,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--only", choices=SECTIONS, help="run one section (bench/results-NAME.json)"
    )
    parser.add_argument(
        "--serve-seconds", type=float, default=60.0, help="load duration of the serve benchmark"
    )
    parser.add_argument(
        "--offline-turns", type=int, help="LoCoMo turns of the offline pipeline benchmark (all)"
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
    texts = [turn.text for turn in load_locomo()]
    sections: dict[str, Callable[[], Any]] = {
        "prefilter": lambda: bench_prefilter(texts),
        "prefilter_cli": lambda: bench_prefilter_cli(texts),
        "ingest_imports": bench_imports,
        "warm_handler": bench_warm_handler,
        "extract": extract_bench.run,
        "store_ops": store_bench.run,
        "index": index_bench.run,
        "search": search_bench.run,
        "embedded": lambda: embedded_bench.run(args.serve_seconds, args.offline_turns),
        "episodes": episodes_bench.run,
        "embedder": embedder_bench.run,
        "dedupe_band": dedupe_band.run,
    }
    results: dict[str, Any] = {
        "measured_at": datetime.now(UTC).isoformat(),
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus",
    }
    for name, bench in sections.items():
        if args.only in (None, name):
            results[name] = bench()
    out = OUT if args.only is None else OUT.with_name(f"results-{args.only}.json")
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(results, indent=2))
    print(f"written to {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
