"""Building spans and counting them: one span per item per stage, with its typed reason."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Literal, TypeVar

from memwrite.costs.usage import LlmUsage, metered
from memwrite.errors import MemwriteError
from memwrite.models import LlmUsageSummary, SpanResult, StageSpan
from memwrite.payloads import ExtractOutput, ItemsPayload, PipelineItem
from memwrite.ports import MetricsSink, SpanStore
from memwrite.reasons import ExtractionError, JudgeError, Reason, StoreError
from memwrite.stages import STAGES

__all__ = [
    "failure_recorded",
    "item_span",
    "make_span",
    "record_failure",
    "record_spans",
    "store_spans",
    "unrecorded",
    "usage_summary",
]

_Item = TypeVar("_Item")
_CALLING_MODEL = frozenset(stage.name for stage in STAGES if stage.calls_model)


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
    kind: Literal["turn", "candidate", "webhook"] = "candidate",
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
    payload: ExtractOutput | ItemsPayload,
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
    store_spans(spans, store)
    for span in spans:
        metrics.count(span.stage, span.result.value, span.reason)


def record_failure(
    stage: str,
    error_spans: Sequence[StageSpan],
    paid: Sequence[LlmUsage],
    store: SpanStore,
    metrics: MetricsSink,
) -> None:
    """A failed attempt's error spans, the first carrying what its model calls cost (`paid`,
    from `memwrite.costs.usage.metered`), and that cost's `llm.*` metrics: every stage that calls a
    model charges a failure the same way, so a paid call reaches the trace and the dashboard."""
    usage = usage_summary(paid)
    spans = list(error_spans)
    if spans and usage is not None:
        spans[0] = spans[0].model_copy(update={"llm": usage})
    record_spans(spans, store, metrics)
    metrics.llm_usage(stage, paid)


@contextmanager
def failure_recorded(
    stage: str,
    store: SpanStore,
    metrics: MetricsSink,
    *,
    reason: type[ExtractionError | JudgeError | StoreError],
    undone: Sequence[_Item],
    error_span: Callable[[_Item, Reason, float], StageSpan],
    before: Callable[[], None] | None = None,
    started: float | None = None,
) -> Iterator[list[LlmUsage]]:
    """One attempt of a stage that calls out, metered (yields the calls it pays for); on a
    `MemwriteError` its failure is recorded (`record_failure`) and the error propagates.

    Each item of `undone` (what a failure leaves undone) gets `error_span(item, reason,
    latency_ms)`, `reason` built from the error's type name only (its message could quote a
    turn); `before` records first what the attempt decided before it failed (those items keep
    their spans); `started` is the `time.perf_counter()` the latency counts from (default: now).
    """
    started = time.perf_counter() if started is None else started
    paid: list[LlmUsage] = []
    try:
        with metered() as paid:
            yield paid
    except MemwriteError as exc:
        # Every call answered before the failure was paid for, whatever failed after it.
        latency_ms = (time.perf_counter() - started) * 1000
        if before is not None:
            before()
        error = reason(error=type(exc).__name__)
        failed = [error_span(item, error, latency_ms) for item in undone]
        record_failure(stage, failed, paid, store, metrics)
        raise


def store_spans(spans: Sequence[StageSpan], store: SpanStore) -> None:
    """Write `spans`, each adding the model usage of the earlier attempt's span it replaces.

    A retry writes its span over the span the failed attempt left (same stage and item: its
    error span, or the span of an item decided before the failure, decided again): that
    attempt's calls were paid for too, so its usage stays in the sum, once (a third attempt's
    span adds the second's, which holds the first's). A redelivery of applied items writes no
    span over theirs (`unrecorded`), so adds nothing. Stages that call no model skip the read;
    the others read the usage at their spans' own keys, not the trace's every span.
    """
    if not spans:
        return
    if not any(span.stage in _CALLING_MODEL for span in spans):
        store.put_spans(spans)
        return
    keys: dict[tuple[str, str], dict[tuple[str, str], None]] = {}
    for span in spans:
        keys.setdefault((span.tenant, span.trace_id), {})[(span.stage, span.item_id)] = None
    earlier = {
        (*trace, *key): usage
        for trace, wanted in keys.items()
        for key, usage in store.llm_usage_of(*trace, list(wanted)).items()
    }
    store.put_spans(
        [
            span.model_copy(update={"llm": _added(span.llm, paid)})
            if (paid := earlier.get((span.tenant, span.trace_id, span.stage, span.item_id)))
            else span
            for span in spans
        ]
    )


def _added(usage: LlmUsageSummary | None, earlier: LlmUsageSummary) -> LlmUsageSummary:
    if usage is None:
        return earlier
    return LlmUsageSummary(
        calls=usage.calls + earlier.calls,
        input_tokens=usage.input_tokens + earlier.input_tokens,
        output_tokens=usage.output_tokens + earlier.output_tokens,
        cost_usd=round(usage.cost_usd + earlier.cost_usd, 8),
        models=tuple(sorted({*usage.models, *earlier.models})),
        malformed=usage.malformed + earlier.malformed,
        cache_creation_input_tokens=usage.cache_creation_input_tokens
        + earlier.cache_creation_input_tokens,
        cache_read_input_tokens=usage.cache_read_input_tokens + earlier.cache_read_input_tokens,
    )


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
        malformed=sum(1 for c in calls if c.malformed),
        cache_creation_input_tokens=sum(c.cache_creation_input_tokens for c in calls),
        cache_read_input_tokens=sum(c.cache_read_input_tokens for c in calls),
    )
