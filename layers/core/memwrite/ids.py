"""Content-addressed identifiers (docs/design.md §11).

A turn id is `sha256(tenant | user_id | session_id | role | content | timestamp)` truncated to
128 bits, so the same turn re-sent by a retrying client maps to the same id and is recognised as
a duplicate, while two users of one session, or one user saying the same words again at a later
time, are different turns. The timestamp is the client's, normalised to UTC; a turn sent without
one hashes an empty timestamp (the same words in the same session are then the same turn). The
content hashed is the turn after the policy firewall masked its secrets: an id stored in SQS and
DynamoDB must carry no bits derived from a card number or a key (a bare card number has few
enough possibilities to be brute-forced from its hash).
"""

from __future__ import annotations

import hashlib
import re
import uuid
from datetime import UTC, datetime

__all__ = ["content_hash", "is_id", "new_trace_id", "trace_id_for_key", "turn_id"]

_SEPARATOR = "\x1f"  # unit separator: cannot be confused with text inside a field
_ID_HEX_CHARS = 32  # 128 bits
_ID_SHAPE = re.compile(f"[0-9a-f]{{{_ID_HEX_CHARS}}}")


def content_hash(*parts: str) -> str:
    """128-bit hex digest of the parts, joined unambiguously."""
    joined = _SEPARATOR.join(parts)
    return hashlib.sha256(joined.encode("utf-8")).hexdigest()[:_ID_HEX_CHARS]


def turn_id(
    tenant: str,
    user_id: str,
    session_id: str,
    role: str,
    content: str,
    *,
    timestamp: datetime | None,
) -> str:
    """Content-addressed turn id; `content` must already be firewall-masked.

    `timestamp` is the one the client sent (None without one): the same instant written in
    another offset is the same turn.
    """
    when = timestamp.astimezone(UTC).isoformat() if timestamp is not None else ""
    return content_hash(tenant, user_id, session_id, role, content, when)


def trace_id_for_key(tenant: str, idempotency_key: str) -> str:
    """Trace id of a request that carries an `Idempotency-Key`: a retry reuses the trace."""
    return content_hash("trace", tenant, idempotency_key)


def new_trace_id() -> str:
    """Fresh trace id for a request without an idempotency key."""
    return uuid.uuid4().hex


def is_id(value: str) -> bool:
    """True for the shape of every id this module makes (trace, turn, memory): 32 lowercase
    hex digits. Anything else names nothing, and must not become a store key."""
    return _ID_SHAPE.fullmatch(value) is not None
