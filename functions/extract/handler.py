"""Extract task (Step Functions): one queued turn in, its kept candidates out.

Input: `{"turn": <QueuedTurn>}` (the SQS message body). Output: `ExtractedTurn` (ids, the
extractor used, candidates). Errors propagate: `TransientError` subclasses match the state
machine's Retry, everything else its Catch (the DLQ); an error span is written first.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from memwrite.extract import ExtractInput, extract_turn
from memwrite.wiring import StageDeps, build_extract_deps

logger = Logger(service="memwrite-extract")


@cache
def deps() -> StageDeps:
    return build_extract_deps()


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    current = deps()
    task = ExtractInput.model_validate(event)
    logger.append_keys(trace_id=task.turn.trace_id, turn_id=task.turn.turn_id)
    config = current.settings.pipeline.extract
    return extract_turn(task.turn, config, current.extract).model_dump(mode="json")
