"""The `memwrite demo` command (`make demo`): a sample conversation, then an outage kept as
episodes that a backfill distils.

First part: the sample conversation (`events/conversations/onboarding.json`) through the whole
local pipeline, its funnel, trace and memories (the same run as `memwrite ingest`).

Second part, on SQLite with the sample conversation: the model's answers are recorded
(`events/model_answers/`) and served to the real `anthropic` client over a mock HTTP transport,
as the tests serve theirs: no key, no network. First the model answers 529 to every call (the
turns become pending episodes, and search finds them), then it answers, and `backfill` runs the
episodes through extraction and the remaining stages.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from memwrite_local.cli.ingest import load_conversation, render_memories
from memwrite_local.runtime.funnel import render_funnel

__all__ = ["DEFAULT_CONVERSATION", "OUTAGE_CONVERSATION", "add_demo_parser", "run_demo"]

DEFAULT_CONVERSATION = Path("events/conversations/onboarding.json")
OUTAGE_CONVERSATION = Path("events/conversations/outage.json")
MODEL_ANSWERS = Path("events/model_answers")
_ANSWERS = ("extract_lisbon", "extract_porto")  # one per request, in order
_OVERLOADED = {
    "type": "error",
    "error": {"type": "overloaded_error", "message": "Overloaded"},
}


def add_demo_parser(commands: Any) -> argparse.ArgumentParser:
    """Register `demo` on the CLI's subparsers."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "demo", help="run a sample conversation and print the funnel"
    )
    parser.add_argument("conversation", nargs="?", type=Path, default=DEFAULT_CONVERSATION)
    return parser


def run_demo(path: Path, backend: str, stdout: TextIO) -> int:
    """The conversation's funnel, trace and memories; then, for the sample conversation on
    SQLite, the outage and the backfill."""
    from memwrite_local.runtime.pipeline import run_conversation

    run = run_conversation(load_conversation(path), backend=backend)
    llm = "rules, then the LLM" if os.environ.get("ANTHROPIC_API_KEY") else "rule extractor only"
    where = "SQLite, fresh state" if backend == "sqlite" else "moto in-process AWS"
    stdout.write(f"memwrite demo: {path} ({where}; {llm})\n\n")
    stdout.write(render_funnel(run.funnel) + "\n\n")
    trace = run.trace
    stdout.write(
        f"trace {trace['trace_id']}: {trace['status']}, {len(run.spans)} spans, "
        f"{trace['llm_calls']} LLM calls, ${trace['cost_usd']:.4f}\n\nmemories\n"
    )
    stdout.write(render_memories(run.memories) + "\n")
    for turn_id, error in run.failed.items():
        stdout.write(f"  FAILED turn {turn_id[:12]}: {error}\n")
    if run.failed:
        return 1
    if backend == "sqlite" and path == DEFAULT_CONVERSATION:
        stdout.write("\n")
        return _run_episode_demo(stdout)
    return 0


# The second part: the outage and the backfill.


class _RecordedModel:
    """The Messages API: 529 while `down`, else the recorded answers in order."""

    def __init__(self) -> None:
        self.down = True
        self._answers = [
            json.loads((MODEL_ANSWERS / f"{name}.json").read_text(encoding="utf-8"))
            for name in _ANSWERS
        ]

    def handle(self, request: Any) -> Any:
        import httpx2

        if self.down:
            return httpx2.Response(529, headers={"retry-after-ms": "1"}, json=_OVERLOADED)
        return httpx2.Response(200, json=self._answers.pop(0))

    def client(self) -> Any:
        import httpx2

        from memwrite.adapters.anthropic.extractor import AnthropicExtractorClient
        from memwrite.config.settings import ExtractConfig

        return AnthropicExtractorClient(
            ExtractConfig(),
            api_key="demo-recorded",
            base_url="http://recorded.invalid",
            http_client=httpx2.Client(transport=httpx2.MockTransport(self.handle)),
            max_retries=1,
        )


@contextmanager
def _state() -> Iterator[Any]:
    from memwrite_local.runtime.backend import LOCAL_API_KEY, LOCAL_TENANT
    from memwrite_local.runtime.embedded import local_backend
    from memwrite_local.runtime.runner import LocalRunner

    with tempfile.TemporaryDirectory(prefix="memwrite-demo-") as data_dir:
        own_key = {"MEMWRITE_API_KEYS": f"{LOCAL_API_KEY}={LOCAL_TENANT}", "ANTHROPIC_API_KEY": ""}
        with local_backend("sqlite", Path(data_dir), own_key):
            yield LocalRunner()


def _episode_lines(runner: Any, user_id: str) -> list[str]:
    page = runner.call("GET", f"/v1/users/{user_id}/episodes").body
    return [
        f"  {e['status']:<9} {e['turn_id'][:12]}  {e['deferred_reason']['type']:<20} "
        f'-> {len(e["memory_ids"])} memories  "{e["text"][:48]}..."'
        for e in page["episodes"]
    ]


def _run_episode_demo(stdout: TextIO) -> int:
    """Print the outage, the episodes, a search, the backfill and what it distilled."""
    import functions.api.handler as api_handler
    import functions.backfill.handler as backfill_handler
    import functions.extract.handler as extract_handler

    conversation = json.loads(OUTAGE_CONVERSATION.read_text(encoding="utf-8"))
    user_id = conversation["user_id"]
    model = _RecordedModel()
    with _state() as runner:
        _, extract_deps = extract_handler.handler.deps()
        extract_deps.llm = model.client()
        stdout.write(
            f"episodes: {OUTAGE_CONVERSATION} while the model answers 529 to every call "
            "(recorded answers, real anthropic client)\n"
        )
        for turn in conversation["turns"]:
            body = {**conversation, "turns": [turn]}
            runner.call("POST", "/v1/turns", body)
            runner.drain()
        stdout.write("\n".join(_episode_lines(runner, user_id)) + "\n")
        query = {"user_id": user_id, "query": "which city does sam live in, Porto?", "k": 3}
        hits = runner.call("POST", "/v1/search", query).body["results"]
        stdout.write(f"\nsearch {query['query']!r} during the outage\n")
        for hit in hits:
            stdout.write(f"  {hit['kind']:<8} {hit['score']:.3f}  {hit['text'][:70]}\n")
        model.down = False
        # The route checks that a model is configured; the backfill function runs the job.
        for backfill in (api_handler.deps().backfill(), backfill_handler.deps()):
            backfill.has_model = True
            backfill.stage_deps("extract").llm = model.client()
        # The route hands the backfill over (202); the backfill function's run is the job's.
        runner.call("POST", f"/v1/users/{user_id}/backfill", {})
        (result,) = runner.run_backfill_jobs()
        runner.drain()
        trace = runner.call("GET", f"/v1/traces/{result.trace_id}").body
        stdout.write(
            f"\nthe model is back: backfill trace {result.trace_id}: {result.extracted} of "
            f"{result.episodes} episodes extracted, {len(result.memory_ids)} memories, "
            f"{trace['llm_calls']} LLM calls, ${trace['cost_usd']:.4f}\n"
        )
        stdout.write("\n".join(_episode_lines(runner, user_id)) + "\n")
        hits = runner.call("POST", "/v1/search", query).body["results"]
        stdout.write(f"\nsearch {query['query']!r} after the backfill\n")
        for hit in hits:
            ended = " (superseded)" if hit.get("superseded_by") else ""
            stdout.write(f"  {hit['kind']:<8} {hit['score']:.3f}  {hit['text'][:70]}{ended}\n")
        memories = runner.call("GET", f"/v1/users/{user_id}/memories").body["memories"]
        stdout.write("\nmemories (supersession as if the model had been up all along)\n")
        for memory in memories:
            state = "superseded" if memory["superseded_by"] else "active"
            stdout.write(f"  {state:<10} {memory['text']}\n")
        again = runner.call("POST", f"/v1/users/{user_id}/backfill", {}).body
        pending = 0 if again["trace_id"] is None else len(runner.run_backfill_jobs())
        stdout.write(f"\na second backfill: {pending} pending episodes (a no-op)\n")
    return 0
