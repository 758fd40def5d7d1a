"""The change feed's events, derived from the outbox: one event per outbox row (per memory
change), so the feed is exactly as complete as indexing is, and an event's id is a function of
the row (tenant, user, memory, rev): a row delivered twice (the stream retries, a drain runs
again) yields the same event id, which receivers dedupe on.

Which event a row is follows from the memory as committed at that rev and as it is now:
gone -> `memory.erased` (rolled back or erased); ended by a newer fact -> `memory.superseded`;
past its expiry -> `memory.expired`; the first rev -> `memory.created`; else
`memory.updated` (a merge, a tier change, a restore). `user.erased` is the erasure's own event.
A user expiry that passes later gets a row of its own: the expiry sweep (`memwrite.expiry`)
commits a revision flagged `expiry_announced`, whose row is its `memory.expired`.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict

from memwrite.config import WebhookEvent
from memwrite.ids import content_hash
from memwrite.memory import MemoryUnit
from memwrite.payloads import OutboxChange

__all__ = ["ChangeEvent", "EventType", "event_for_change", "user_erased_event"]


# One list of event types: the one tenants subscribe to (`Webhook.events`).
EventType = WebhookEvent


class ChangeEvent(BaseModel):
    """What a webhook receives (the JSON body) and EventBridge carries (`detail`)."""

    model_config = ConfigDict(frozen=True)

    event_id: str
    type: EventType
    tenant: str
    user_id: str
    memory_id: str | None
    trace_id: str | None
    at: datetime


def event_for_change(change: OutboxChange, memory: MemoryUnit | None, at: datetime) -> ChangeEvent:
    """The event of one outbox row; `memory` is the memory as stored now (None: gone)."""
    if memory is None:
        kind = EventType.MEMORY_ERASED
    elif memory.superseded_by is not None:
        kind = EventType.MEMORY_SUPERSEDED
    elif (
        memory.expiry_announced
        or memory.expired(at)
        or (memory.expires_at is not None and memory.expires_at <= at.timestamp())
    ):
        # The user's expiry (PATCH, announced by the sweep) or the store's TTL (tasks) passed
        kind = EventType.MEMORY_EXPIRED
    elif change.rev == 1:
        kind = EventType.MEMORY_CREATED
    else:
        kind = EventType.MEMORY_UPDATED
    return ChangeEvent(
        event_id=content_hash(
            "event", change.tenant, change.user_id, change.memory_id, str(change.rev)
        ),
        type=kind,
        tenant=change.tenant,
        user_id=change.user_id,
        memory_id=change.memory_id,
        trace_id=change.trace_id,
        at=at,
    )


def user_erased_event(tenant: str, user_id: str, at: datetime) -> ChangeEvent:
    """The erasure's event; its id names the erasure (tenant, user, time)."""
    return ChangeEvent(
        event_id=content_hash("event", tenant, user_id, "user.erased", at.isoformat()),
        type=EventType.USER_ERASED,
        tenant=tenant,
        user_id=user_id,
        memory_id=None,
        trace_id=None,
        at=at,
    )
