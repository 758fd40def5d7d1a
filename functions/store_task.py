"""What the store tasks (dedupe, conflict, persist) share: their adapters and handler shape.

Each task takes an `ItemsPayload` (the batch's ids and candidates) and returns it annotated.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from memwrite.config import PipelineConfig
from memwrite.items import ItemsPayload
from memwrite.store_stages import StoreStageDeps
from memwrite.wiring import StoreDeps, build_store_deps

__all__ = ["deps", "handler_for"]

StageFunction = Callable[[ItemsPayload, PipelineConfig, StoreStageDeps], ItemsPayload]
Handler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]


@cache
def deps() -> StoreDeps:
    """Built on the first invocation (cold start) and reused while the instance lives."""
    return build_store_deps()


def handler_for(stage: StageFunction, service: str) -> Handler:
    logger = Logger(service=service)

    @logger.inject_lambda_context(clear_state=True)
    def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        current = deps()
        payload = ItemsPayload.model_validate(event)
        return stage(payload, current.settings.pipeline, current.stage).model_dump(mode="json")

    return lambda_handler
