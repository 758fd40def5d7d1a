"""The model budget's storage port: bucket records read, then written back only if unchanged.

Kept out of `memwrite/ports.py` (a capability keeps its Protocol in its own package). The
budget's arithmetic is pure (`memwrite.budget.buckets`); a store only reads records and writes
them back all-or-nothing under an optimistic version check, so the SQLite and DynamoDB
adapters are a few lines each and one contract test covers both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = ["BucketRecord", "BudgetStore"]


@dataclass(frozen=True)
class BucketRecord:
    """One shard of one bucket as stored: what is left of each dimension and when.

    `levels` are (requests, input tokens, output tokens) available now; `version` is the
    stored version this record was read at (0: not stored yet, a full bucket). `factor` is the
    AIMD multiplier of the limits (1: the configured limits), `blocked_until` the end of a
    provider's `retry-after`, `decreased_at` the last multiplicative decrease. `line_at` is
    when the line of callers waiting for this bucket next frees: a waiting caller is told to
    come back then, and moves it on by one call (`memwrite.budget.buckets.queue_up`).
    """

    key: str
    levels: tuple[float, float, float]
    updated_at: float
    version: int = 0
    factor: float = 1.0
    blocked_until: float = 0.0
    decreased_at: float = 0.0
    line_at: float = 0.0


class BudgetStore(Protocol):
    """Bucket records shared by every worker (DynamoDB on AWS, the SQLite file locally)."""

    def load(self, keys: Sequence[str]) -> list[BucketRecord | None]:
        """The stored record of each key, in order (None: never stored)."""
        ...

    def save(self, records: Sequence[BucketRecord]) -> bool:
        """Write every record, or none: each only if its stored version is still the
        record's `version` (absent for 0), and stored with `version + 1`. False when another
        worker wrote one of them first (the caller reads again and recomputes)."""
        ...
