"""The webhook delivery lane on AWS: its SQS queue -> this Lambda (`memwrite.feed.delivery`).

Each record is one (event, webhook) delivery stage 7 handed over; `attempt_delivery` makes one
attempt. Records fail one by one (Powertools `BatchProcessor`, partial batch response): a
failed attempt has already hidden its message for the backoff (`ChangeMessageVisibility`), the
event source leaves it in the queue, and the queue's redrive policy moves it to the DLQ after
`MAX_ATTEMPTS` receives. Delivered and dropped records are deleted by the event source.
"""

from __future__ import annotations

import time
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.parser.models import SqsRecordModel
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import Json

from memwrite.feed.delivery import WebhookDeliveryDeps, attempt_delivery
from memwrite.ports import WebhookMessage
from memwrite.records.change_events import WebhookDelivery
from memwrite.wiring import build_webhook_delivery_deps

__all__ = ["DeliveryRecord", "lambda_handler"]

logger = Logger(service="memwrite-webhook-delivery")


class DeliveryRecord(SqsRecordModel):
    """A record of the webhook queue: its body is one delivery."""

    body: Json[WebhookDelivery]


@cache
def deps() -> WebhookDeliveryDeps:
    return build_webhook_delivery_deps()


def deliver_record(record: DeliveryRecord) -> str:
    message = WebhookMessage(
        delivery=record.body,
        receipt=record.receiptHandle,
        receive_count=int(record.attributes.ApproximateReceiveCount),
    )
    outcome = attempt_delivery(message, deps(), now=time.time())
    # Ids only: a URL may carry a token, the event names a user.
    logger.debug("webhook delivery", delivery_id=message.delivery.delivery_id, outcome=outcome)
    return outcome.value


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    # A batch whose every record failed is a partial response too (not an exception): each
    # failed message already waits for its own backoff.
    processor = BatchProcessor(
        event_type=EventType.SQS, model=DeliveryRecord, raise_on_entire_batch_failure=False
    )
    return dict(
        process_partial_response(
            event=event, record_handler=deliver_record, processor=processor, context=context
        )
    )
