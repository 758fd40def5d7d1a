"""The change feed's events, derived from the outbox: one event per outbox row (per memory
change), so the feed is exactly as complete as indexing is, and an event's id is a function of
the row (tenant, user, memory, rev): a row delivered twice (the stream retries, a drain runs
again) yields the same event id, which receivers dedupe on.

Which event a row is follows from the memory as committed at that rev and as it is now:
gone -> `memory.erased` (rolled back or erased); ended by a newer fact -> `memory.superseded`;
past its expiry -> `memory.expired`; the first rev -> `memory.created`; else
`memory.updated` (a merge, a tier change, a restore). A user expiry that passes later gets a
row of its own: the expiry sweep (`memwrite.expiry`) commits a revision flagged
`expiry_announced`, whose row is its `memory.expired`.

`user.erased` has an outbox row of its own, written by the erasure once the user's items and
documents are gone (`erasure:<time>`, rev 1, no trace: the user's traces went with them); the
event's id is a function of that row and its time is the erasure's. Stage 7 deletes the row once
the event is handed over, so nothing naming the user outlives the erasure's announcement.

`memory.deleted` has an outbox row of its own too, written in the deletion's commit
(`deleted:<memory id>@<time>`, rev 1, the trace that stored the memory): the memory's own rows
went with it, and a memory id stored again later must find its rows' keys free. Its event names
the memory and is at the deletion's time.

An event goes to each subscribed webhook as a `WebhookDelivery`, the message the delivery lane
(`memwrite.feed.delivery`) queues: its id too is a function of the row (and the webhook).
"""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict

from memwrite.config.tenant_overrides import WebhookEvent
from memwrite.ids import content_hash
from memwrite.payloads import OutboxChange
from memwrite.records.memory import MemoryUnit

__all__ = [
    "DELETION_ROW_PREFIX",
    "ERASURE_ROW_PREFIX",
    "ChangeEvent",
    "EventType",
    "WebhookDelivery",
    "deleted_memory_of",
    "deletion_row_id",
    "erasure_row_id",
    "event_for_change",
    "is_erasure_row",
    "memory_deleted_event",
    "user_erased_event",
]

# An erasure's outbox row is keyed `erasure:<time>`: memory ids are hex and episode rows
# `episode:<turn id>`, so the kinds never collide; one row per erasure of the user.
ERASURE_ROW_PREFIX = "erasure:"
# A deletion's row is keyed `deleted:<memory id>@<time>`: apart from the memory's own rows.
DELETION_ROW_PREFIX = "deleted:"


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


class WebhookDelivery(BaseModel):
    """One change-feed event for one webhook: the webhook queue's message. The webhook is named
    by its id only (`memwrite.feed.webhooks.hook_id`): its URL and secret are read from the
    tenant's settings at each attempt, so a rotated secret signs the next attempt and a removed
    webhook gets nothing more."""

    model_config = ConfigDict(frozen=True)

    event: ChangeEvent
    hook_id: str
    rev: int  # the outbox row's rev: with the memory id, the attempt spans' item id

    @property
    def delivery_id(self) -> str:
        """A function of the outbox row (its event id) and the webhook."""
        return content_hash("delivery", self.event.event_id, self.hook_id)


def erasure_row_id(at: datetime) -> str:
    """The outbox row id of an erasure at `at` (UTC, to the microsecond: a repeat is a new row)."""
    return f"{ERASURE_ROW_PREFIX}{at.astimezone(UTC).isoformat()}"


def is_erasure_row(row_id: str) -> bool:
    return row_id.startswith(ERASURE_ROW_PREFIX)


def deletion_row_id(memory_id: str, at: datetime) -> str:
    """The outbox row id of the deletion of `memory_id` at `at` (UTC, to the microsecond)."""
    return f"{DELETION_ROW_PREFIX}{memory_id}@{at.astimezone(UTC).isoformat()}"


def deleted_memory_of(row_id: str) -> tuple[str, datetime] | None:
    """The memory id and time of a deletion's row; None for any other row."""
    if not row_id.startswith(DELETION_ROW_PREFIX):
        return None
    memory_id, _, at = row_id.removeprefix(DELETION_ROW_PREFIX).partition("@")
    return memory_id, datetime.fromisoformat(at)


def _event_id(change: OutboxChange) -> str:
    return content_hash("event", change.tenant, change.user_id, change.memory_id, str(change.rev))


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
        event_id=_event_id(change),
        type=kind,
        tenant=change.tenant,
        user_id=change.user_id,
        memory_id=change.memory_id,
        trace_id=change.trace_id,
        at=at,
    )


def user_erased_event(change: OutboxChange) -> ChangeEvent:
    """The event of an erasure's outbox row (`is_erasure_row`): at the erasure's time."""
    at = datetime.fromisoformat(change.memory_id.removeprefix(ERASURE_ROW_PREFIX))
    return ChangeEvent(
        event_id=_event_id(change),
        type=EventType.USER_ERASED,
        tenant=change.tenant,
        user_id=change.user_id,
        memory_id=None,
        trace_id=None,
        at=at,
    )


def memory_deleted_event(change: OutboxChange) -> ChangeEvent:
    """The event of a deletion's row (`deleted_memory_of`): the memory, at the deletion's time."""
    deleted = deleted_memory_of(change.memory_id)
    if deleted is None:
        raise ValueError(f"{change.memory_id} is not a deletion's row")
    memory_id, at = deleted
    return ChangeEvent(
        event_id=_event_id(change),
        type=EventType.MEMORY_DELETED,
        tenant=change.tenant,
        user_id=change.user_id,
        memory_id=memory_id,
        trace_id=change.trace_id,
        at=at,
    )
