"""The change feed: events derived from the outbox, and their signed webhook delivery."""

from memwrite.feed.change_events import (
    ChangeEvent,
    EventType,
    erasure_row_id,
    event_for_change,
    is_erasure_row,
    user_erased_event,
)
from memwrite.feed.webhooks import (
    DEFAULT_ATTEMPTS,
    EVENT_ID_HEADER,
    SIGNATURE_HEADER,
    DeliveryAttempt,
    Webhook,
    WebhookDelivery,
    deliver,
    sign,
)

__all__ = [
    "DEFAULT_ATTEMPTS",
    "EVENT_ID_HEADER",
    "SIGNATURE_HEADER",
    "ChangeEvent",
    "DeliveryAttempt",
    "EventType",
    "Webhook",
    "WebhookDelivery",
    "deliver",
    "erasure_row_id",
    "event_for_change",
    "is_erasure_row",
    "sign",
    "user_erased_event",
]
