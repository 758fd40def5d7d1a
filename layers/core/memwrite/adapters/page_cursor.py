"""The opaque cursor of a user's memories page by page: the last memory id of a page, encoded.

Both memory stores page in memory id order, so the same cursor means the same place in either.
"""

from __future__ import annotations

import base64
import re

from memwrite.errors import InvalidQuery

__all__ = ["decode_cursor", "encode_cursor"]

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
