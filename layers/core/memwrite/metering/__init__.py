"""The usage meter (docs/reference/api.md, `GET /v1/usage`): what each tenant used, by the
UTC hour. `counts` (the counters), `meter` (a tenant's unit of work metered: model calls from
their usage fields, embeddings, turns; the $ per tenant metric), `report` (the route's
answer), `ports` (its `UsageMeter` Protocol, kept out of ports.py; adapters:
adapters/aws/dynamodb_usage, adapters/sqlite/usage)."""

from memwrite.metering.counts import COUNTERS, UsageCounts, hour_key, hour_of
from memwrite.metering.meter import (
    MeteredEmbedder,
    Metering,
    count_usage,
    metering_for,
    record_usage,
)
from memwrite.metering.ports import UsageMeter
from memwrite.metering.report import MAX_RANGE_DAYS, UsageReport, usage_report, usage_window

__all__ = [
    "COUNTERS",
    "MAX_RANGE_DAYS",
    "MeteredEmbedder",
    "Metering",
    "UsageCounts",
    "UsageMeter",
    "UsageReport",
    "count_usage",
    "hour_key",
    "hour_of",
    "metering_for",
    "record_usage",
    "usage_report",
    "usage_window",
]
