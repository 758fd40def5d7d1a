"""`DELETE /v1/users/{user_id}/memories`: erase a user everywhere, the store's items and the
index's documents, and announce it on the change feed."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel

from memwrite.ports import MemoryIndex, UserEraser

__all__ = ["EraseDeps", "ErasureReport", "erase_user"]


class ErasureReport(BaseModel):
    """`DELETE /v1/users/{user_id}/memories`: how many items of each kind were removed."""

    user_id: str
    erased: bool
    removed: dict[str, int]


@dataclass
class EraseDeps:
    eraser: UserEraser  # the store's items, then the announcement
    index: MemoryIndex


def erase_user(tenant: str, user_id: str, deps: EraseDeps) -> dict[str, Any]:
    """Remove every trace of the user: the store's items, then the index (last, so that a
    HyPE job racing the erasure cannot leave a document behind once this returns), then
    announce it: an outbox row from which stage 7 sends `user.erased` (every erasure, a repeat
    too: a client retrying after a failure here gets its event all the same)."""
    erasure = deps.eraser.erase_user(tenant, user_id)
    removed = {**erasure.removed, "index_documents": deps.index.delete_user(tenant, user_id)}
    deps.eraser.announce(tenant, user_id, datetime.now(UTC))
    return {"user_id": user_id, "erased": True, "removed": removed}
