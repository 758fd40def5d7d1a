"""CloudWatch metrics as EMF log lines (Powertools), one metric per stage, outcome and reason.

Dimensions are the stage, the outcome, the reason's *type*, a rule's name, a model family
(a key of the price table) and, for the $ per tenant metric alone (`tenant.cost_usd`), the
tenant (the API key's, as configured): never a value that could carry turn content, and few
enough values that the number of custom metrics stays small (one more per tenant).
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_lambda_powertools.metrics import MetricUnit, single_metric
from aws_lambda_powertools.metrics.functions import is_metrics_disabled

from memwrite.costs.pricing import model_family
from memwrite.costs.usage import LlmUsage
from memwrite.reasons import Reason

__all__ = ["NAMESPACE", "EmfMetrics"]

NAMESPACE = "memwrite"


class EmfMetrics:
    def __init__(self, namespace: str = NAMESPACE) -> None:
        self._namespace = namespace
        # single_metric prints regardless; honour Powertools' own switch as flush_metrics
        # does. The environment is the Lambda's, fixed from its cold start (where the sink is
        # built): read once, not for each of the thousands of metrics a batch emits.
        self._disabled = is_metrics_disabled()

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

    def llm_usage(self, stage: str, calls: Sequence[LlmUsage]) -> None:
        by_model: dict[str, list[LlmUsage]] = {}
        for call in calls:
            by_model.setdefault(model_family(call.model), []).append(call)
        for model, used in sorted(by_model.items()):
            dimensions = {"Stage": stage, "Model": model}
            self._emit("llm.calls", len(used), dimensions)
            self._emit("llm.input_tokens", sum(c.input_tokens for c in used), dimensions)
            self._emit("llm.output_tokens", sum(c.output_tokens for c in used), dimensions)
            # Read beside calls: calls flowing while reads stay 0 means the prompt cache is not
            # working (a prefix under the model's minimum; the CacheReadsIdle alarm).
            for name in ("cache_read_input_tokens", "cache_creation_input_tokens"):
                self._emit(f"llm.{name}", sum(getattr(c, name) for c in used), dimensions)
            cost = sum(c.cost_usd for c in used)
            self._emit("llm.cost_usd", cost, dimensions, MetricUnit.NoUnit)

    def tenant_cost(self, tenant: str, cost_usd: float) -> None:
        self._emit("tenant.cost_usd", cost_usd, {"Tenant": tenant}, MetricUnit.NoUnit)

    def _emit(
        self,
        name: str,
        value: float,
        dimensions: dict[str, str],
        unit: MetricUnit = MetricUnit.Count,
    ) -> None:
        if self._disabled:
            return
        with single_metric(
            name=name,
            unit=unit,
            value=value,
            namespace=self._namespace,
            default_dimensions=dimensions,
        ):
            pass
