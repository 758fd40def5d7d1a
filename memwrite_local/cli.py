"""`memwrite` command line: prefilter, extract, ingest, demo, serve."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from memwrite.config import load_settings
from memwrite.errors import MemwriteError
from memwrite.ids import content_hash
from memwrite.models import Decision, PrefilterDecision, Role
from memwrite.prefilter import mask_secrets, prefilter_turn
from memwrite.rate_gate import RateGate
from memwrite_local.backend import LOCAL_API_KEY
from memwrite_local.embedded import BACKENDS, DEFAULT_DATA_DIR
from memwrite_local.funnel import render_funnel

if TYPE_CHECKING:
    from memwrite.memory import MemoryUnit
    from memwrite.prompts.extract import BatchTurn

__all__ = ["main"]

DEFAULT_CONVERSATION = Path("events/conversations/onboarding.json")


def _emit(out: TextIO, payload: dict[str, Any]) -> None:
    out.write(json.dumps(payload, ensure_ascii=False) + "\n")
    out.flush()


def run_prefilter(stdin: TextIO, stdout: TextIO, stderr: TextIO) -> int:
    """One JSON line in (`{"role", "content"}`), one decision line out, same order."""
    config = load_settings().pipeline.prefilter
    gate = RateGate(config.rate_map_max_entries)
    status = 0
    for number, line in enumerate(stdin, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            role = Role(record["role"])
            content = record["content"]
            if not isinstance(content, str):
                raise TypeError("content must be a string")
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            stderr.write(f'line {number}: invalid input ({exc}); expected {{"role", "content"}}\n')
            _emit(stdout, {"decision": "error", "reason": None, "text": None})
            status = 1
            continue
        decision: PrefilterDecision = prefilter_turn(
            content=content,
            role=role,
            config=config,
            rate_gate=gate,
            rate_scope="cli",
            claimant=mask_secrets(content),
            now=time.time(),
        )
        _emit(
            stdout,
            {
                "decision": decision.decision.value,
                "reason": decision.reason.model_dump(mode="json") if decision.reason else None,
                "text": decision.text if decision.decision is Decision.PASS else None,
            },
        )
    return status


EXTRACT_BATCH_TURNS = 10  # as many turns as one SQS batch carries to the extract stage


def _read_extract_line(line: str, number: int) -> BatchTurn:
    from memwrite.prompts.extract import BatchTurn

    record = json.loads(line)
    if not isinstance(record, dict) or not isinstance(record.get("content"), str):
        raise ValueError('expected {"role", "content", "timestamp"?}')
    timestamp = record.get("timestamp") or datetime.now(UTC).isoformat()
    # The pipeline extracts from firewall-masked text; so does this command.
    content = mask_secrets(record["content"])
    return BatchTurn(
        turn_id=content_hash("cli", str(number), content),
        role=Role(record["role"]),
        text=content,
        timestamp=datetime.fromisoformat(timestamp),
    )


def run_extract(stdin: TextIO, stdout: TextIO, stderr: TextIO) -> int:
    """JSON lines `{"role", "content", "timestamp"?}` in; `{"candidates", "extractor"}` out.

    Lines are extracted in batches of ten, as the pipeline does, with the earlier lines as the
    session context; every input line gets exactly one output line, in order.
    """
    from memwrite.extract import extract_candidates
    from memwrite.prompts.extract import BatchTurn, SessionTurn
    from memwrite.wiring import build_llm

    settings = load_settings()
    config = settings.pipeline.extract
    llm = build_llm(config, os.environ.get("ANTHROPIC_API_KEY"))
    lines = [line for line in stdin if line.strip()]
    parsed: list[BatchTurn | str] = []
    for number, line in enumerate(lines, start=1):
        try:
            parsed.append(_read_extract_line(line, number))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            parsed.append(f"line {number}: invalid input ({exc})")
    valid = [turn for turn in parsed if isinstance(turn, BatchTurn)]
    results: dict[str, dict[str, Any]] = {}
    for start in range(0, len(valid), EXTRACT_BATCH_TURNS):
        batch = valid[start : start + EXTRACT_BATCH_TURNS]
        context = [
            SessionTurn(role=t.role, text=t.text, timestamp=t.timestamp)
            for t in valid[max(0, start - config.max_source_turns) : start]
        ]
        extraction = extract_candidates(batch, context, config, llm, on_json_fail=lambda: None)
        for turn in extraction.turns:
            results[turn.turn_id] = {
                "candidates": [c.model_dump(mode="json") for c in turn.candidates],
                "extractor": turn.extractor.value,
            }
    status = 0
    for item in parsed:
        if isinstance(item, str):
            stderr.write(item + "\n")
            _emit(stdout, {"candidates": [], "extractor": None, "error": item})
            status = 1
        else:
            _emit(stdout, results[item.turn_id])
    return status


def _memory_json(memory: MemoryUnit) -> dict[str, Any]:
    return memory.model_dump(
        mode="json",
        include={
            "memory_id",
            "type",
            "text",
            "entity",
            "attribute",
            "value",
            "tier",
            "confidence",
            "observed_at",
            "valid_until",
            "superseded_by",
            "links",
            "negated",
            "corroboration",
        },
    )


def _render_memories(memories: list[MemoryUnit]) -> str:
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


def _load_conversation(path: Path) -> dict[str, Any]:
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


def run_ingest(
    path: Path, as_json: bool, backend: str, data_dir: Path | None, stdout: TextIO
) -> int:
    """The whole local pipeline (fresh state unless `data_dir`); print funnel and memories."""
    from memwrite_local.pipeline import IngestFailed, run_conversation

    conversation = _load_conversation(path)
    try:
        run = run_conversation(conversation, backend, data_dir)
    except IngestFailed as exc:
        stdout.write(json.dumps({"error": exc.body, "status": exc.status}) + "\n")
        return 1
    if as_json:
        payload = {
            "funnel": run.funnel.model_dump(mode="json"),
            "memories": [_memory_json(memory) for memory in run.memories],
            "llm_calls": run.trace["llm_calls"],
            "cost_usd": run.trace["cost_usd"],
        }
        if run.failed:
            payload["failed"] = run.failed
        stdout.write(json.dumps(payload, ensure_ascii=False) + "\n")
    else:
        stdout.write(render_funnel(run.funnel) + "\n\nmemories\n")
        stdout.write(_render_memories(run.memories) + "\n")
    return 1 if run.failed else 0


def run_demo(path: Path, backend: str, stdout: TextIO) -> int:
    from memwrite_local.pipeline import run_conversation

    run = run_conversation(_load_conversation(path), backend)
    llm = "rules, then the LLM" if os.environ.get("ANTHROPIC_API_KEY") else "rule extractor only"
    where = "SQLite, fresh state" if backend == "sqlite" else "moto in-process AWS"
    stdout.write(f"memwrite demo: {path} ({where}; {llm})\n\n")
    stdout.write(render_funnel(run.funnel) + "\n\n")
    trace = run.trace
    stdout.write(
        f"trace {trace['trace_id']}: {trace['status']}, {len(run.spans)} spans, "
        f"{trace['llm_calls']} LLM calls, ${trace['cost_usd']:.4f}\n\nmemories\n"
    )
    stdout.write(_render_memories(run.memories) + "\n")
    for turn_id, error in run.failed.items():
        stdout.write(f"  FAILED turn {turn_id[:12]}: {error}\n")
    return 1 if run.failed else 0


def _stop_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(0)  # unwinds serve_forever: the worker finishes its batch, state is kept


def run_serve(port: int, backend: str, data_dir: Path, stdout: TextIO) -> int:
    from memwrite_local.embedded import local_backend
    from memwrite_local.runner import LocalRunner
    from memwrite_local.serve import make_server

    with local_backend(backend, data_dir) as local:
        server = make_server(
            LocalRunner(),
            port,
            max_body_bytes=load_settings().pipeline.ingest.max_body_bytes,
            serialize_pipeline=backend == "moto",
        )
        host, bound = str(server.server_address[0]), int(server.server_address[1])
        keys = LOCAL_API_KEY if local.uses_default_api_key else "a configured key"
        stdout.write(
            f"memwrite API on http://{host}:{bound} (x-api-key: {keys}; {local.description})\n"
        )
        stdout.flush()
        signal.signal(signal.SIGTERM, _stop_on_sigterm)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memwrite", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser(
        "prefilter", help="JSON lines {role, content} on stdin -> one decision line each"
    )
    commands.add_parser(
        "extract",
        help="JSON lines {role, content, timestamp?} on stdin -> {candidates, extractor} each",
    )
    demo = commands.add_parser("demo", help="run a sample conversation and print the funnel")
    demo.add_argument("conversation", nargs="?", type=Path, default=DEFAULT_CONVERSATION)
    ingest = commands.add_parser(
        "ingest", help="run a conversation file through the whole local pipeline"
    )
    ingest.add_argument("file", type=Path)
    ingest.add_argument("--json", action="store_true", help="one JSON object on stdout")
    ingest.add_argument(
        "--data-dir", type=Path, help="keep state in this directory (default: a fresh state)"
    )
    serve = commands.add_parser("serve", help="the HTTP API on 127.0.0.1")
    serve.add_argument("--port", type=int, default=8080)
    serve.add_argument(
        "--data-dir",
        type=Path,
        default=DEFAULT_DATA_DIR,
        help=f"where state persists across restarts (default: {DEFAULT_DATA_DIR}/)",
    )
    for command in (demo, ingest, serve):
        command.add_argument(
            "--backend",
            choices=BACKENDS,
            default="sqlite",
            help="sqlite (embedded, the default) or moto (in-process AWS, state lost at exit)",
        )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "prefilter":
            return run_prefilter(sys.stdin, sys.stdout, sys.stderr)
        if args.command == "extract":
            return run_extract(sys.stdin, sys.stdout, sys.stderr)
        if args.command == "ingest":
            return run_ingest(args.file, args.json, args.backend, args.data_dir, sys.stdout)
        if args.command == "demo":
            return run_demo(args.conversation, args.backend, sys.stdout)
        return run_serve(args.port, args.backend, args.data_dir, sys.stdout)
    except (OSError, ValueError, MemwriteError) as exc:  # ValidationError and JSON errors too
        sys.stderr.write(f"memwrite: {exc}\n")
        return 2


if __name__ == "__main__":
    sys.exit(main())
