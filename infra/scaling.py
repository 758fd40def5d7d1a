"""How much the deployment takes in, derived from the model budget's limits (`pipeline.model.
limits` for the extraction's provider and model, as deployed; docs/scale.md).

The model is the narrowest resource: everything else (API Gateway, SQS, Lambda, DynamoDB)
scales by configuration, the model's per-minute limits do not. So the rate at which the
pipeline takes turns off the queue follows from those limits: the turn queue's event source
gets a `MaximumConcurrency` that lets the dispatcher start executions at about twice what the
model sustains (the rest of a burst waits in SQS, where it costs nothing, instead of in
executions that would wait on the model), and the webhook lane's, which follows the memories
written, likewise.

The per-turn figures are the measured funnel (docs/evaluation.md: 0.24 extraction calls per
incoming turn) and the token sizes the cost table assumes (docs/operations.md).
"""

from __future__ import annotations

import math

from memwrite.config.model_limits import ModelLimits

__all__ = [
    "EXTRACT_CALLS_PER_TURN",
    "MAX_EVENT_SOURCE_CONCURRENCY",
    "model_calls_per_minute",
    "turn_queue_concurrency",
    "turns_per_second",
    "webhook_lane_concurrency",
]

EXTRACT_CALLS_PER_TURN = 0.24  # measured: one call per session batch, after the pre-filter
INPUT_TOKENS_PER_CALL = 2_000  # prompt, context and the batch's turns (assumed)
OUTPUT_TOKENS_PER_CALL = 300  # what an extraction answer really takes (assumed)
MODEL_CALL_SECS = 3.0  # a call's duration: how long its max_tokens stay reserved
DISPATCH_SECS = 1.0  # one dispatcher invocation: plan an SQS batch, start its executions
TURN_BATCH = 10  # the turn queue's event source batch size
MEMORIES_PER_TURN = 0.3  # change-feed events per incoming turn (docs/operations.md)
DELIVERY_SECS = 1.0  # one webhook delivery, a receiver answering normally
HEADROOM = 2.0  # take in up to twice what the model sustains: bursts drain faster
# CloudFormation's bounds of `ScalingConfig.MaximumConcurrency` (above 1,000: a quota request).
MIN_EVENT_SOURCE_CONCURRENCY = 2
MAX_EVENT_SOURCE_CONCURRENCY = 1_000


def model_calls_per_minute(limits: ModelLimits, max_output_tokens: int) -> float:
    """Extraction calls a minute within every limit. A call is charged its input tokens and
    `max_output_tokens` when it starts and refunded to its real output when it ends, so the
    output-token limit bounds both the rate (real outputs) and the calls in flight (each
    holding `max_output_tokens` for `MODEL_CALL_SECS`)."""
    in_flight = limits.output_tokens_per_minute / max_output_tokens
    return min(
        float(limits.requests_per_minute),
        limits.input_tokens_per_minute / INPUT_TOKENS_PER_CALL,
        limits.output_tokens_per_minute / OUTPUT_TOKENS_PER_CALL,
        in_flight * 60 / MODEL_CALL_SECS,
    )


def turns_per_second(limits: ModelLimits, max_output_tokens: int) -> float:
    """Incoming turns a second the model limits sustain."""
    return model_calls_per_minute(limits, max_output_tokens) / EXTRACT_CALLS_PER_TURN / 60


def _bounded(concurrency: float) -> int:
    return max(
        MIN_EVENT_SOURCE_CONCURRENCY, min(MAX_EVENT_SOURCE_CONCURRENCY, math.ceil(concurrency))
    )


def turn_queue_concurrency(limits: ModelLimits, max_output_tokens: int) -> int:
    """The turn queue event source's `MaximumConcurrency`: dispatcher invocations at once."""
    rate = turns_per_second(limits, max_output_tokens) * HEADROOM
    return _bounded(rate * DISPATCH_SECS / TURN_BATCH)


def webhook_lane_concurrency(limits: ModelLimits, max_output_tokens: int) -> int:
    """The webhook queue event source's `MaximumConcurrency`: one delivery per invocation at a
    time, at the rate memories are written (one subscribed webhook per tenant)."""
    deliveries = turns_per_second(limits, max_output_tokens) * MEMORIES_PER_TURN * HEADROOM
    return _bounded(deliveries * DELIVERY_SECS)
