"""The episode record: one deferred user turn, its words (firewall-masked), ids and status."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from memwrite.models import QueuedTurn

__all__ = [
    "EPISODE_DOC_PREFIX",
    "PRECEDING_MAX_CHARS",
    "Episode",
    "EpisodePage",
    "EpisodeStatus",
    "ExpiryWarning",
    "episode_doc_id",
    "episode_of_doc_id",
    "expiry_warning",
    "preceding_of",
    "search_text",
]

# An episode's search document and outbox rows are keyed `episode:<turn id>`: memory ids are
# hex, so the two kinds never collide in the index or the outbox.
EPISODE_DOC_PREFIX = "episode:"


# How much of the turn before a kept turn its episode is searched with: the end of it, which
# is what a reply answers ("... What got you into running?"); a long turn's start is another
# subject, and an assistant's long answer would drown the user's own words.
PRECEDING_MAX_CHARS = 300


def preceding_of(previous: str) -> str | None:
    """The end of the turn before a kept turn (`QueuedTurn.preceding`): at most
    `PRECEDING_MAX_CHARS`, cut at a word boundary; None when it holds no word."""
    text = " ".join(previous.split())
    if len(text) > PRECEDING_MAX_CHARS:
        text = text[-PRECEDING_MAX_CHARS:]
        text = text.partition(" ")[2] if " " in text else text
    return text or None


def search_text(turn: QueuedTurn) -> str:
    """An episode's BM25 text: the turn it replies to (its end, or the question a short
    answer was kept with), then its own words (docs/design.md §10). A question often names
    what the answer does not ("How long have you been married?" / "5 years already!")."""
    before = turn.preceding or turn.context
    return turn.text if not before else f"{before}\n{turn.text}"


def episode_doc_id(turn_id: str) -> str:
    return f"{EPISODE_DOC_PREFIX}{turn_id}"


def episode_of_doc_id(doc_id: str) -> str | None:
    """The turn id of an episode document id; None for a memory id."""
    if doc_id.startswith(EPISODE_DOC_PREFIX):
        return doc_id[len(EPISODE_DOC_PREFIX) :]
    return None


class EpisodeStatus(StrEnum):
    PENDING = "pending"  # kept, waiting for a model (backfill)
    IN_BATCH = "in_batch"  # its extraction submitted in a provider batch (`batch_id`)
    EXTRACTED = "extracted"  # run through extraction: `memory_ids` (or none, with `outcome`)
    EXPIRED = "expired"  # past its retention (docs/episodes.md): out of every query, then deleted


class Episode(BaseModel):
    """One kept turn. `turn` is the queued turn as extraction saw it (masked text, the question
    it answered), so a backfill re-runs exactly what a live extraction would have read."""

    model_config = ConfigDict(frozen=True)

    turn: QueuedTurn
    status: EpisodeStatus = EpisodeStatus.PENDING
    deferred_reason: dict[str, Any] = Field(
        description="The typed reason extraction deferred the turn (DeferredNoLLM, ...)."
    )
    expires_at: int = Field(description="Epoch seconds: DynamoDB TTL, the SQLite sweep.")
    memory_ids: list[str] = Field(default_factory=list)
    outcome: str | None = None  # why an extracted episode produced no memory (a reason type)
    backfill_trace_id: str | None = None
    # The provider batch its extraction is in, while `in_batch` (the batch lane,
    # docs/design.md §10).
    batch_id: str | None = None

    @property
    def tenant(self) -> str:
        return self.turn.tenant

    @property
    def user_id(self) -> str:
        return self.turn.user_id

    @property
    def turn_id(self) -> str:
        return self.turn.turn_id

    @property
    def observed_at(self) -> datetime:
        return self.turn.observed_at

    @property
    def sort_key(self) -> str:
        """`observed_at#turn_id`: a user's episodes in observation order."""
        return f"{self.observed_at.astimezone(UTC).isoformat()}#{self.turn_id}"

    def status_at(self, now: float) -> EpisodeStatus:
        """Expiry is read lazily (TTL deletion can lag by hours)."""
        return EpisodeStatus.EXPIRED if self.expires_at <= now else self.status

    def as_json(self, now: float) -> dict[str, Any]:
        """An episode as the API returns it."""
        turn = self.turn
        return {
            "kind": "episode",
            "turn_id": turn.turn_id,
            "source_turn_id": turn.turn_id,
            "user_id": turn.user_id,
            "session_id": turn.session_id,
            "trace_id": turn.trace_id,
            "observed_at": turn.observed_at.isoformat(),
            "text": turn.text,
            "in_reply_to": turn.context,
            "status": self.status_at(now).value,
            "deferred_reason": self.deferred_reason,
            "memory_ids": list(self.memory_ids),
            "outcome": self.outcome,
            "backfill_trace_id": self.backfill_trace_id,
            "batch_id": self.batch_id,
            "expires_at": datetime.fromtimestamp(self.expires_at, UTC).isoformat(),
        }


@dataclass(frozen=True)
class EpisodePage:
    episodes: list[Episode]
    next_cursor: str | None  # opaque; None on the last page


class ExpiryWarning(BaseModel):
    """Pending episodes within `within_days` of their expiry while no model is configured to
    distil them: their words go when they expire (docs/episodes.md)."""

    model_config = ConfigDict(frozen=True)

    code: Literal["pending_episodes_near_expiry"] = "pending_episodes_near_expiry"
    count: int
    earliest_expires_at: datetime
    within_days: int
    message: str


def expiry_warning(
    episodes: Iterable[Episode], now: float, within_days: int
) -> ExpiryWarning | None:
    """The warning for the pending episodes among `episodes` that expire within `within_days`
    of `now`, or None when there are none. Only the caller knows no model is configured."""
    horizon = now + within_days * 86_400
    near = [
        episode.expires_at
        for episode in episodes
        if episode.status_at(now) is EpisodeStatus.PENDING and episode.expires_at <= horizon
    ]
    if not near:
        return None
    return ExpiryWarning(
        count=len(near),
        earliest_expires_at=datetime.fromtimestamp(min(near), UTC),
        within_days=within_days,
        message=(
            f"{len(near)} pending episode(s) expire within {within_days} days and no model is "
            "configured to distil them: configure a model (ANTHROPIC_API_KEY or Bedrock) and "
            "run a backfill, or their words are gone at expiry"
        ),
    )
