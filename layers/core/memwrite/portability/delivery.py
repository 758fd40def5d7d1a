"""How an export reaches its caller (`GET /v1/users/{user_id}/export`): inline, or, when it
would not fit one Lambda response and the environment has an exports bucket, stored there
and answered with a short-lived URL to it.

A Lambda answer is buffered and holds at most 6 MB, counted as the proxy response's JSON:
the body is measured as that JSON string (escaped quotes and newlines, non-ASCII as six-
character `\\u` escapes), and `INLINE_EXPORT_LIMIT` leaves room for the rest of the envelope.
`memwrite serve` has no such limit and no bucket: it always answers inline.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from memwrite.portability.transfer import export_lines
from memwrite.records.user_snapshot import SpilledExport

if TYPE_CHECKING:
    from memwrite.ports import ExportSpill, UserPortability

__all__ = ["INLINE_EXPORT_LIMIT", "SpilledExportView", "deliver_export"]

INLINE_EXPORT_LIMIT = 5 * 1024 * 1024  # bytes of the encoded body; Lambda's limit is 6 MB


class SpilledExportView(BaseModel):
    """The body of a `303 See Other` export answer (`Location` holds the same URL)."""

    url: str = Field(description="Where the JSON lines are: a presigned GET URL, no API key.")
    bytes: int = Field(description="The export's size in bytes.")
    expires_in: int = Field(description="Seconds the URL stays valid.")

    @classmethod
    def of(cls, spilled: SpilledExport) -> SpilledExportView:
        return cls(url=spilled.url, bytes=spilled.size, expires_in=spilled.expires_in)


def deliver_export(
    tenant: str, user_id: str, store: UserPortability, spill: ExportSpill | None
) -> str | SpilledExport:
    """The user's export (`export_lines`, joined), or, when its encoded body is over
    `INLINE_EXPORT_LIMIT` and there is a `spill`, the same bytes stored there."""
    body = "".join(export_lines(tenant, user_id, store))
    if spill is None or len(json.dumps(body)) <= INLINE_EXPORT_LIMIT:
        return body
    return spill.put(tenant, user_id, body.encode())
