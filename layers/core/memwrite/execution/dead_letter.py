"""The state machine's failure path: a stage gave up on a batch (its Catch matched).

Each turn of the batch gets an error span (`DeadLettered{stage, error}`, stage `dead_letter`,
so the failing stage's own error span, when it wrote one, is kept beside it) and the trace
reports `failed`; the state machine then sends the batch to the pipeline DLQ for a redrive.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from memwrite.models import SpanResult
from memwrite.payloads import ExtractInput
from memwrite.reasons import DeadLettered
from memwrite.spans import make_span, record_spans

if TYPE_CHECKING:
    from memwrite.ports import MetricsSink, SpanStore

__all__ = ["DEAD_LETTER_STAGE", "StageError", "StageFailure", "record_stage_failure"]

DEAD_LETTER_STAGE = "dead_letter"


class StageError(BaseModel):
    """What a Step Functions Catch puts at its `ResultPath`."""

    model_config = ConfigDict(populate_by_name=True)

    error: str = Field(alias="Error")
    cause: str | None = Field(default=None, alias="Cause")


class StageFailure(BaseModel):
    """The failure path's input: which stage failed, on which batch, with which error."""

    stage: str
    batch: ExtractInput
    failure: StageError


def record_stage_failure(failure: StageFailure, spans: SpanStore, metrics: MetricsSink) -> int:
    """One error span per turn of the failed batch; returns how many were written.

    The span carries the error's type only: its message (the Catch's `Cause`) could quote the
    turn, and the DLQ message is the one place the turn's text goes.
    """
    reason = DeadLettered(stage=failure.stage, error=failure.failure.error)
    written = [
        make_span(
            trace_id=turn.trace_id,
            tenant=turn.tenant,
            user_id=turn.user_id,
            stage=DEAD_LETTER_STAGE,
            item_id=turn.turn_id,
            result=SpanResult.ERROR,
            reason=reason,
            kind="turn",
        )
        for turn in failure.batch.turns
    ]
    record_spans(written, spans, metrics)
    return len(written)
