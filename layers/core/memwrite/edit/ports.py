"""The ports of the edits (one memory's deletion, the topic sweep): their Protocols live here,
beside the edits that use them (`memwrite/ports.py` holds the stage ports; see
docs/layout.md)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from pydantic import BaseModel

from memwrite.records.episode import Episode
from memwrite.records.store import DeletionCommit

__all__ = ["TOPIC_SWEEP_EVENT", "MemoryDeletion", "TopicSweep", "TopicSweepStore", "TopicSweeps"]

TOPIC_SWEEP_EVENT = "topic_sweep"  # the expire function's event key for a sweep


class TopicSweep(BaseModel):
    """The job: remove what `tenant` has stored under `topics` (`memwrite.edit.topic_sweep`)."""

    tenant: str
    topics: frozenset[str]


class MemoryDeletion(Protocol):
    """Deleting one memory (`DELETE /v1/memories/{memory_id}`) in one transaction.

    The memory store's reads (`MemoryStore`) decide what changes; this applies it, conditioned
    on everything it read."""

    def apply_deletion(self, deletion: DeletionCommit) -> None:
        """Apply atomically: delete `removed` (its counter and outbox rows with it), put
        `changed` and the fact row, write the outbox rows, the announcement and the span; raise
        `WriteConflict` (nothing applied) when the memory or a row moved since it was read."""


class TopicSweepStore(Protocol):
    """What the topic sweep (`memwrite.edit.topic_sweep`) reads and removes beyond the
    memories, which leave through `MemoryDeletion`."""

    def users_of(self, tenant: str) -> list[str]:
        """The tenant's users with a memory or an episode stored, sorted."""

    def remove_episodes(self, episodes: Sequence[Episode]) -> int:
        """Delete these episodes, each with an outbox row from which stage 7 takes its
        document out of the index (one transaction per episode); returns how many were still
        there."""


class TopicSweeps(Protocol):
    """Where a topic sweep runs once `PUT /v1/settings` has stored a newly excluded topic."""

    def start(self, sweep: TopicSweep) -> None:
        """Start the sweep: in the background where the deployment has a function for it,
        else now."""
