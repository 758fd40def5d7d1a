"""The opaque cursors of the list endpoints: the last memory id of a page of a user's memories,
or the sort key of the last trace of a page of a user's traces, encoded.

Both backends page in the same order, so the same cursor means the same place in either.
"""

from __future__ import annotations

import base64
import re
from datetime import UTC, datetime

from memwrite.errors import InvalidQuery

__all__ = [
    "decode_cursor",
    "decode_trace_cursor",
    "encode_cursor",
    "encode_trace_cursor",
    "time_bounds",
    "trace_sort_key",
]

_CURSOR_RE = re.compile(r"[0-9a-f]{16,64}")  # a memory id


def encode_cursor(memory_id: str) -> str:
    return base64.urlsafe_b64encode(memory_id.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> str:
    """The memory id a cursor names; `InvalidQuery` for anything this API did not issue."""
    try:
        memory_id = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidQuery("cursor", "not a cursor this API returned") from exc
    if not _CURSOR_RE.fullmatch(memory_id):
        raise InvalidQuery("cursor", "not a cursor this API returned")
    return memory_id


# A trace's place in its user's list: `created_at#trace_id` (both stores sort on it). Times are
# UTC `isoformat()` strings, which sort in time order ("...:26+00:00" < "...:26.5+00:00").
_TRACE_KEY_RE = re.compile(r"\d{4}-\d\d-\d\dT[0-9:.]+\+00:00#[0-9a-f]{16,64}")


def trace_sort_key(created_at: str, trace_id: str) -> str:
    return f"{created_at}#{trace_id}"


def _utc(at: datetime) -> str:
    """As `created_at` is written; a naive time is taken as UTC, like the API's timestamps."""
    return (at if at.tzinfo else at.replace(tzinfo=UTC)).astimezone(UTC).isoformat()


def time_bounds(since: datetime | None, until: datetime | None) -> tuple[str, str]:
    """[since, until] as sort keys [low, high): every trace created in it sorts between them."""
    low = _utc(since) if since else "0"  # before any year's first digit
    # "$" sorts after "#": a trace created at `until` exactly is still inside.
    high = f"{_utc(until)}$" if until else "~"
    return low, high


def encode_trace_cursor(sort_key: str) -> str:
    return base64.urlsafe_b64encode(sort_key.encode()).decode().rstrip("=")


def decode_trace_cursor(cursor: str) -> str:
    """The trace sort key a cursor names; `InvalidQuery` for anything this API did not issue."""
    try:
        sort_key = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidQuery("cursor", "not a cursor this API returned") from exc
    if not _TRACE_KEY_RE.fullmatch(sort_key):
        raise InvalidQuery("cursor", "not a cursor this API returned")
    return sort_key
