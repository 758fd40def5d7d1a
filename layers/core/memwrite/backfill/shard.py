"""A round's users split over several workers (docs/design.md §10): each (tenant, user) hashes
to one of `count` shards, so a backfill round or a batch's apply can run on several workers at
once, every user's episodes on one of them, in order."""

from __future__ import annotations

import zlib
from dataclasses import dataclass

__all__ = ["UserShard", "shard_of"]


@dataclass(frozen=True)
class UserShard:
    """Shard `index` of `count`: the users whose `tenant/user_id` hashes (CRC-32) to it."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if not 0 <= self.index < self.count:
            raise ValueError(f"shard {self.index} of {self.count}: must be from 0 to count - 1")

    def owns(self, tenant: str, user_id: str) -> bool:
        return shard_of(tenant, user_id, self.count) == self.index


def shard_of(tenant: str, user_id: str, count: int) -> int:
    """The shard of `count` a user's work goes to: the same in every process and run."""
    return zlib.crc32(f"{tenant}/{user_id}".encode()) % count
