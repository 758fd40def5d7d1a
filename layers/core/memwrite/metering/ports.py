"""The usage meter's storage port: a tenant's counters by the hour, added to atomically.

Kept out of `memwrite/ports.py` (a capability keeps its Protocol in its own package). A store
only adds to an hour's counters and sums a range of hours: on DynamoDB an `ADD` update per
unit of work and one query per report (never a scan); in SQLite an upsert and a `SUM`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from memwrite.metering.counts import UsageCounts

__all__ = ["UsageMeter"]


class UsageMeter(Protocol):
    """Every tenant's usage counters (DynamoDB on AWS, the SQLite file locally)."""

    def add(self, tenant: str, hour: datetime, counts: UsageCounts) -> None:
        """Add `counts` to the tenant's counters of the UTC hour `hour` falls in, atomically:
        concurrent adds all count. Raises a `TransientError` when the store is unavailable."""
        ...

    def read(self, tenant: str, start: datetime, end: datetime) -> UsageCounts:
        """The sum of the tenant's counters of the hours starting in [start, end) (whole UTC
        hours); zero when there are none."""
        ...
