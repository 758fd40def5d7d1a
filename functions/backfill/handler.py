"""The scheduled backfill (EventBridge Scheduler, off until a model is configured): every user
with a pending episode, through extraction and the remaining stages (`memwrite.backfill`)."""

from __future__ import annotations

from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from memwrite.backfill import BackfillDeps, backfill_pending
from memwrite.wiring import build_backfill_deps

logger = Logger(service="memwrite-backfill")


@cache
def deps() -> BackfillDeps:
    return build_backfill_deps()


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    current = deps()
    results = backfill_pending(current.configs.for_request, current)
    summary: dict[str, Any] = {
        "users": len(results),
        "episodes": sum(r.episodes for r in results),
        "extracted": sum(r.extracted for r in results),
        "still_pending": sum(r.still_pending for r in results),
        "trace_ids": [r.trace_id for r in results if r.trace_id],
    }
    logger.info("backfill done", extra=summary)
    return summary
