"""`memwrite` command line: prefilter, extract, ingest, demo, serve, search, mcp, trace, replay,
rollback, export, import, backfill, expire, eval, keys."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from memwrite.config import load_settings
from memwrite.errors import MemwriteError
from memwrite.ids import content_hash
from memwrite.memory import MemoryUnit
from memwrite.models import Role
from memwrite.pre_filter.checks import Screening, gate_turn, mask_secrets
from memwrite.pre_filter.rate_gate import RateGate
from memwrite.reasons import SkipReason
from memwrite_local.backend import LOCAL_API_KEY
from memwrite_local.backfill_command import add_backfill_parser, run_backfill
from memwrite_local.embedded import BACKENDS, DEFAULT_DATA_DIR
from memwrite_local.eval_command import add_eval_parser, run_eval
from memwrite_local.expire_command import add_expire_parser, run_expire
from memwrite_local.funnel import render_funnel
from memwrite_local.keys_command import add_keys_parser, run_keys
from memwrite_local.portability_command import add_portability_parsers, run_export, run_import
from memwrite_local.rollback_command import add_rollback_parser, run_rollback
from memwrite_local.trace_command import add_trace_parsers, run_replay, run_trace

if TYPE_CHECKING:
    from memwrite.prompts.extract import BatchTurn

__all__ = ["main"]

DEFAULT_CONVERSATION = Path("events/conversations/onboarding.json")


# One encoder for every line (`json.dumps` with options builds a new one per call).
_ENCODE = json.JSONEncoder(ensure_ascii=False).encode


def _emit(out: TextIO, payload: dict[str, Any]) -> None:
    out.write(_ENCODE(payload) + "\n")
    out.flush()


def _decision_line(screening: Screening, reason: SkipReason | None) -> str:
    """The output line of one decision (the `PrefilterDecision` fields the CLI shows), as
    `_emit` would write it, without building the model. A kept turn's line is a template whose
    only variable parts, the strings, are JSON-encoded (the common case)."""
    if reason is not None or screening.text is None:
        return f'{{"decision": "skip", "reason": {_reason_json(reason)}, "text": null}}\n'
    text = _ENCODE(screening.text)
    if screening.context is None:
        return f'{{"decision": "pass", "reason": null, "text": {text}}}\n'
    context = _ENCODE(screening.context)
    return f'{{"decision": "pass", "reason": null, "text": {text}, "context": {context}}}\n'


@lru_cache(maxsize=256)
def _reason_json(reason: SkipReason | None) -> str:
    """A reason as JSON; reasons are few and frozen, so each is encoded once."""
    return _ENCODE(reason.model_dump(mode="json") if reason else None)


def _line_time(record: dict[str, Any]) -> float | None:
    """The optional `timestamp` of a line (ISO 8601, or seconds since the epoch) as epoch secs."""
    raw = record.get("timestamp")
    if raw is None:
        return None
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        return float(raw)
    if not isinstance(raw, str):
        raise TypeError("timestamp must be an ISO 8601 string or a number")
    parsed = datetime.fromisoformat(raw)
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()


# The roles by value: a dict lookup instead of the enum's call, which costs more than the JSON
# decoding of the line.
_ROLES = {role.value: role for role in Role}


def _line_role(record: dict[str, Any]) -> Role:
    value = record["role"]
    if isinstance(value, str) and value in _ROLES:
        return _ROLES[value]
    return Role(value)  # raises the enum's own error for an unknown role


def _line_session(record: dict[str, Any]) -> str | None:
    session = record.get("session_id")
    if session is not None and not isinstance(session, str):
        raise TypeError("session_id must be a string")
    return session


def run_prefilter(stdin: TextIO, stdout: TextIO, stderr: TextIO) -> int:
    """One JSON line in (`{"role", "content", "session_id"?, "timestamp"?}`), one decision out.

    Consecutive lines with the same `session_id` are one conversation, so a short answer sees
    the question before it (`"context"` in the output); `timestamp` is the rate gate's clock
    for that line. Lines without them are screened alone, at the current time.
    """
    config = load_settings().pipeline.prefilter
    gate = RateGate(config.rate_map_max_entries)
    status = 0
    previous: tuple[str, str] | None = None  # (session id, content) of the last valid line
    for number, line in enumerate(stdin, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            role = _line_role(record)
            content = record["content"]
            if not isinstance(content, str):
                raise TypeError("content must be a string")
            session = _line_session(record)
            at = _line_time(record)
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            stderr.write(f'line {number}: invalid input ({exc}); expected {{"role", "content"}}\n')
            _emit(stdout, {"decision": "error", "reason": None, "text": None})
            status = 1
            continue
        same_conversation = session is not None and previous is not None and previous[0] == session
        screening, reason = gate_turn(
            content=content,
            role=role,
            config=config,
            rate_gate=gate,
            rate_scope="cli",
            # A line of a session is one turn at its time: a repeat later in the replay is new.
            claimant=mask_secrets(content)
            if session is None
            else content_hash(session, str(at), mask_secrets(content)),
            now=time.time() if at is None else at,
            previous=previous[1] if same_conversation and previous else None,
        )
        previous = (session, content) if session is not None else None
        stdout.write(_decision_line(screening, reason))
        stdout.flush()
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
    from memwrite.extract.candidates import extract_candidates
    from memwrite.prompts.extract import BatchTurn, SessionTurn
    from memwrite.wiring import build_llm

    settings = load_settings()
    config = settings.pipeline.extract
    record = os.environ.get("MEMWRITE_LLM_RECORD")
    llm = build_llm(config, os.environ.get("ANTHROPIC_API_KEY"), Path(record) if record else None)
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


# What `ingest --json` prints of each memory (the search API returns these and more).
MEMORY_JSON_FIELDS = frozenset(
    {
        *("memory_id", "type", "text", "entity", "attribute", "value", "tier", "confidence"),
        *("observed_at", "valid_until", "superseded_by", "links", "negated", "corroboration"),
    }
)


def _memory_json(memory: MemoryUnit) -> dict[str, Any]:
    return memory.model_dump(mode="json", include=set(MEMORY_JSON_FIELDS))


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


def _render_hits(results: list[dict[str, Any]]) -> str:
    lines = [
        f"  {hit['score']:.3f} {hit['memory_id'][:8]} {hit['text']}  ({', '.join(hit['matched'])})"
        for hit in results
    ]
    return "\n".join(lines) or "  (nothing found)"


def run_search(
    url: str, api_key: str, request: dict[str, Any], *, as_json: bool, stdout: TextIO
) -> int:
    """`POST /v1/search` against a running `memwrite serve` (or any deployment's URL)."""
    import urllib.error
    import urllib.request

    body = json.dumps(request).encode()
    http_request = urllib.request.Request(
        f"{url.rstrip('/')}/v1/search",
        data=body,
        headers={"Content-Type": "application/json", "x-api-key": api_key},
        method="POST",
    )
    try:
        with urllib.request.urlopen(http_request, timeout=30) as response:
            status, payload = response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        status, payload = exc.code, json.loads(exc.read() or b"{}")
    if status != 200:
        stdout.write(json.dumps({"error": payload, "status": status}) + "\n")
        return 1
    if as_json:
        stdout.write(json.dumps(payload, ensure_ascii=False) + "\n")
    else:
        stdout.write(_render_hits(payload["results"]) + "\n")
    return 0


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


def _search_result_json(result: dict[str, Any]) -> dict[str, Any]:
    """A search hit as `ingest --json` prints it: the memory JSON, plus score and matched."""
    memory = {field: result[field] for field in sorted(MEMORY_JSON_FIELDS)}
    return {**memory, "score": result["score"], "matched": result["matched"]}


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
    from memwrite_local.pipeline import IngestFailed, run_conversation

    conversation = _load_conversation(path)
    try:
        run = run_conversation(conversation, queries, backend=backend, data_dir=data_dir)
    except IngestFailed as exc:
        stdout.write(json.dumps({"error": exc.body, "status": exc.status}) + "\n")
        return 1
    if as_json:
        payload = {
            "funnel": run.funnel.model_dump(mode="json"),
            "memories": [_memory_json(memory) for memory in run.memories],
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
        stdout.write(_render_memories(run.memories) + "\n")
        for query, results in run.searches:
            stdout.write(f"\nsearch {query!r}\n")
            stdout.write(_render_hits(results) + "\n")
    return 1 if run.failed else 0


def run_demo(path: Path, backend: str, stdout: TextIO) -> int:
    from memwrite_local.pipeline import run_conversation

    run = run_conversation(_load_conversation(path), backend=backend)
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
    if run.failed:
        return 1
    if backend == "sqlite" and path == DEFAULT_CONVERSATION:
        from memwrite_local.demo_episodes import run_episode_demo

        stdout.write("\n")
        return run_episode_demo(stdout)
    return 0


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
        "prefilter",
        help="JSON lines {role, content, session_id?, timestamp?} on stdin -> one decision each",
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
        "--query",
        action="append",
        default=[],
        help="search the ingested memories (repeatable); results under 'queries'",
    )
    ingest.add_argument(
        "--data-dir", type=Path, help="keep state in this directory (default: a fresh state)"
    )
    search = commands.add_parser("search", help="search a user's memories on `memwrite serve`")
    search.add_argument("query")
    search.add_argument("--user", required=True)
    search.add_argument("--k", type=int, default=5)
    search.add_argument("--url", default="http://127.0.0.1:8080")
    search.add_argument("--api-key", default=os.environ.get("MEMWRITE_API_KEY", LOCAL_API_KEY))
    search.add_argument("--json", action="store_true", help="the API's JSON on stdout")
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
    mcp = commands.add_parser(
        "mcp",
        help="memwrite as an MCP server (stdio; --http for streamable HTTP): "
        "remember, recall, forget, why",
        add_help=False,
    )
    mcp.add_argument("mcp_args", nargs=argparse.REMAINDER)
    add_trace_parsers(commands)
    add_eval_parser(commands)
    add_rollback_parser(commands)
    add_portability_parsers(commands)
    add_backfill_parser(commands)
    add_expire_parser(commands)
    add_keys_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["mcp"]:  # its own flags (--help included), and the MCP SDK only here
        from memwrite.mcp_server import main as run_mcp

        return run_mcp(arguments[1:])
    args = _parser().parse_args(arguments)
    try:
        if args.command == "prefilter":
            return run_prefilter(sys.stdin, sys.stdout, sys.stderr)
        if args.command == "extract":
            return run_extract(sys.stdin, sys.stdout, sys.stderr)
        if args.command == "ingest":
            return run_ingest(
                args.file,
                args.json,
                args.query,
                backend=args.backend,
                data_dir=args.data_dir,
                stdout=sys.stdout,
            )
        if args.command == "search":
            request = {"user_id": args.user, "query": args.query, "k": args.k}
            return run_search(args.url, args.api_key, request, as_json=args.json, stdout=sys.stdout)
        if args.command == "demo":
            return run_demo(args.conversation, args.backend, sys.stdout)
        if args.command == "eval":
            return run_eval(args, sys.stdout, sys.stderr)
        if args.command == "trace":
            return run_trace(args, sys.stdout)
        if args.command == "replay":
            return run_replay(args, sys.stdout)
        if args.command == "rollback":
            return run_rollback(args, sys.stdout)
        if args.command == "export":
            return run_export(args, sys.stdout)
        if args.command == "import":
            return run_import(args, sys.stdout)
        if args.command == "backfill":
            return run_backfill(args, sys.stdout)
        if args.command == "expire":
            return run_expire(args, sys.stdout)
        if args.command == "keys":
            return run_keys(args, sys.stdout)
        return run_serve(args.port, args.backend, args.data_dir, sys.stdout)
    except (OSError, ValueError, MemwriteError) as exc:  # ValidationError and JSON errors too
        sys.stderr.write(f"memwrite: {exc}\n")
        return 2


if __name__ == "__main__":
    sys.exit(main())
