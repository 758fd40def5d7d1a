"""The backfill function. Invoked two ways:

- with one user's job (`memwrite.backfill.BackfillJob`: {tenant, user_id, trace_id}, handed
  over asynchronously by `POST /v1/users/{user_id}/backfill` or by this function's own
  scheduled run): that user's pending episodes, in `observed_at` order, through extraction
  and the remaining stages under the job's trace (`memwrite.backfill.run_job`);
- by the schedule (EventBridge Scheduler, hourly unless the environment turns it off): one
  job handed to this function per user with a pending episode (`start_pending`, bounded per
  run). With `pipeline.backfill.mode = batch`, one round of the batch lane instead: the open
  provider batches polled (the ended ones applied), then what is pending submitted. With no
  model configured, the pending episodes near their expiry are counted instead (a metric the
  `PendingEpisodesNearExpiry` alarm watches, `report_near_expiry`).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from memwrite.backfill import (
    BackfillDeps,
    BackfillJob,
    BackfillStarter,
    BatchDeps,
    report_near_expiry,
    run_batch_round,
    run_job,
    start_pending,
)
from memwrite.wiring import build_backfill_deps, build_backfill_starter, build_batch_deps

logger = Logger(service="memwrite-backfill")

# No batch is applied or submitted later than this before the function's timeout: applying
# one user's episodes (the stages, no model wait) takes seconds.
BATCH_RESERVE_SECS = 10.0
# A job's run starts no extraction batch later than this before the timeout: one batch (an
# extraction call, then the other stages) usually takes a few seconds. What it leaves pending
# the next scheduled run picks up.
JOB_RESERVE_SECS = 10.0


@cache
def deps() -> BackfillDeps:
    return build_backfill_deps()


@cache
def batch_deps() -> BatchDeps:
    return build_batch_deps()


@cache
def starter() -> BackfillStarter:
    return build_backfill_starter()


def _left_secs(context: LambdaContext, reserve: float) -> float:
    return max(0.0, context.get_remaining_time_in_millis() / 1000 - reserve)


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    current = deps()
    if "user_id" in event:
        job = BackfillJob.model_validate(event)
        config = current.configs.for_request(job.tenant)
        result = run_job(job, config, current, budget_secs=_left_secs(context, JOB_RESERVE_SECS))
        summary = result.as_json()
        logger.info("backfill of one user done", extra=summary)
        return summary
    if current.configs.settings.pipeline.backfill.mode == "batch":
        lane = batch_deps()
        if not lane.backfill.has_model:
            return _near_expiry(lane.backfill)
        budget = _left_secs(context, BATCH_RESERVE_SECS)
        done = run_batch_round(lane.backfill.configs.for_request, lane, budget_secs=budget)
        round_summary = done.as_json()
        logger.info("batch backfill round done", extra=round_summary)
        return round_summary
    if not current.has_model:
        return _near_expiry(current)
    jobs = start_pending(current, starter())
    fan_out = {"users": len(jobs), "trace_ids": [job.trace_id for job in jobs]}
    logger.info("backfill handed over per user", extra=fan_out)
    return fan_out


def _near_expiry(backfill: BackfillDeps) -> dict[str, Any]:
    """With no model, nothing to distil: the pending episodes near their expiry are counted
    (the alarm's metric) and, when there are any, logged."""
    near = report_near_expiry(backfill.configs.for_request, backfill).model_dump(mode="json")
    if near["episodes"]:
        logger.warning("pending episodes near expiry and no model to distil them", extra=near)
    return {"near_expiry": near}
