"""Dispatcher: the turn queue's SQS batch -> pipeline state machine executions (one Map over
per-session extract inputs each), started asynchronously; the messages of an execution that
could not be started go back to the queue."""

from __future__ import annotations

from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import ValidationError

from memwrite.dispatch import dispatch
from memwrite.models import QueuedTurn
from memwrite.ports import PipelineRunner
from memwrite.wiring import build_pipeline_runner

logger = Logger(service="memwrite-dispatch")


@cache
def deps() -> PipelineRunner:
    return build_pipeline_runner()


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    messages: list[tuple[str, QueuedTurn]] = []
    unreadable: list[str] = []
    for record in event["Records"]:
        try:
            messages.append((record["messageId"], QueuedTurn.model_validate_json(record["body"])))
        except ValidationError:
            # Not a turn the ingest API wrote: redelivered until the queue dead-letters it.
            logger.error("unreadable queue message", message_id=record["messageId"])
            unreadable.append(record["messageId"])
    failed = [*unreadable, *dispatch(messages, deps())] if messages else unreadable
    return {"batchItemFailures": [{"itemIdentifier": message_id} for message_id in failed]}
