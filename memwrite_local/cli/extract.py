"""The `memwrite extract` command: stage 2's extraction of JSON lines, one result per line.

`{"role", "content", "timestamp"?}` in, `{"candidates", "extractor"}` out: the rules first,
then the configured model when `ANTHROPIC_API_KEY` is set (`MEMWRITE_LLM_RECORD` keeps its
exchanges). Exit status 0, or 1 when a line was not valid input (its output line has `"error"`).
"""

from __future__ import annotations

import argparse
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from memwrite.config.settings import load_settings
from memwrite.ids import content_hash
from memwrite.models import Role
from memwrite.pre_filter.checks import mask_secrets

if TYPE_CHECKING:
    from memwrite.prompts.extract import BatchTurn

__all__ = ["EXTRACT_BATCH_TURNS", "add_extract_parser", "run_extract"]


def add_extract_parser(commands: Any) -> argparse.ArgumentParser:
    """Register `extract` on the CLI's subparsers."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "extract",
        help="JSON lines {role, content, timestamp?} on stdin -> {candidates, extractor} each",
    )
    return parser


def _emit(out: TextIO, payload: dict[str, Any]) -> None:
    out.write(json.dumps(payload, ensure_ascii=False) + "\n")
    out.flush()


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
