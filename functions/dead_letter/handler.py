"""The state machine's failure path: an error span per turn of the batch a stage gave up on
(the state machine then sends the batch to the pipeline DLQ)."""

from __future__ import annotations

from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from memwrite.execution.dead_letter import StageFailure, record_stage_failure
from memwrite.wiring import DeadLetterDeps, build_dead_letter_deps

logger = Logger(service="memwrite-dead-letter")


@cache
def deps() -> DeadLetterDeps:
    return build_dead_letter_deps()


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    failure = StageFailure.model_validate(event)
    current = deps()
    written = record_stage_failure(failure, current.spans, current.metrics)
    logger.warning("batch dead-lettered", stage=failure.stage, error=failure.failure.error)
    return {"spans": written}
