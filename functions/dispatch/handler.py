"""Dispatcher: the turn queue's SQS batch -> pipeline state machine executions (one Map over
per-session extract inputs each), started asynchronously; the messages of an execution that
could not be started go back to the queue. With `extract.coalesce_window_s`, a user's turns
still inside the window go back too, hidden until it closes, so that the turns the user sends
meanwhile come with them in one batch (`memwrite.execution.dispatch.held_back`,
docs/design.md §2)."""

from __future__ import annotations

import time
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import ValidationError

from memwrite.execution.dispatch import dispatch, held_back
from memwrite.models import QueuedTurn
from memwrite.ports import Delivery
from memwrite.wiring import DispatchDeps, build_dispatch_deps

logger = Logger(service="memwrite-dispatch")


@cache
def deps() -> DispatchDeps:
    return build_dispatch_deps()


def _hold(
    held: dict[str, float], records: dict[str, dict[str, Any]], turns: dict[str, QueuedTurn]
) -> None:
    """Hide the held messages for their delay (reported as failures, SQS keeps them)."""
    queue = deps().queue
    assert queue is not None, "built whenever a window is set"
    for message_id, delay in held.items():
        record = records[message_id]
        received = int(record["attributes"]["ApproximateReceiveCount"])
        queue.release([Delivery(turns[message_id], record["receiptHandle"], received)], delay)


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    messages: list[tuple[str, QueuedTurn]] = []
    unreadable: list[str] = []
    records = {record["messageId"]: record for record in event["Records"]}
    for message_id, record in records.items():
        try:
            messages.append((message_id, QueuedTurn.model_validate_json(record["body"])))
        except ValidationError:
            # Not a turn the ingest API wrote: redelivered until the queue dead-letters it.
            logger.error("unreadable queue message", message_id=message_id)
            unreadable.append(message_id)
    held = held_back(messages, deps().coalesce_window_s, time.time())
    if held:
        _hold(held, records, dict(messages))
        logger.info("turns held for their users' next ones", held=len(held))
    ready = [(message_id, turn) for message_id, turn in messages if message_id not in held]
    started = dispatch(ready, deps().pipeline) if ready else []
    failed = [*unreadable, *held, *started]
    return {"batchItemFailures": [{"itemIdentifier": message_id} for message_id in failed]}
