"""The change feed: events derived from the outbox, handed by stage 7 to the webhook delivery
lane, which sends each, signed, to the tenants' webhooks."""

from memwrite.feed.change_events import (
    ChangeEvent,
    EventType,
    WebhookDelivery,
    erasure_row_id,
    event_for_change,
    is_erasure_row,
    user_erased_event,
)
from memwrite.feed.delivery import (
    MAX_ATTEMPTS,
    RETRY_WINDOW_SECS,
    DeliveryOutcome,
    WebhookDeliveryDeps,
    attempt_delivery,
    deliveries_for,
    retry_delay,
)
from memwrite.feed.webhooks import (
    EVENT_ID_HEADER,
    SIGNATURE_HEADER,
    AttemptResult,
    Webhook,
    hook_id,
    post_event,
    sign,
)

__all__ = [
    "EVENT_ID_HEADER",
    "MAX_ATTEMPTS",
    "RETRY_WINDOW_SECS",
    "SIGNATURE_HEADER",
    "AttemptResult",
    "ChangeEvent",
    "DeliveryOutcome",
    "EventType",
    "Webhook",
    "WebhookDelivery",
    "WebhookDeliveryDeps",
    "attempt_delivery",
    "deliveries_for",
    "erasure_row_id",
    "event_for_change",
    "hook_id",
    "is_erasure_row",
    "post_event",
    "retry_delay",
    "sign",
    "user_erased_event",
]
