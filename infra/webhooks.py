"""The webhook delivery lane (`memwrite.feed.delivery`): its own SQS queue, its DLQ and its
consumer function, apart from the pipeline so a receiver that is down slows no indexing.

Stage 7's functions (the stream stages) may only send to the queue; the consumer
(`functions/webhook_delivery`) gets it as an event source (partial batch responses), which
grants it receive, delete and `ChangeMessageVisibility`: a failed delivery hides its own
message for its backoff. After `MAX_ATTEMPTS` receives (the last one about 5 hours after the
first) the queue moves a message to the DLQ, which `Monitoring` alarms on.
"""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.config import FunctionSize
from infra.lambdas import MemwriteFunction
from memwrite.feed.delivery import MAX_ATTEMPTS

__all__ = ["DELIVERY_BATCH", "DELIVERY_SIZE", "WebhookLane"]

DELIVERY_BATCH = 10  # deliveries per invocation, attempted one after another
# Each attempt waits at most 5 s for its receiver: a batch of 10 fits with room to spare.
DELIVERY_SIZE = FunctionSize(memory_mb=256, timeout_secs=90)
# A message must outlive its retries (`RETRY_WINDOW_SECS`, 5 h, then the last backoff): days.
_RETENTION = cdk.Duration.days(4)
_DLQ_RETENTION = cdk.Duration.days(14)  # SQS's longest: time to fix the receiver and redrive


class WebhookLane(Construct):
    """The queue (standard: no order to keep, and no receiver's failures hold another's back),
    its DLQ, the consumer's event source and the producers' send grant."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        consumer: MemwriteFunction,
        producers: Sequence[MemwriteFunction],
        max_concurrency: int,
    ) -> None:
        super().__init__(scope, construct_id)
        self.dlq = sqs.Queue(
            self,
            "Dlq",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=_DLQ_RETENTION,
        )
        self.queue = sqs.Queue(
            self,
            "Queue",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=_RETENTION,
            # Only a crashed invocation leaves a message to this (AWS's advice for an SQS
            # event source: six times the function's timeout); a failed attempt sets its own.
            visibility_timeout=cdk.Duration.seconds(6 * DELIVERY_SIZE.timeout_secs),
            dead_letter_queue=sqs.DeadLetterQueue(queue=self.dlq, max_receive_count=MAX_ATTEMPTS),
        )
        consumer.function.add_environment("WEBHOOK_QUEUE_URL", self.queue.queue_url)
        consumer.function.add_event_source(
            sources.SqsEventSource(
                self.queue,
                batch_size=DELIVERY_BATCH,
                report_batch_item_failures=True,
                # At the rate memories are written (`infra/scaling.py`): a burst waits here.
                max_concurrency=max_concurrency,
            )
        )
        for producer in producers:
            producer.function.add_environment("WEBHOOK_QUEUE_URL", self.queue.queue_url)
            self.queue.grant_send_messages(producer.role)
