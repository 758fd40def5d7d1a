"""The backfill's ports (docs/design.md §10): the hand-off of one user's backfill to the
backfill function (`BackfillStarter`: Lambda's asynchronous invoke,
`adapters/aws/lambda_backfill.py`; `memwrite serve`'s background worker,
`adapters/in_memory.py`), and the batch lane's: a provider's batch API (`ModelBatches`) and
the episode store's side of it (`EpisodeBatches`). Their adapters: the Message Batches API
(`adapters/anthropic/batches.py`), Bedrock batch inference through S3
(`adapters/aws/bedrock_batches.py`), and the SQLite and DynamoDB episode stores."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Protocol

from pydantic import BaseModel, ConfigDict

from memwrite.costs.usage import LlmUsage
from memwrite.model_ports import LlmCall
from memwrite.prompts import RenderedPrompt
from memwrite.records.episode import Episode

__all__ = [
    "BackfillJob",
    "BackfillStarter",
    "BatchAnswer",
    "BatchRequest",
    "BatchState",
    "EpisodeBatches",
    "ModelBatches",
]


class BackfillJob(BaseModel):
    """One user's backfill handed to the backfill function: the event it is invoked with, by
    `POST /v1/users/{user_id}/backfill` and by the scheduled run's fan-out. Its run opens the
    trace `trace_id` (readable at `GET /v1/traces/{trace_id}` from then on)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tenant: str
    user_id: str
    trace_id: str
    since: datetime | None = None
    until: datetime | None = None


class BackfillStarter(Protocol):
    """Runs a backfill later, elsewhere: the caller does not wait for it."""

    def start(self, job: BackfillJob) -> None:
        """Hand the job over (at least once); raises `TransientError` when it could not be."""
        ...


class BatchState(StrEnum):
    IN_PROGRESS = "in_progress"  # not ended yet: poll again later
    ENDED = "ended"  # every request has its own result (succeeded, errored, expired, canceled)
    FAILED = "failed"  # the batch as a whole failed, expired or was stopped: no answers


@dataclass(frozen=True)
class BatchRequest:
    """One extraction request: the prompt a live extraction sends, for `model`."""

    custom_id: str  # content-addressed (`memwrite.backfill.batch.request_id`)
    model: str
    prompt: RenderedPrompt


@dataclass(frozen=True)
class BatchAnswer:
    """One request's result. `call` is the validated answer; without one, `error` says why
    (errored, expired, canceled, MalformedLlmOutput) and `usage` what was paid all the same."""

    custom_id: str
    call: LlmCall | None
    error: str | None = None
    usage: LlmUsage | None = None


class ModelBatches(Protocol):
    """A provider's batch API for extraction requests, at its batch price."""

    @property
    def min_requests(self) -> int:
        """The fewest requests a batch may hold (fewer wait for the next round)."""
        ...

    def submit(self, model: str, requests: Sequence[BatchRequest]) -> str:
        """Submit requests for one model; returns the provider's batch id. Raises
        `LlmUnavailable` (try later) or `LlmRequestRejected`."""
        ...

    def state(self, batch_id: str) -> BatchState: ...

    def states(self, batch_ids: Sequence[str]) -> dict[str, BatchState]:
        """The state of each of these batches, in as few requests as the provider allows
        (a round polls every open batch)."""
        ...

    def answers(self, batch_id: str) -> list[BatchAnswer]:
        """Every request's result of an ended batch (read only after `state` says ENDED)."""
        ...


class EpisodeBatches(Protocol):
    """Which episodes are in which provider batch. An episode is `pending`, then `in_batch`
    (its `batch_id`), then `extracted` or `pending` again; the batch is open until closed."""

    def add_to_batch(self, batch_id: str, episodes: Sequence[Episode]) -> list[Episode]:
        """Mark the episodes still `pending` as `in_batch` in `batch_id`; returns them as
        marked (one taken meanwhile, by a live backfill say, is left out)."""
        ...

    def open_batches(self) -> list[str]:
        """The ids of the batches not closed yet, oldest first."""
        ...

    def batch_episodes(self, batch_id: str) -> list[Episode]:
        """The episodes still `in_batch` in `batch_id` (none once its results are applied)."""
        ...

    def close_batch(self, batch_id: str) -> None:
        """Forget the batch (its episodes are written `extracted` or `pending` first)."""
        ...

    def episodes_in_batches(self) -> int:
        """How many episodes the open batches hold, over every tenant: their members counted,
        not read (one erased or expired meanwhile counts until its batch is closed)."""
        ...
