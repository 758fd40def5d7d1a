"""CloudWatch metrics as EMF log lines (Powertools), one metric per stage, outcome and reason.

Dimensions are the stage, the outcome, the reason's *type* and a rule's name only: never a
value that could carry turn content.
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
        dimensions = {
            "Stage": stage,
            "Outcome": outcome,
            "Reason": reason.type if reason else "none",
        }
        self._emit("items", value, dimensions)

    def event(self, stage: str, name: str, value: int = 1) -> None:
        self._emit(name, value, {"Stage": stage})

    def by_rule(self, stage: str, name: str, rule: str, value: int = 1) -> None:
        self._emit(name, value, {"Stage": stage, "Rule": rule})

    def timing(self, stage: str, latency_ms: float) -> None:
        self._emit("latency", latency_ms, {"Stage": stage}, MetricUnit.Milliseconds)

    def _emit(
        self,
        name: str,
        value: float,
        dimensions: dict[str, str],
        unit: MetricUnit = MetricUnit.Count,
    ) -> None:
        # single_metric prints regardless; honour Powertools' own switch as flush_metrics does.
        if is_metrics_disabled():
            return
        with single_metric(
            name=name,
            unit=unit,
            value=value,
            namespace=self._namespace,
            default_dimensions=dimensions,
        ):
            pass
