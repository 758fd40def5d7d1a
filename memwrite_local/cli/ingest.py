"""The `memwrite ingest FILE` command: one conversation through the whole local pipeline.

The ingest API, every queued batch through the stages, then the funnel and the memories
(`memwrite_local.runtime.pipeline`); fresh state unless `--data-dir`. `--query` searches once
everything is indexed; `--json` prints one JSON object. Exit status 0, or 1 when a turn failed.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from memwrite.records.memory import MemoryUnit
from memwrite_local.cli.search import render_hits
from memwrite_local.runtime.funnel import render_funnel

__all__ = [
    "EPISODE_JSON_FIELDS",
    "MEMORY_JSON_FIELDS",
    "add_ingest_parser",
    "load_conversation",
    "render_episodes",
    "render_memories",
    "run_ingest",
]


def add_ingest_parser(commands: Any) -> argparse.ArgumentParser:
    """Register `ingest` on the CLI's subparsers."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "ingest", help="run a conversation file through the whole local pipeline"
    )
    parser.add_argument("file", type=Path)
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    parser.add_argument(
        "--query",
        action="append",
        default=[],
        help="search the ingested memories (repeatable); results under 'queries'",
    )
    parser.add_argument(
        "--data-dir", type=Path, help="keep state in this directory (default: a fresh state)"
    )
    return parser


# What `ingest --json` prints of each memory (the search API returns these and more).
MEMORY_JSON_FIELDS = frozenset(
    {
        *("memory_id", "type", "text", "entity", "attribute", "value", "tier", "confidence"),
        *("observed_at", "valid_until", "superseded_by", "links", "negated", "corroboration"),
    }
)


# What `ingest --json` prints of each episode (a kept turn; the episodes API returns more).
EPISODE_JSON_FIELDS = frozenset(
    {"turn_id", "text", "observed_at", "status", "deferred_reason", "memory_ids"}
)


def _memory_json(memory: MemoryUnit) -> dict[str, Any]:
    return memory.model_dump(mode="json", include=set(MEMORY_JSON_FIELDS))


def _episode_json(episode: dict[str, Any]) -> dict[str, Any]:
    """An episode of the episodes or search API, as `ingest --json` prints it."""
    return {field: episode[field] for field in sorted(EPISODE_JSON_FIELDS)}


def render_episodes(episodes: list[dict[str, Any]]) -> str:
    """One line per kept turn: its id, status, why it was kept, its words."""
    lines = [
        f"  {e['turn_id'][:8]} {e['status']:<9} {e['deferred_reason']['type']:<20} {e['text']}"
        for e in episodes
    ]
    return "\n".join(lines) or "  (none)"


def render_memories(memories: list[MemoryUnit]) -> str:
    """One line per memory: id, type, triple, confidence, and its tier or what ended it."""
    lines = []
    for memory in memories:
        state = f"superseded by {memory.superseded_by[:8]}" if memory.superseded_by else ""
        state = state or ("retraction" if memory.negated else memory.tier.value)
        triple = f"{memory.entity}.{memory.attribute} = {memory.value}"
        lines.append(
            f"  {memory.memory_id[:8]} [{memory.type.value:<11}] {triple:<40} "
            f"{memory.confidence:.2f} {state}"
        )
    return "\n".join(lines)


def load_conversation(path: Path) -> dict[str, Any]:
    """A JSON object `{user_id, session_id?, turns}`, or JSON lines of turns."""
    text = path.read_text(encoding="utf-8")
    try:
        document = json.loads(text)
    except json.JSONDecodeError:
        document = [json.loads(line) for line in text.splitlines() if line.strip()]
    if isinstance(document, list):
        document = {"turns": document}
    if not isinstance(document, dict):
        raise ValueError(f"{path}: expected a JSON object or JSON lines of turns")
    document.setdefault("user_id", "user")
    document.setdefault("session_id", path.stem or "session")
    return document


def _search_result_json(result: dict[str, Any]) -> dict[str, Any]:
    """A search hit as `ingest --json` prints it: its kind, the memory or episode JSON, plus
    score and matched."""
    if result["kind"] == "episode":
        item = _episode_json(result)
    else:
        item = {field: result[field] for field in sorted(MEMORY_JSON_FIELDS)}
    return {"kind": result["kind"], **item, "score": result["score"], "matched": result["matched"]}


def run_ingest(
    path: Path,
    as_json: bool,
    queries: Sequence[str],
    *,
    backend: str,
    data_dir: Path | None,
    stdout: TextIO,
) -> int:
    """The whole local pipeline (fresh state unless `data_dir`); print the funnel and the
    memories (and, per `--query`, what a search finds once everything is indexed)."""
    from memwrite_local.runtime.pipeline import IngestFailed, run_conversation

    conversation = load_conversation(path)
    try:
        run = run_conversation(conversation, queries, backend=backend, data_dir=data_dir)
    except IngestFailed as exc:
        stdout.write(json.dumps({"error": exc.body, "status": exc.status}) + "\n")
        return 1
    if as_json:
        payload = {
            "funnel": run.funnel.model_dump(mode="json"),
            "memories": [_memory_json(memory) for memory in run.memories],
            "episodes": [_episode_json(episode) for episode in run.episodes],
            "llm_calls": run.trace["llm_calls"],
            "cost_usd": run.trace["cost_usd"],
            "trace_ids": run.trace["trace_ids"],
        }
        if queries:
            payload["queries"] = [
                {"query": query, "results": [_search_result_json(r) for r in results]}
                for query, results in run.searches
            ]
        if run.failed:
            payload["failed"] = run.failed
        stdout.write(json.dumps(payload, ensure_ascii=False) + "\n")
    else:
        stdout.write(render_funnel(run.funnel) + "\n\nmemories\n")
        stdout.write(render_memories(run.memories) + "\n")
        stdout.write("\nepisodes (kept turns, searchable, distilled by `memwrite backfill`)\n")
        stdout.write(render_episodes(run.episodes) + "\n")
        for query, results in run.searches:
            stdout.write(f"\nsearch {query!r}\n")
            stdout.write(render_hits(results) + "\n")
    return 1 if run.failed else 0
