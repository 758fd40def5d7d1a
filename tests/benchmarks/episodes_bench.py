"""Episodes (docs/episodes.md): what keeping one costs to write, what searching 10k of them
beside 1k memories costs, and how fast a backfill distils them.

- write cost: the DynamoDB transaction of extract's session-log append, with and without the
  episode, captured with botocore's event hooks on the real client against moto: items per
  transaction and the write units DynamoDB charges (2 per started KB per item in a
  transaction), computed from the items' sizes (moto's own figures are not DynamoDB's);
- search: the embedded index's hybrid query of one user with 1k memories and 10k episodes,
  memories only vs both kinds (the two queries `POST /v1/search` makes by default, each with
  its kind's configured fusion), the query embedded too, with WordLlama (the default) and
  hashing in one run; beside it, in the same run, the same queries with BM25 from SQLite
  FTS5's `bm25()` (the index's BM25 before its in-memory postings) and the overlap of the
  two BM25 top 20s;
- backfill: LoCoMo user turns kept offline as episodes (SQLite, the embedded default), then
  backfilled with a recorded model answer through the real `anthropic` client: turns/s.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx2
import numpy as np

from memwrite.adapters.sqlite.embedded_index import EmbeddedIndex, _query_words
from memwrite.adapters.sqlite.lexical_partition import FTS5_TOKENIZE
from memwrite.claims.candidate import MemoryType, Tier
from memwrite.config.settings import PipelineConfig
from memwrite.index import DocKind, IndexFilter, IndexHit, MatchSource, MemoryDoc, fuse_hybrid
from memwrite.model_ports import Embedder
from memwrite.models import QueuedTurn, Role, Source
from memwrite.ports import TraceRecord
from memwrite.read.query import episode_fusion, memory_fusion
from memwrite.records.episode import Episode, preceding_of
from memwrite.wiring.search import offline_embedder
from tests.datasets import load_locomo
from tests.recorded_api import recorded

MEMORIES, EPISODES = 1_000, 10_000
QUERIES = 50
BACKFILL_TURNS = 200
T0 = datetime(2025, 1, 1, tzinfo=UTC)
_KB = 1024
_BASELINE = "baseline_fts"  # the FTS5 table of the baseline's BM25 (`_fts5_bm25`)


def _attribute_size(value: dict[str, Any]) -> int:
    ((kind, raw),) = value.items()
    if kind in ("S", "N"):
        return len(str(raw).encode())
    if kind == "L":
        return 3 + sum(_attribute_size(item) + 1 for item in raw)
    return len(json.dumps(raw).encode())


def _item_size(item: dict[str, Any]) -> int:
    """DynamoDB's item size: attribute names and values, in bytes."""
    return sum(len(name.encode()) + _attribute_size(value) for name, value in item.items())


def _write_units(items: list[dict[str, Any]]) -> int:
    units = 0
    for entry in items:
        ((_, body),) = entry.items()
        size = _item_size(body.get("Item") or body.get("Key") or {})
        units += 2 * max(1, -(-size // _KB))  # transactional: 2 WCU per started KB
    return units


def bench_write_cost() -> dict[str, Any]:
    from memwrite.wiring import build_backfill_deps, build_stage_deps
    from memwrite_local.runtime.aws import LocalAws

    captured: list[list[dict[str, Any]]] = []

    def capture(params: dict[str, Any], **_: Any) -> None:
        captured.append(params["TransactItems"])

    with LocalAws():
        _, extract = build_stage_deps("extract")
        ledger = build_backfill_deps().ledger
        client = extract.session_log._client
        client.meta.events.register("provide-client-params.dynamodb.TransactWriteItems", capture)
        turns = load_locomo()
        at = next(i for i, t in enumerate(turns) if i and len(t.text) > 120)
        text = turns[at].text
        ledger.put_trace(
            TraceRecord("t" * 32, "bench", "u", "s", None, "user_explicit", T0.isoformat(), ())
        )
        turn = QueuedTurn(
            tenant="bench", user_id="u", session_id="s", agent_id=None, trace_id="t" * 32,
            turn_id="a" * 32, role=Role.USER, text=text, observed_at=T0,
            source=Source.USER_EXPLICIT, preceding=preceding_of(turns[at - 1].text),
        )  # fmt: skip
        extract.session_log.append_batch([turn], now=1.8e9, retention_secs=86_400)
        episode = Episode(
            turn=turn.model_copy(update={"turn_id": "b" * 32}),
            deferred_reason={"type": "DeferredNoLLM"},
            expires_at=int(1.8e9) + 30 * 86_400,
        )
        extract.session_log.append_batch([episode.turn], 1.8e9, 86_400, {episode.turn_id: episode})
    without, with_episode = captured
    return {
        "turn_chars": len(text),
        "preceding_chars": len(turn.preceding or ""),
        "transaction_items_without_episode": len(without),
        "transaction_items_with_episode": len(with_episode),
        "write_units_without_episode": _write_units(without),
        "write_units_with_episode": _write_units(with_episode),
        "episode_item_bytes": _item_size(with_episode[2]["Put"]["Item"]),
        "note": "one TransactWriteItems per kept turn either way; units from item sizes",
    }


def bench_search() -> dict[str, Any]:
    """Both embedders' indexes built first, then their queries alternated, one by one, each
    with the index's BM25 (postings) and with FTS5's (the baseline)."""
    timers = {
        name: _search_timer(offline_embedder(name, None)) for name in ("wordllama", "hashing")
    }
    for timer in timers.values():
        timer(True, False)  # warm: the partitions are built on the first query
    samples: dict[tuple[str, bool, bool], list[float]] = {}
    for both in (False, True):
        for name, timer in timers.items():
            for fts5 in (False, True):
                samples[name, both, fts5] = timer(both, fts5)
    result: dict[str, Any] = {"memories": MEMORIES, "episodes": EPISODES, "queries": QUERIES}
    for name in timers:
        for fts5, label in ((False, name), (True, f"{name}_fts5_bm25")):
            result[label] = {
                "memories_only_median_ms": round(statistics.median(samples[name, False, fts5]), 3),
                "both_kinds_median_ms": round(statistics.median(samples[name, True, fts5]), 3),
                "both_kinds_p90_ms": round(
                    statistics.quantiles(samples[name, True, fts5], n=10)[-1], 3
                ),
            }
    result["bm25_top20_overlap_with_fts5"] = _bm25_overlap()
    return result


def _bm25_overlap() -> dict[str, float]:
    """Mean share of FTS5's BM25 top 20 that the postings' top 20 holds, per filter."""
    index, queries, filters = _bench_index(offline_embedder("hashing", None))
    overlap: dict[str, float] = {}
    for name, filter in filters.items():
        shares = [
            len(
                {hit.memory_id for hit in index.bm25("bench", "u", query, 20, filter=filter)}
                & {hit.memory_id for hit in _fts5_bm25(index, query, 20, filter)}
            )
            / 20
            for query in queries
        ]
        overlap[name] = round(statistics.mean(shares), 4)
    return overlap


def _fts5_filter_sql(filter: IndexFilter | None) -> tuple[str, list[object]]:
    """SQL conditions on `docs d` for a filter (the FTS5 baseline's join)."""
    if filter is None:
        return "", []
    clauses: list[str] = []
    params: list[object] = []
    for column, values in (
        ("type", filter.types),
        ("topic", filter.topics),
        ("tier", filter.tiers),
        ("kind", filter.kinds),
    ):
        if values is not None:
            clauses.append(f"d.{column} IN ({', '.join('?' * len(values))})")
            params.extend(str(value) for value in sorted(values))
    if filter.min_confidence is not None:
        clauses.append("d.confidence >= ?")
        params.append(filter.min_confidence)
    if filter.live_at is not None:
        clauses.append("(d.expires_at IS NULL OR d.expires_at > ?)")
        params.append(filter.live_at)
    return "".join(f" AND {clause}" for clause in clauses), params


def _fts5_bm25(index: EmbeddedIndex, query: str, k: int, filter: IndexFilter) -> list[IndexHit]:
    """The baseline: the user's BM25 top k from SQLite FTS5's `bm25()`, joined to the filter
    fields, as the embedded index queried it before its postings."""
    words = _query_words(query)
    if not words:
        return []
    db = index._db
    fts = _BASELINE
    conditions, params = _fts5_filter_sql(filter)
    rows = db.execute(
        f"SELECT d.memory_id, -bm25({fts}) AS score FROM {fts} "
        f"JOIN docs d ON d.id = {fts}.rowid WHERE {fts} MATCH ?{conditions} "
        "ORDER BY score DESC, d.id LIMIT ?",
        [" OR ".join(f'"{word}"' for word in words), *params, k],
    ).fetchall()
    return [
        IndexHit(memory_id, float(score), frozenset({MatchSource.BM25}))
        for memory_id, score in rows
    ]


def _bench_index(
    embedder: Embedder,
) -> tuple[EmbeddedIndex, list[str], dict[str, IndexFilter]]:
    """One user's index of 1k memories and 10k episodes, the queries, and the two filters."""
    texts = [t.text for t in load_locomo() if t.text.strip()]
    texts = [t for t, v in zip(texts, embedder.embed(texts), strict=True) if np.any(v)]
    index = EmbeddedIndex(dimension=embedder.dimension)
    written: list[tuple[str, str]] = []  # (memory id, text), for the baseline's table
    vectors = embedder.embed([texts[i % len(texts)] for i in range(EPISODES)])
    for i in range(EPISODES):
        # As stage 7 indexes an episode: the end of the turn before, then its own words.
        before = preceding_of(texts[(i - 1) % len(texts)])
        written.append(
            (f"episode:{i:032x}", "\n".join(filter(None, (before, texts[i % len(texts)]))))
        )
        index.upsert(
            MemoryDoc(
                written[-1][0],
                "bench",
                "u",
                written[-1][1],
                MemoryType.EVENT,
                "episode",
                Tier.CANDIDATE,
                0.0,
                vector=vectors[i],
                kind=DocKind.EPISODE,
            )
        )
    for i in range(MEMORIES):
        text = f"The user {texts[(i * 7) % len(texts)][:80]}"
        written.append((f"{i:032x}", text))
        index.upsert(
            MemoryDoc(
                f"{i:032x}",
                "bench",
                "u",
                text,
                MemoryType.FACT,
                "bench",
                Tier.WORKING,
                0.9,
                vector=embedder.embed([text])[0],
            )
        )
    # The baseline's FTS5 table (`_fts5_bm25`): the same texts, by the index's document ids.
    db = index._db
    doc_ids = dict(db.execute("SELECT memory_id, id FROM docs"))
    db.execute(f"CREATE VIRTUAL TABLE {_BASELINE} USING fts5(text, tokenize = '{FTS5_TOKENIZE}')")
    db.executemany(
        f"INSERT INTO {_BASELINE} (rowid, text) VALUES (?, ?)",
        [(doc_ids[memory_id], text) for memory_id, text in written],
    )
    memories = IndexFilter(tiers=frozenset({Tier.WORKING, Tier.FACT}), min_confidence=0.4)
    episodes = IndexFilter(kinds=frozenset({DocKind.EPISODE}))
    queries = [texts[(i * 37) % len(texts)][:60] for i in range(QUERIES)]
    return index, queries, {"memories": memories, "episodes": episodes}


def _search_timer(embedder: Embedder) -> Callable[[bool, bool], list[float]]:
    """An index of one user's memories and episodes, and a timer of its queries (with their
    embedding) in milliseconds: memories only or both kinds, BM25 from the index's postings
    or from FTS5's `bm25()` (the baseline: its hits fused with the same kNN and fusion)."""
    index, queries, filters = _bench_index(embedder)
    config = PipelineConfig()
    searches = [(filters["memories"], memory_fusion(config))]
    searches.append((filters["episodes"], episode_fusion(config)))

    def timed(both: bool, fts5: bool) -> list[float]:
        samples = []
        for query in queries:
            started = time.perf_counter()
            vector = embedder.embed([query])[0]
            for filter, fusion in searches[: 2 if both else 1]:
                if fts5:
                    lexical = _fts5_bm25(index, query, 20, filter)
                    semantic = index.knn("bench", "u", vector, 20, filter=filter)
                    fuse_hybrid(lexical, semantic, 20, fusion)
                else:
                    index.hybrid("bench", "u", query, vector, 20, filter=filter, fusion=fusion)
            samples.append((time.perf_counter() - started) * 1000)
        return samples

    return timed


def bench_backfill() -> dict[str, Any]:
    import functions.api.handler as api_handler
    import functions.backfill.handler as backfill_handler
    import functions.extract.handler as extract_handler
    from memwrite.adapters.anthropic.extractor import AnthropicExtractorClient
    from memwrite.config.settings import ExtractConfig
    from memwrite_local.runtime.backend import LOCAL_API_KEY, LOCAL_TENANT
    from memwrite_local.runtime.embedded import local_backend
    from memwrite_local.runtime.runner import LocalRunner

    turns = [t for t in load_locomo() if len(t.text.split()) >= 6][:BACKFILL_TURNS]
    answer = recorded("extract_valid")
    calls = {"n": 0}

    def handle(request: httpx2.Request) -> httpx2.Response:
        calls["n"] += 1
        return httpx2.Response(200, json=answer)

    with tempfile.TemporaryDirectory(prefix="memwrite-bench-") as data_dir:
        env = {"MEMWRITE_API_KEYS": f"{LOCAL_API_KEY}={LOCAL_TENANT}", "ANTHROPIC_API_KEY": ""}
        with local_backend("sqlite", Path(data_dir), env):
            runner = LocalRunner()
            extract_handler.handler.deps()  # offline: the turns are kept as episodes
            for start in range(0, len(turns), 10):
                body = {
                    "session_id": "bench",
                    "user_id": "u",
                    "turns": [
                        {
                            "role": "user",
                            "content": t.text,
                            "timestamp": (T0 + timedelta(minutes=start + i)).isoformat(),
                        }
                        for i, t in enumerate(turns[start : start + 10])
                    ],
                }
                runner.call("POST", "/v1/turns", body)
            runner.drain()
            kept = runner.call("GET", "/v1/users/u/episodes?limit=100&status=pending").body
            api_handler.deps().backfill().has_model = True  # the route's check
            backfill = backfill_handler.deps()  # the backfill function's run
            backfill.has_model = True
            backfill.stage_deps("extract").llm = AnthropicExtractorClient(
                ExtractConfig(),
                api_key="bench",
                base_url="http://recorded.invalid",
                http_client=httpx2.Client(transport=httpx2.MockTransport(handle)),
                max_retries=0,
            )
            started = time.perf_counter()
            assert runner.call("POST", "/v1/users/u/backfill", {}).status == 202
            result = runner.run_backfill_jobs()[0].as_json()
            elapsed = time.perf_counter() - started
            started = time.perf_counter()
            runner.drain()  # stage 7: index what the backfill stored
            indexed = time.perf_counter() - started
    return {
        "episodes": result["episodes"],
        "first_page_pending": len(kept["episodes"]),
        "extracted": result["extracted"],
        "model_calls": calls["n"],
        "memories": len(result["memory_ids"]),
        "backfill_seconds": round(elapsed, 3),
        "turns_per_second": round(result["episodes"] / elapsed, 2) if elapsed else None,
        "indexing_seconds": round(indexed, 3),
        "note": "recorded answers (no model latency); one call per batch of 10 turns",
    }


def run() -> dict[str, Any]:
    return {
        "write_cost": bench_write_cost(),
        "search_10k_episodes_1k_memories": bench_search(),
        "backfill": bench_backfill(),
    }


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
