"""The scheduled backfill (EventBridge Scheduler, off until a model is configured): every user
with a pending episode, through extraction and the remaining stages (`memwrite.backfill`).
With `pipeline.backfill.mode = batch`, one round of the batch lane instead: the open provider
batches polled (the ended ones applied), then what is pending submitted."""

from __future__ import annotations

from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from memwrite.backfill import BackfillDeps, BatchDeps, backfill_pending, run_batch_round
from memwrite.wiring import build_backfill_deps, build_batch_deps

logger = Logger(service="memwrite-backfill")

# No batch is applied or submitted later than this before the function's timeout: applying
# one user's episodes (the stages, no model wait) takes seconds.
BATCH_RESERVE_SECS = 10.0


@cache
def deps() -> BackfillDeps:
    return build_backfill_deps()


@cache
def batch_deps() -> BatchDeps:
    return build_batch_deps()


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    current = deps()
    if current.configs.settings.pipeline.backfill.mode == "batch":
        lane = batch_deps()
        budget = max(0.0, context.get_remaining_time_in_millis() / 1000 - BATCH_RESERVE_SECS)
        done = run_batch_round(lane.backfill.configs.for_request, lane, budget_secs=budget)
        summary = done.as_json()
        logger.info("batch backfill round done", extra=summary)
        return summary
    results = backfill_pending(current.configs.for_request, current)
    summary = {
        "users": len(results),
        "episodes": sum(r.episodes for r in results),
        "extracted": sum(r.extracted for r in results),
        "still_pending": sum(r.still_pending for r in results),
        "trace_ids": [r.trace_id for r in results if r.trace_id],
    }
    logger.info("backfill done", extra=summary)
    return summary
