"""The embedded mode's cost: the offline pipeline per turn on SQLite vs moto, and `memwrite
serve` under load (requests/s, latency percentiles, memory at start and end).

Offline: the LoCoMo-dev turns as one user per conversation and speaker, posted to the real
pre_filter handler in requests of 10 (one session per LoCoMo session), the queue drained through
every pipeline stage after each request, as `memwrite serve` does; wall time / turns in.

Serve: `memwrite serve` in a subprocess on a fresh data directory; 8 client threads, each on
a keep-alive connection, post 10-turn requests (LoCoMo text, a new session and user per
request, so every request is new work) for the given seconds. Memory is the server's RSS
before the load, after a warm-up (the first quarter of the run: at ~140 requests/s, past the
~1,000 requests that fill the bounded caches, the rate gate's 10,000-entry LRU and pydantic's
string cache), at half and three quarters of the run, and at the end.

Resident partitions: a search-heavy load on the embedded index alone, in a fresh process per
cap: `SEARCHED_USERS` users with one memory each written to an index file, then a kNN search
of each (kNN opens no FTS5 table, so the connection is never reopened and only
`max_resident_partitions` bounds the vector partitions); the process's RSS growth over the
searches, with the default cap and with none.
"""

from __future__ import annotations

import http.client
import json
import multiprocessing
import os
import re
import statistics
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.datasets import LocomoTurn, load_locomo
from tests.serve_process import running_serve

TURNS_PER_REQUEST = 10
CONCURRENCY = 8
API_KEY = "local-dev-key"
DRAIN_WAIT_SECS = 300
SEARCHED_USERS = 3_000


def _requests_of(turns: list[LocomoTurn]) -> list[dict[str, Any]]:
    """Per conversation, speaker and session (dia ids are D<session>:<n>), 10 turns a request."""
    grouped: dict[tuple[str, str, str], list[str]] = {}
    for turn in turns:
        session = turn.dia_id.split(":")[0]
        grouped.setdefault((turn.conversation, turn.speaker, session), []).append(turn.text)
    bodies = []
    for (conversation, speaker, session), texts in grouped.items():
        for start in range(0, len(texts), TURNS_PER_REQUEST):
            chunk = texts[start : start + TURNS_PER_REQUEST]
            bodies.append(
                {
                    "user_id": re.sub(r"[^A-Za-z0-9_-]", "-", f"{conversation}-{speaker}"),
                    "session_id": f"{session}-{start}",
                    "turns": [{"role": "user", "content": text} for text in chunk],
                }
            )
    return bodies


def _offline_ms_per_turn(backend: str, turns: list[LocomoTurn]) -> dict[str, Any]:
    from memwrite_local.runtime.embedded import local_backend
    from memwrite_local.runtime.runner import LocalRunner

    bodies = _requests_of(turns)
    with (
        tempfile.TemporaryDirectory(prefix="memwrite-bench-") as data_dir,
        local_backend(backend, Path(data_dir)),
    ):
        runner = LocalRunner()
        failed = 0
        started = time.perf_counter()
        for body in bodies:
            assert runner.call("POST", "/v1/turns", body).status == 202
            failed += len(runner.drain().failed)
        elapsed = time.perf_counter() - started
    return {
        "turns": len(turns),
        "requests": len(bodies),
        "seconds": round(elapsed, 2),
        "ms_per_turn": round(elapsed / len(turns) * 1000, 2),
        "failed_turns": failed,
    }


def bench_offline(turn_limit: int | None) -> dict[str, Any]:
    turns = load_locomo()[:turn_limit]
    sqlite = _offline_ms_per_turn("sqlite", turns)
    moto = _offline_ms_per_turn("moto", turns)
    return {
        "sqlite": sqlite,
        "moto": moto,
        "moto_over_sqlite": round(moto["ms_per_turn"] / sqlite["ms_per_turn"], 1),
        "goal_ms_per_turn": 4.0,
    }


def _rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text(encoding="utf-8")
    match = re.search(r"^VmRSS:\s+(\d+) kB", status, re.MULTILINE)
    assert match is not None
    return round(int(match.group(1)) / 1024, 1)


@dataclass
class _Load:
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    last_trace: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


def _client(port: int, texts: list[str], worker: int, until: float, load: _Load) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Content-Type": "application/json", "x-api-key": API_KEY}
    sent = 0
    while time.monotonic() < until:
        start = (worker * 7919 + sent * TURNS_PER_REQUEST) % (len(texts) - TURNS_PER_REQUEST)
        body = json.dumps(
            {
                "user_id": f"bench-{worker}-{sent}",
                "session_id": f"s-{worker}-{sent}",
                "turns": [
                    {"role": "user", "content": text}
                    for text in texts[start : start + TURNS_PER_REQUEST]
                ],
            }
        )
        sent += 1
        began = time.perf_counter()
        try:
            connection.request("POST", "/v1/turns", body, headers)
            reply = connection.getresponse()
            payload = json.loads(reply.read())
        except (OSError, http.client.HTTPException, ValueError) as exc:
            with load.lock:
                load.errors.append(repr(exc))
            connection.close()
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            continue
        elapsed = time.perf_counter() - began
        with load.lock:
            if reply.status != 202:
                load.errors.append(f"HTTP {reply.status}")
            else:
                load.latencies.append(elapsed)
                load.last_trace = payload["trace_id"]
    connection.close()


def _get_status(port: int, trace_id: str) -> str:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request("GET", f"/v1/traces/{trace_id}", headers={"x-api-key": API_KEY})
    status = str(json.loads(connection.getresponse().read())["status"])
    connection.close()
    return status


def bench_serve(seconds: float) -> dict[str, Any]:
    texts = [turn.text for turn in load_locomo()]
    with (
        tempfile.TemporaryDirectory(prefix="memwrite-serve-") as data_dir,
        running_serve(Path(data_dir)) as server,
    ):
        port = server.port
        rss_idle = _rss_mb(server.pid)
        load = _Load()
        began = time.monotonic()
        until = began + seconds
        clients = [
            threading.Thread(target=_client, args=(port, texts, worker, until, load))
            for worker in range(CONCURRENCY)
        ]
        for client in clients:
            client.start()
        samples = []  # after the warm-up (the first quarter), then at half and three quarters
        for quarter in (1, 2, 3):
            time.sleep(max(0.0, began + seconds * quarter / 4 - time.monotonic()))
            samples.append(_rss_mb(server.pid))
        rss_warm = samples[0]
        for client in clients:
            client.join()
        elapsed = time.monotonic() - began
        rss_end = _rss_mb(server.pid)
        drain_started = time.monotonic()
        while load.last_trace and time.monotonic() - drain_started < DRAIN_WAIT_SECS:
            if _get_status(port, load.last_trace) == "complete":
                break
            time.sleep(0.5)
        drained_after = time.monotonic() - drain_started
        rss_drained = _rss_mb(server.pid)
    percentiles = statistics.quantiles(load.latencies, n=100)
    return {
        "seconds": round(elapsed, 1),
        "concurrency": CONCURRENCY,
        "turns_per_request": TURNS_PER_REQUEST,
        "requests": len(load.latencies),
        "errors": len(load.errors),
        "error_samples": sorted(set(load.errors))[:5],
        "requests_per_s": round(len(load.latencies) / elapsed, 1),
        "p50_ms": round(percentiles[49] * 1000, 1),
        "p99_ms": round(percentiles[98] * 1000, 1),
        "rss_mb_idle": rss_idle,
        "rss_mb_after_warmup": rss_warm,
        "rss_mb_at_quarters": samples,
        "rss_mb_end": rss_end,
        "rss_end_over_warmup": round(rss_end / rss_warm, 2),
        "pipeline_caught_up_after_s": round(drained_after, 1),
        "rss_mb_after_pipeline_caught_up": rss_drained,
        "goals": {"requests_per_s": 50, "p99_ms": 500, "errors": 0, "rss_end_over_warmup": 1.2},
    }


def _rss_growth_of_searches(max_resident_partitions: int) -> float:
    """In a fresh process: MB of RSS a kNN search of every user adds (see the docstring)."""
    from memwrite.adapters.sqlite.embedded_index import EmbeddedIndex
    from memwrite.claims.candidate import MemoryType, Tier
    from memwrite.embedder import HashingEmbedder
    from memwrite.index import MemoryDoc

    embedder = HashingEmbedder()
    text = "The user lives in Berlin."
    vector = embedder.embed([text])[0]
    with tempfile.TemporaryDirectory() as directory:
        index = EmbeddedIndex(
            f"{directory}/index.sqlite3",
            dimension=embedder.dimension,
            max_resident_partitions=max_resident_partitions,
        )
        users = [f"user-{number}" for number in range(SEARCHED_USERS)]
        for user_id in users:
            index.upsert(
                MemoryDoc(
                    memory_id="home",
                    tenant="t",
                    user_id=user_id,
                    text=text,
                    type=MemoryType.FACT,
                    topic="general",
                    tier=Tier.FACT,
                    confidence=0.9,
                    vector=vector,
                )
            )
        before = _rss_mb(os.getpid())
        for user_id in users:
            assert index.knn("t", user_id, vector, 5)
        grown = _rss_mb(os.getpid()) - before
        index.close()
    return round(grown, 1)


def bench_resident_partitions() -> dict[str, Any]:
    from memwrite.adapters.sqlite.embedded_index import DEFAULT_MAX_RESIDENT_PARTITIONS

    caps = {"default_cap": DEFAULT_MAX_RESIDENT_PARTITIONS, "uncapped": SEARCHED_USERS}
    results: dict[str, Any] = {
        "users_searched": SEARCHED_USERS,
        "default_cap": DEFAULT_MAX_RESIDENT_PARTITIONS,
    }
    for name, cap in caps.items():
        # A fresh process each, so that one run's freed heap does not hide the other's growth
        # (spawned, not forked: faiss's OpenMP threads do not survive a fork).
        spawn = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool:
            results[f"rss_mb_growth_{name}"] = pool.submit(_rss_growth_of_searches, cap).result()
    return results


def run(serve_seconds: float = 60.0, turn_limit: int | None = None) -> dict[str, Any]:
    return {
        "offline_pipeline": bench_offline(turn_limit),
        "serve": bench_serve(serve_seconds),
        "resident_partitions": bench_resident_partitions(),
    }
