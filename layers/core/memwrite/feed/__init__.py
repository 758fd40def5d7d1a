"""The change feed's delivery: stage 7 hands each event (`memwrite.records.change_events`) to the
webhook delivery lane (`delivery`), which sends it, signed, to the tenants' webhooks
(`webhooks`)."""

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
    "DeliveryOutcome",
    "Webhook",
    "WebhookDeliveryDeps",
    "attempt_delivery",
    "deliveries_for",
    "hook_id",
    "post_event",
    "retry_delay",
    "sign",
]
