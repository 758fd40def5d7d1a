"""The `memwrite prefilter` command: stage 1's screening of JSON lines, one decision per line.

`{"role", "content", "session_id"?, "timestamp"?}` in, `{"decision", "reason", "text",
"context"?}` out: the same checks and rate gate as the pipeline's pre-filter, no model, nothing
stored. Exit status 0, or 1 when a line was not valid input (its output line says `"error"`).
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, TextIO

from memwrite.config.settings import load_settings
from memwrite.ids import content_hash
from memwrite.models import Role
from memwrite.pre_filter.checks import Screening, gate_turn, mask_secrets
from memwrite.pre_filter.rate_gate import RateGate
from memwrite.reasons import SkipReason

__all__ = ["add_prefilter_parser", "run_prefilter"]


def add_prefilter_parser(commands: Any) -> argparse.ArgumentParser:
    """Register `prefilter` on the CLI's subparsers."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "prefilter",
        help="JSON lines {role, content, session_id?, timestamp?} on stdin -> one decision each",
    )
    return parser


# One encoder for every line (`json.dumps` with options builds a new one per call).
_ENCODE = json.JSONEncoder(ensure_ascii=False).encode


def _emit(out: TextIO, payload: dict[str, Any]) -> None:
    out.write(_ENCODE(payload) + "\n")
    out.flush()


def _decision_line(screening: Screening, reason: SkipReason | None) -> str:
    """The output line of one decision (the `PreFilterDecision` fields the CLI shows), as
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
    config = load_settings().pipeline.pre_filter
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
