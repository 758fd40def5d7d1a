"""Extract task (Step Functions): a batch of one session's queued turns in, candidates out.

Input: `{"turns": [<QueuedTurn>, ...]}` (SQS message bodies of one tenant, user and session).
Output: `ExtractOutput` (ids, the extractor used per turn, the kept candidates). Errors
propagate: `TransientError` subclasses match the state machine's Retry, everything else its
Catch (the DLQ); an error span is written first.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from memwrite.extract import ExtractInput, extract_batch
from memwrite.wiring import StageDeps, build_extract_deps

logger = Logger(service="memwrite-extract")


@cache
def deps() -> StageDeps:
    return build_extract_deps()


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    current = deps()
    task = ExtractInput.model_validate(event)
    logger.append_keys(turn_ids=[turn.turn_id for turn in task.turns])
    # Per tenant: a tenant may turn the verifier on (TenantOverrides.verifier_enabled).
    config = current.settings.for_request(task.turns[0].tenant).extract
    return extract_batch(task.turns, config, current.extract).model_dump(mode="json")
