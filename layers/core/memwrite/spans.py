"""Building spans and counting them: one span per item per stage, with its typed reason."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Literal

from memwrite.models import LlmUsageSummary, SpanResult, StageSpan
from memwrite.payloads import ItemsPayload, PipelineItem
from memwrite.ports import MetricsSink, SpanStore
from memwrite.reasons import Reason
from memwrite.usage import LlmUsage

__all__ = ["item_span", "make_span", "record_spans", "unrecorded", "usage_summary"]


def make_span(
    *,
    trace_id: str,
    tenant: str,
    user_id: str,
    stage: str,
    item_id: str,
    result: SpanResult,
    reason: Reason | None = None,
    latency_ms: float = 0.0,
    kind: Literal["turn", "candidate"] = "candidate",
    llm: LlmUsageSummary | None = None,
) -> StageSpan:
    return StageSpan(
        trace_id=trace_id,
        tenant=tenant,
        user_id=user_id,
        stage=stage,
        item_id=item_id,
        result=result,
        reason=reason,
        latency_ms=round(latency_ms, 3),
        at=datetime.now(UTC),
        kind=kind,
        llm=llm,
    )


def item_span(
    payload: ItemsPayload,
    item: PipelineItem,
    stage: str,
    *,
    result: SpanResult,
    reason: Reason | None = None,
    latency_ms: float = 0.0,
    llm: LlmUsageSummary | None = None,
) -> StageSpan:
    """The span of one candidate of a store-stage batch (resolve_refs to persist)."""
    return make_span(
        trace_id=item.trace_id,
        tenant=payload.tenant,
        user_id=payload.user_id,
        stage=stage,
        item_id=item.item_id,
        result=result,
        reason=reason,
        latency_ms=latency_ms,
        llm=llm,
    )


def record_spans(spans: Sequence[StageSpan], store: SpanStore, metrics: MetricsSink) -> None:
    if not spans:
        return
    store.put_spans(spans)
    for span in spans:
        metrics.count(span.stage, span.result.value, span.reason)


def unrecorded(replayed: Sequence[StageSpan], store: SpanStore) -> list[StageSpan]:
    """Of the spans of items a redelivery found already applied, those no delivery recorded.

    The delivery that applied an item recorded what it decided then ("new, supersedes the
    Berlin memory"); the redelivery sees only its own write ("duplicate of itself") and must
    not overwrite that. It records a span only where the first delivery died before its own.
    """
    if not replayed:
        return []
    traces = {(span.tenant, span.trace_id) for span in replayed}
    recorded = {(span.stage, span.item_id) for trace in traces for span in store.spans_of(*trace)}
    return [span for span in replayed if (span.stage, span.item_id) not in recorded]


def usage_summary(calls: Sequence[LlmUsage]) -> LlmUsageSummary | None:
    """What a stage's model calls cost, for the span that carries it (None: no call)."""
    if not calls:
        return None
    return LlmUsageSummary(
        calls=len(calls),
        input_tokens=sum(c.input_tokens for c in calls),
        output_tokens=sum(c.output_tokens for c in calls),
        cost_usd=round(sum(c.cost_usd for c in calls), 8),
        models=tuple(sorted({c.model for c in calls})),
    )
