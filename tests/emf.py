"""The EMF lines a Lambda prints, read back as the metrics CloudWatch would make of them."""

from __future__ import annotations

import json
from typing import Any


def emf_metrics(out: str) -> list[dict[str, Any]]:
    """The metric lines Lambda would ship to CloudWatch: one dict per metric and dimension set."""
    metrics = []
    for line in out.splitlines():
        if '"_aws"' not in line:
            continue
        record = json.loads(line)
        for directive in record["_aws"]["CloudWatchMetrics"]:
            dimensions = {name: record[name] for group in directive["Dimensions"] for name in group}
            for metric in directive["Metrics"]:
                value = record[metric["Name"]]
                total = sum(value) if isinstance(value, list) else value
                metrics.append({"name": metric["Name"], "value": total, **dimensions})
    return metrics


def metric_total(metrics: list[dict[str, Any]], name: str, **dimensions: str) -> float:
    """The sum of metric `name` over the lines that carry `dimensions` (a dashboard's Sum)."""
    return sum(
        m["value"]
        for m in metrics
        if m["name"] == name and all(m.get(k) == v for k, v in dimensions.items())
    )
