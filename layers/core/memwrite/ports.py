"""Ports: what the library needs from the outside world, in domain terms.

Adapters in `memwrite.adapters` implement these against DynamoDB, SQS and CloudWatch (and the
local runner's in-memory stand-ins); nothing above an adapter imports boto3.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from memwrite.models import QueuedTurn, StageSpan
from memwrite.reasons import Reason

__all__ = [
    "EnqueueResult",
    "MetricsSink",
    "RateStore",
    "SessionLog",
    "SpanStore",
    "TraceRecord",
    "TurnLedger",
    "TurnQueue",
]


class RateStore(Protocol):
    def claim(self, key: str, claimant: str, now: float, window_secs: int) -> bool:
        """Claim `key` for `window_secs`; False when another claimant holds it unexpired.

        The same claimant (the same turn id, re-sent by a retrying client) may claim again.
        """


@dataclass(frozen=True)
class EnqueueResult:
    """Per-turn outcome of a batch send: ids that made it, and errors for those that did not."""

    sent: frozenset[str]
    failed: dict[str, str]


class TurnQueue(Protocol):
    def enqueue(self, turns: Sequence[QueuedTurn]) -> EnqueueResult: ...


@dataclass(frozen=True)
class TraceRecord:
    trace_id: str
    tenant: str
    user_id: str
    session_id: str
    created_at: str
    turn_ids: tuple[str, ...]


class TurnLedger(Protocol):
    def already_enqueued(self, tenant: str, turn_ids: Sequence[str]) -> set[str]:
        """The subset of `turn_ids` recorded as enqueued earlier."""

    def record_enqueued(self, tenant: str, trace_id: str, turn_ids: Sequence[str]) -> set[str]:
        """Record turns as enqueued (INSERT-if-absent); returns the ids someone recorded first."""

    def put_trace(self, trace: TraceRecord) -> None: ...

    def get_trace(self, tenant: str, trace_id: str) -> TraceRecord | None: ...

    def memories_of_trace(self, tenant: str, trace_id: str) -> list[tuple[str, str]]:
        """(memory id, outcome: stored | merged) for every write this trace made."""

    def last_question(self, tenant: str, user_id: str, session_id: str) -> str | None:
        """The question (masked) that the session's latest request ended with, if any."""

    def set_last_question(
        self, tenant: str, user_id: str, session_id: str, question: str | None
    ) -> None:
        """Record what `last_question` answers next (None: the request ended otherwise)."""


class SpanStore(Protocol):
    def put_spans(self, spans: Sequence[StageSpan]) -> None: ...

    def spans_of(self, tenant: str, trace_id: str) -> list[StageSpan]: ...


class SessionLog(Protocol):
    """The (redacted) turns of a session that reached extraction: context for the LLM."""

    def recent(self, tenant: str, session_id: str, before: str, limit: int) -> list[QueuedTurn]:
        """Up to `limit` turns observed before the sort key `before`, oldest first."""

    def append(self, turn: QueuedTurn) -> None: ...


class MetricsSink(Protocol):
    def count(self, stage: str, outcome: str, reason: Reason | None, value: int = 1) -> None:
        """Count items leaving `stage` with `outcome`, dimensioned by the reason's type."""

    def event(self, stage: str, name: str, value: int = 1) -> None:
        """Count `value` named events of a stage, e.g. `extraction_json_fail`."""

    def by_rule(self, stage: str, name: str, rule: str, value: int = 1) -> None:
        """Count named events of a stage by the rule behind them (`prefilter.rejected`); `rule`
        is a rule or reason name, never turn content."""

    def timing(self, stage: str, latency_ms: float) -> None: ...
