"""The dispatcher between the turn queue and the pipeline state machine.

One SQS batch becomes as few executions as the state size allows, each a Map over per-session
extract inputs (`ExtractInput.batches_of`): one extract task, and so one LLM call, per session
rather than per turn. Executions are started asynchronously (no function waits for a run): once
started, the state machine routes its own failures (error spans, the pipeline DLQ). A start that
fails hands its messages back to SQS, which redelivers them and, after `maxReceiveCount`,
dead-letters them; the stages are idempotent, so a redelivered batch (or Express's
at-least-once start running one twice) changes nothing it already did.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memwrite.models import QueuedTurn
from memwrite.payloads import ExtractInput

if TYPE_CHECKING:
    from memwrite.ports import PipelineRunner

__all__ = [
    "MAX_EXECUTION_INPUT_BYTES",
    "RECEIVE_MAX",
    "PlannedExecution",
    "coalesce_delay",
    "dispatch",
    "held_back",
    "plan_executions",
]

# Step Functions refuses a state over 256 KB. Each Map iteration carries its batch plus the
# stage payload (ids and candidates, a few KB), and the execution input holds every batch:
# half the limit leaves room for both.
MAX_EXECUTION_INPUT_BYTES = 128 * 1024
RECEIVE_MAX = 10  # messages of one receive of a FIFO queue (its event source's batch size)


@dataclass(frozen=True)
class PlannedExecution:
    batches: tuple[ExtractInput, ...]
    message_ids: tuple[str, ...]

    @property
    def name(self) -> str:
        """Deterministic, so a redelivered batch's execution is recognisable in the logs."""
        turn_ids = "|".join(t.turn_id for batch in self.batches for t in batch.turns)
        return hashlib.sha256(turn_ids.encode()).hexdigest()[:40]

    def payload(self) -> str:
        return json.dumps({"batches": [b.model_dump(mode="json") for b in self.batches]})


def _size(batch: ExtractInput) -> int:
    return len(batch.model_dump_json().encode())


def _split(batch: ExtractInput, max_bytes: int) -> list[ExtractInput]:
    """A session batch too large for one execution, as consecutive smaller batches."""
    parts: list[list[QueuedTurn]] = [[]]
    for turn in batch.turns:
        if parts[-1] and _size(ExtractInput(turns=[*parts[-1], turn])) > max_bytes:
            parts.append([])
        parts[-1].append(turn)
    return [ExtractInput(turns=part) for part in parts]


def plan_executions(
    messages: Sequence[tuple[str, QueuedTurn]], max_bytes: int = MAX_EXECUTION_INPUT_BYTES
) -> list[PlannedExecution]:
    """`(message id, turn)` pairs of one SQS batch -> executions under `max_bytes` of input."""
    message_of = {turn.turn_id: message_id for message_id, turn in messages}
    batches = [
        part
        for batch in ExtractInput.batches_of([turn for _, turn in messages])
        for part in _split(batch, max_bytes)
    ]
    planned: list[list[ExtractInput]] = []
    size = 0
    for batch in batches:
        batch_size = _size(batch)
        if not planned or size + batch_size > max_bytes:
            planned.append([])
            size = 0
        planned[-1].append(batch)
        size += batch_size
    return [
        PlannedExecution(
            batches=tuple(group),
            message_ids=tuple(message_of[t.turn_id] for b in group for t in b.turns),
        )
        for group in planned
    ]


def coalesce_delay(turns: Sequence[QueuedTurn], window_s: float, now: float, room: int) -> float:
    """How long a session's batch goes back to the queue to gather the turns its user sends
    next (`extract.coalesce_window_s`, docs/design.md §2), so that one model call reads them
    all: until `window_s` after its earliest accepted turn; 0 (go now) once less than a second
    of that is left, when the batch already fills a receive (`room` turns), or when no turn
    says when it came.

    The queue delivers none of a message group while one of it is hidden, so what the user
    sends meanwhile comes with the held turns in one receive; a turn accepted after the window
    closed goes in the next call. The wait counts towards `model.max_wait_s` (it runs from
    the same `accepted_at`), which the config keeps above the window."""
    accepted = [turn.accepted_at.timestamp() for turn in turns if turn.accepted_at is not None]
    if window_s <= 0 or len(turns) >= room or not accepted:
        return 0.0
    left = min(accepted) + window_s - now
    # SQS hides a message for whole seconds: less than one left is no reason to spend a receive.
    return left if left >= 1 else 0.0


def held_back(
    messages: Sequence[tuple[str, QueuedTurn]], window_s: float, now: float
) -> dict[str, float]:
    """The messages of an SQS batch that go back to the queue to gather their user's next
    turns, each with its delay (`coalesce_delay`); per user, the queue's message group, so a
    user's turns stay in order."""
    by_user: dict[tuple[str, str], list[tuple[str, QueuedTurn]]] = {}
    for message_id, turn in messages:
        by_user.setdefault((turn.tenant, turn.user_id), []).append((message_id, turn))
    held: dict[str, float] = {}
    for group in by_user.values():
        delay = coalesce_delay([turn for _, turn in group], window_s, now, RECEIVE_MAX)
        if delay > 0:
            held.update(dict.fromkeys((message_id for message_id, _ in group), delay))
    return held


def dispatch(messages: Sequence[tuple[str, QueuedTurn]], pipeline: PipelineRunner) -> list[str]:
    """Start the pipeline on one SQS batch; returns the ids of the messages to redeliver."""
    failed: list[str] = []
    for execution in plan_executions(messages):
        if not pipeline.start(execution.name, execution.payload()).started:
            failed.extend(execution.message_ids)
    return failed
