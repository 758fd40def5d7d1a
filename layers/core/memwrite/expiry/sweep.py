"""One bounded sweep over the memories whose user expiry has passed unannounced.

A memory's expiry that passes later than its last write has no outbox row to report it: the
sweep gives it one. For each due memory (`ExpiryFinder`: an index of the due ones, never a
table scan) it reads the memory again and commits a new rev of it, unchanged but flagged
`expiry_announced` (so it is not due again), with an outbox row, through the store's
conditional `commit`. Stage 7 then takes the memory's document out of the index and sends
`memory.expired`, its event id that row's (a redelivered row keeps it).

A memory no longer due when read (cleared, moved, announced, ended: the finder may lag the
store) is left alone; one changed between the read and the commit (`WriteConflict`) is left for
the next sweep, which finds it again if it is still due. Nothing is ever half-written.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from pydantic import BaseModel

from memwrite.errors import WriteConflict
from memwrite.ports import ExpiryFinder, MemoryIndex, MemoryStore
from memwrite.records.store import Commit, OutboxOp, OutboxRow

__all__ = [
    "DEFAULT_LIMIT",
    "DOCUMENTS_PER_CALL",
    "ExpiryDeps",
    "ExpirySweep",
    "remove_expired_documents",
    "sweep_expiries",
]

_log = logging.getLogger(__name__)

DEFAULT_LIMIT = 100  # memories per sweep: one commit each
DOCUMENTS_PER_CALL = 1_000  # expired documents removed per call: one search, one bulk delete


@dataclass
class ExpiryDeps:
    finder: ExpiryFinder
    store: MemoryStore
    # The search index, for the documents past their expiry that no outbox row removes (an
    # episode's item deleted by DynamoDB TTL); None: nothing to do there (SQLite's outbox does).
    index: MemoryIndex | None = None


class ExpirySweep(BaseModel):
    """What one sweep did."""

    announced: list[str] = []  # memory ids given their `memory.expired` row
    stale: int = 0  # listed as due, no longer due when read
    conflicts: int = 0  # changed meanwhile: left for the next sweep
    more: bool = False  # the sweep took its limit: more may be due


def sweep_expiries(now: datetime, deps: ExpiryDeps, limit: int = DEFAULT_LIMIT) -> ExpirySweep:
    """Announce up to `limit` expiries passed by `now` (aware), earliest first."""
    report = ExpirySweep()
    due = deps.finder.due(now, limit)
    report.more = len(due) >= limit
    for expiry in due:
        found = deps.store.get_memories(expiry.tenant, expiry.user_id, [expiry.memory_id])
        versioned = found.get(expiry.memory_id)
        if versioned is None or (at := versioned.memory.expiry_due) is None or at > now:
            report.stale += 1
            continue
        memory = versioned.memory.model_copy(update={"expiry_announced": True})
        commit = Commit(
            tenant=memory.tenant,
            user_id=memory.user_id,
            trace_id=memory.trace_id,
            memories=[(memory, versioned.rev)],
            # Out of the index; the row's span joins the trace that wrote the memory.
            outbox=[OutboxRow(memory.memory_id, OutboxOp.DELETE, memory.trace_id)],
            from_trace=False,  # no source trace: the rev read guards it (erasure, rollback)
        )
        try:
            deps.store.commit(commit)
        except WriteConflict:
            report.conflicts += 1
            continue
        report.announced.append(memory.memory_id)
    if report.announced or report.conflicts:
        _log.info(
            "expiry sweep: %d announced, %d conflicts, %d stale",
            len(report.announced),
            report.conflicts,
            report.stale,
        )
    return report


def remove_expired_documents(now: datetime, deps: ExpiryDeps) -> int:
    """Take up to `DOCUMENTS_PER_CALL` documents past their `expires_at` out of the index (search
    already never returns them: `IndexFilter.live_at`); how many it removed."""
    if deps.index is None:
        return 0
    return deps.index.delete_expired(now.timestamp(), DOCUMENTS_PER_CALL)
