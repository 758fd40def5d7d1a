"""The scheduled expiry sweep (EventBridge Scheduler, every few minutes; `memwrite serve`'s
worker and `memwrite expire` locally): each user expiry that has passed gets its
`memory.expired` row (`memwrite.expiry`). Cheap when nothing is due: one index query per shard.

Invoked asynchronously by the api function with `{"topic_sweep": {tenant, topics}}` (a settings
change that excludes a topic), it runs that sweep instead (`memwrite.edit.topic_sweep`)."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from memwrite.edit.topic_sweep import (
    TOPIC_SWEEP_EVENT,
    TopicSweep,
    TopicSweepDeps,
    sweep_topics,
)
from memwrite.expiry import (
    DOCUMENTS_PER_CALL,
    ExpiryDeps,
    remove_expired_documents,
    sweep_expiries,
)
from memwrite.tenants import TenantConfigs
from memwrite.wiring import build_expiry_deps, build_topic_sweep_deps

logger = Logger(service="memwrite-expire")
# Another sweep only while this much of the invocation is left (a sweep commits up to 100).
_RESERVE_MS = 20_000


@cache
def deps() -> ExpiryDeps:
    return build_expiry_deps()


@cache
def sweep_deps() -> tuple[TenantConfigs, TopicSweepDeps]:
    return build_topic_sweep_deps()


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    if TOPIC_SWEEP_EVENT in event:
        sweep = TopicSweep.model_validate(event[TOPIC_SWEEP_EVENT])
        configs, sweeping = sweep_deps()
        return sweep_topics(sweep, configs.for_request(sweep.tenant), sweeping).model_dump()
    summary = {"announced": 0, "conflicts": 0, "stale": 0}
    while True:
        report = sweep_expiries(datetime.now(UTC), deps())
        summary["announced"] += len(report.announced)
        summary["conflicts"] += report.conflicts
        summary["stale"] += report.stale
        # A full sweep that announced something may have left more due; one that only met
        # stale entries (the index lagging the store) would find them again: stop.
        if not (report.more and report.announced) or (
            context.get_remaining_time_in_millis() < _RESERVE_MS
        ):
            break
    # Documents past their expiry that no outbox row removes (episodes deleted by TTL).
    summary["documents_removed"] = 0
    while context.get_remaining_time_in_millis() >= _RESERVE_MS:
        removed = remove_expired_documents(datetime.now(UTC), deps())
        summary["documents_removed"] += removed
        if removed < DOCUMENTS_PER_CALL:
            break
    if any(summary.values()):
        logger.info("expiry sweep done", extra=summary)
    return summary
