"""The port of one memory's deletion: its Protocol lives here, beside the edit that uses it
(`memwrite/ports.py` holds the stage ports; see docs/layout.md)."""

from __future__ import annotations

from typing import Protocol

from memwrite.store import DeletionCommit

__all__ = ["MemoryDeletion"]


class MemoryDeletion(Protocol):
    """Deleting one memory (`DELETE /v1/memories/{memory_id}`) in one transaction.

    The memory store's reads (`MemoryStore`) decide what changes; this applies it, conditioned
    on everything it read."""

    def apply_deletion(self, deletion: DeletionCommit) -> None:
        """Apply atomically: delete `removed` (its counter and outbox rows with it), put
        `changed` and the fact row, write the outbox rows, the announcement and the span; raise
        `WriteConflict` (nothing applied) when the memory or a row moved since it was read."""
