"""Resolve-refs task: each candidate's entity tied to a stable id, or dropped (ResolutionFailed).

Input: the extract task's output; output: `ItemsPayload`.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from memwrite.extract import ExtractOutput
from memwrite.resolve_stage import resolve_stage
from memwrite.wiring import ResolveStageDeps, build_resolve_deps

logger = Logger(service="memwrite-resolve-refs")


@cache
def deps() -> ResolveStageDeps:
    return build_resolve_deps()


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    current = deps()
    payload = ExtractOutput.model_validate(event)
    return resolve_stage(payload, current.settings.pipeline, current.resolve).model_dump(
        mode="json"
    )
