"""CloudWatch metrics as EMF log lines (Powertools), one metric per stage, outcome and reason.

Dimensions are the stage, the outcome and the reason's *type* only: never a value that could
carry turn content.
"""

from __future__ import annotations

from aws_lambda_powertools.metrics import MetricUnit, single_metric
from aws_lambda_powertools.metrics.functions import is_metrics_disabled

from memwrite.reasons import Reason

__all__ = ["NAMESPACE", "EmfMetrics"]

NAMESPACE = "memwrite"


class EmfMetrics:
    def __init__(self, namespace: str = NAMESPACE) -> None:
        self._namespace = namespace

    def count(self, stage: str, outcome: str, reason: Reason | None, value: int = 1) -> None:
        # single_metric prints regardless; honour Powertools' own switch as flush_metrics does.
        if is_metrics_disabled():
            return
        dimensions = {
            "Stage": stage,
            "Outcome": outcome,
            "Reason": reason.type if reason else "none",
        }
        with single_metric(
            name="items",
            unit=MetricUnit.Count,
            value=value,
            namespace=self._namespace,
            default_dimensions=dimensions,
        ):
            pass

    def event(self, stage: str, name: str) -> None:
        if is_metrics_disabled():
            return
        with single_metric(
            name=name,
            unit=MetricUnit.Count,
            value=1,
            namespace=self._namespace,
            default_dimensions={"Stage": stage},
        ):
            pass

    def timing(self, stage: str, latency_ms: float) -> None:
        if is_metrics_disabled():
            return
        with single_metric(
            name="latency",
            unit=MetricUnit.Milliseconds,
            value=latency_ms,
            namespace=self._namespace,
            default_dimensions={"Stage": stage},
        ):
            pass
