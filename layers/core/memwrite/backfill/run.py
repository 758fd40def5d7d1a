"""Backfill: run a user's pending episodes through extraction and the remaining stages, once a
model is available (`POST /v1/users/{user_id}/backfill`, `memwrite backfill`, the AWS schedule).

The route does not run it: `accept_backfill` checks the request, names the trace and hands
the user's backfill (a `BackfillJob`) to the backfill function (`BackfillStarter`: Lambda's
asynchronous invoke on AWS, `memwrite serve`'s backfill worker locally), which runs
`run_job`. The AWS schedule fans out the same way (`start_pending`): one job per user with a
pending episode, at most `MAX_USERS_PER_RUN` per run.

Episodes go in `observed_at` order, one batch per run of turns that arrived together (same
session, and one request or the coalescing window: `extraction_batches`), each with the
session's context as a live turn gets it (the session log's earlier turns) and flagged
`backfill` so extraction keeps no new episode. Conflict decides supersession by `observed_at`,
so the final state is what it would have been had the model been there when the turns arrived.
The run is one trace of its own (spans, cost, and a rollback that returns its episodes to
`pending`); each episode ends `extracted`, linked to the memories it produced, or to none with
the reason. A second backfill finds nothing pending: a no-op. A turn the model fails on again
stays `pending`.

A call may be given a time budget (the backfill function: what it has left, less a reserve):
once it is spent no further batch starts, the result counts the episodes left `remaining`
(still pending), and the next call goes on from there. Its model calls are charged to the
backfill lane of the model budget (`memwrite.budget`: spare capacity only); once the budget
has no room, no further batch starts either, and the rest is `remaining` too.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from memwrite.backfill.ports import BackfillJob, BackfillStarter
from memwrite.backfill.shard import UserShard
from memwrite.budget import Lane, caller_of, calling_for
from memwrite.config.settings import PipelineConfig
from memwrite.errors import (
    BudgetExhausted,
    InvalidQuery,
    MemwriteError,
    ModelRequired,
    UnknownUser,
)
from memwrite.ids import new_trace_id
from memwrite.metering import Metering, metering_for
from memwrite.models import BackfillAccepted, QueuedTurn, Source, SpanResult, StageSpan
from memwrite.payloads import ExtractInput, Extractor, ExtractOutput, ItemsPayload
from memwrite.ports import EpisodeStore, MetricsSink, SpanStore, TraceRecord, TurnLedger
from memwrite.read.pending import pending_of
from memwrite.reasons import ExcludedTopic
from memwrite.records.episode import Episode, EpisodeStatus
from memwrite.stages import pipeline_stages
from memwrite.tenants.configs import TenantConfigs
from memwrite.topics.matcher import withheld_turn, withhold_words

__all__ = [
    "MAX_USERS_PER_RUN",
    "BackfillDeps",
    "BackfillRequest",
    "BackfillResult",
    "Distilled",
    "accept_backfill",
    "backfill_pending",
    "backfill_user",
    "distil_episodes",
    "extraction_batches",
    "open_trace",
    "pending_episodes",
    "run_job",
    "start_pending",
]

_log = logging.getLogger(__name__)
_MAX_BATCH = 10  # turns per extraction call, as a live request's batch is bounded
# Users one scheduled run hands a backfill to (one asynchronous invoke each); the rest wait
# for the next run.
MAX_USERS_PER_RUN = 1000


class BackfillRequest(BaseModel):
    """`POST /v1/users/{user_id}/backfill`: optional bounds on the episodes' `observed_at`."""

    model_config = ConfigDict(extra="forbid")

    since: datetime | None = None
    until: datetime | None = None

    @classmethod
    def parse(cls, body: str | None) -> BackfillRequest:
        """From a request body (none: no bounds); `InvalidQuery` names the field at fault."""
        if not body or not body.strip():
            return cls()
        try:
            return cls.model_validate_json(body)
        except ValidationError as exc:
            error = exc.errors()[0]
            field = ".".join(str(part) for part in error.get("loc", ())) or "body"
            raise InvalidQuery(field, error.get("msg", "invalid")) from exc

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        since = _utc(self.since)
        until = _utc(self.until)
        if since is not None and until is not None and since > until:
            raise InvalidQuery("until", "must not be before since")
        self.since, self.until = since, until
        return self


def _utc(at: datetime | None) -> datetime | None:
    if at is None or at.tzinfo is not None:
        return at
    return at.replace(tzinfo=UTC)


class BackfillResult(BaseModel):
    user_id: str
    trace_id: str | None  # None: nothing was pending (a no-op)
    episodes: int  # pending episodes run
    extracted: int  # now `extracted`
    still_pending: int  # the model failed again
    remaining: int = 0  # not run: the call's time budget ran out (call again to go on)
    memory_ids: list[str]
    duration_ms: float

    def as_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


@dataclass
class BackfillDeps:
    episodes: EpisodeStore
    ledger: TurnLedger
    spans: SpanStore
    stage_deps: Callable[[str], Any]  # a pipeline stage's name -> the deps its `run` takes
    has_model: bool
    configs: TenantConfigs  # a tenant's request config, with its stored settings
    metrics: MetricsSink
    metering: Metering | None = None  # each batch's usage, the tenant's (None: not metered)
    clock: Callable[[], float] = field(default=time.time)


def pending_episodes(
    tenant: str, user_id: str, request: BackfillRequest, deps: BackfillDeps
) -> list[Episode]:
    """The user's pending episodes in [since, until], in observation order."""
    return pending_of(
        deps.episodes,
        tenant,
        user_id,
        now=deps.clock(),
        since=request.since,
        until=request.until,
    )


def extraction_batches(
    episodes: list[Episode], coalesce_window_s: float = 0.0
) -> list[list[Episode]]:
    """Consecutive episodes of one session form one batch (at most `_MAX_BATCH`) when they
    arrived together, as the live lane would have extracted them: in one request, or, with
    `extract.coalesce_window_s` set, said within that window of the batch's first turn
    (docs/design.md §2). Turns an agent posted one per request then share a call here too."""
    batches: list[list[Episode]] = []
    for episode in episodes:
        last = batches[-1] if batches else None
        if (
            last is not None
            and len(last) < _MAX_BATCH
            and last[-1].turn.session_id == episode.turn.session_id
            and _together(last[0].turn, episode.turn, coalesce_window_s)
        ):
            last.append(episode)
        else:
            batches.append([episode])
    return batches


def _together(first: QueuedTurn, turn: QueuedTurn, coalesce_window_s: float) -> bool:
    # An episode keeps the turn as said, without when the queue accepted it: the time it was
    # said stands for that (an agent posting turn by turn posts each as it is said).
    if first.trace_id == turn.trace_id:
        return True
    said_after_s = (turn.observed_at - first.observed_at).total_seconds()
    return coalesce_window_s > 0 and said_after_s <= coalesce_window_s


def _check(tenant: str, user_id: str, deps: BackfillDeps) -> None:
    """`UnknownUser` for a user the tenant has no trace of, `ModelRequired` without a model."""
    traces = deps.ledger.traces_of_user(
        tenant, user_id, since=None, until=None, limit=1, cursor=None
    )
    if not traces.traces:
        raise UnknownUser(user_id)
    if not deps.has_model:
        raise ModelRequired("a backfill needs a model (ANTHROPIC_API_KEY or Bedrock)")


def accept_backfill(
    tenant: str,
    user_id: str,
    request: BackfillRequest,
    deps: BackfillDeps,
    starter: BackfillStarter,
) -> BackfillAccepted:
    """`POST /v1/users/{user_id}/backfill`: checked as `backfill_user` checks it (`UnknownUser`,
    `ModelRequired`), then, when the user has a pending episode in the range (one read of the
    pending episodes, never all of them), handed to the backfill function under a new trace
    id; the run opens that trace. Raises `TransientError` when the hand-off failed."""
    _check(tenant, user_id, deps)
    page = deps.episodes.episodes_of(
        tenant,
        user_id,
        status=EpisodeStatus.PENDING,
        since=request.since,
        until=request.until,
        limit=1,
        cursor=None,
        now=deps.clock(),
    )
    if not page.episodes:
        return BackfillAccepted(user_id=user_id, trace_id=None)
    job = BackfillJob(
        tenant=tenant,
        user_id=user_id,
        trace_id=new_trace_id(),
        since=request.since,
        until=request.until,
    )
    starter.start(job)
    return BackfillAccepted(user_id=user_id, trace_id=job.trace_id)


def run_job(
    job: BackfillJob,
    config: PipelineConfig,
    deps: BackfillDeps,
    *,
    budget_secs: float | None = None,
) -> BackfillResult:
    """A handed-over backfill (the backfill function's event): `backfill_user` under the
    job's trace."""
    request = BackfillRequest(since=job.since, until=job.until)
    return backfill_user(
        job.tenant,
        job.user_id,
        request,
        config,
        deps,
        budget_secs=budget_secs,
        trace_id=job.trace_id,
    )


def start_pending(
    deps: BackfillDeps, starter: BackfillStarter, max_users: int = MAX_USERS_PER_RUN
) -> list[BackfillJob]:
    """The scheduled run on AWS: one job handed to the backfill function per user with a
    pending episode (the sparse index of pending episodes, never a scan), at most `max_users`
    (the rest wait for the next run). A hand-off that fails is logged and the user left
    pending for the next run, so one cannot stop the others."""
    if not deps.has_model:
        raise ModelRequired("a backfill needs a model (ANTHROPIC_API_KEY or Bedrock)")
    started: list[BackfillJob] = []
    for tenant, user_id in deps.episodes.pending_users()[:max_users]:
        job = BackfillJob(tenant=tenant, user_id=user_id, trace_id=new_trace_id())
        try:
            starter.start(job)
        except MemwriteError:
            _log.exception("handing over one user's backfill failed; it stays pending")
            continue
        started.append(job)
    return started


def backfill_user(
    tenant: str,
    user_id: str,
    request: BackfillRequest,
    config: PipelineConfig,
    deps: BackfillDeps,
    *,
    budget_secs: float | None = None,
    trace_id: str | None = None,
) -> BackfillResult:
    """Distil the user's pending episodes (in [since, until]) under a new trace, or under
    `trace_id` (a handed-over job's: written complete and empty when nothing is pending, so
    whoever follows it sees the end); with `budget_secs`, no batch starts after that many
    seconds (the first always runs). Raises `UnknownUser` for a user the tenant has no trace
    of, `ModelRequired` when no model is configured."""
    started = time.perf_counter()
    _check(tenant, user_id, deps)
    pending = pending_episodes(tenant, user_id, request, deps)
    if not pending:
        if trace_id is not None:
            _open_empty_trace(trace_id, tenant, user_id, deps)
        return BackfillResult(
            user_id=user_id,
            trace_id=None,
            episodes=0,
            extracted=0,
            still_pending=0,
            memory_ids=[],
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
        )
    trace_id = trace_id or new_trace_id()
    open_trace(trace_id, pending, deps)
    done: list[Episode] = []
    memory_ids: list[str] = []
    still_pending = remaining = 0
    no_room = False
    window = config.extract.coalesce_window_s
    for index, batch in enumerate(extraction_batches(pending, window)):
        spent = time.perf_counter() - started
        if no_room or (index > 0 and budget_secs is not None and spent >= budget_secs):
            remaining += len(batch)
            continue
        try:
            distilled = distil_episodes(batch, trace_id, config, deps, deps.stage_deps)
        except BudgetExhausted:
            # Extraction raises it before writing anything: the batch stays pending as is.
            no_room = True
            remaining += len(batch)
            continue
        still_pending += len(distilled.deferred)
        memory_ids.extend(distilled.memory_ids)
        done.extend(distilled.finished)
    return BackfillResult(
        user_id=user_id,
        trace_id=trace_id,
        episodes=len(pending) - remaining,
        extracted=len(done),
        still_pending=still_pending,
        remaining=remaining,
        memory_ids=sorted(set(memory_ids)),
        duration_ms=round((time.perf_counter() - started) * 1000, 3),
    )


def open_trace(trace_id: str, episodes: list[Episode], deps: BackfillDeps) -> None:
    """The trace a backfill of one user's episodes runs under (spans, cost, rollback)."""
    first = episodes[0].turn
    deps.ledger.put_trace(
        TraceRecord(
            trace_id=trace_id,
            tenant=first.tenant,
            user_id=first.user_id,
            session_id=first.session_id,
            agent_id=first.agent_id,
            source=first.source.value,
            created_at=datetime.fromtimestamp(deps.clock(), UTC).isoformat(),
            turn_ids=tuple(episode.turn_id for episode in episodes),
        )
    )


def _open_empty_trace(trace_id: str, tenant: str, user_id: str, deps: BackfillDeps) -> None:
    """A handed-over job found nothing pending (another run took the episodes): its trace,
    with no turn, reads complete."""
    deps.ledger.put_trace(
        TraceRecord(
            trace_id=trace_id,
            tenant=tenant,
            user_id=user_id,
            session_id="",
            agent_id=None,
            source=Source.USER_EXPLICIT.value,  # no turn under it: read by nothing
            created_at=datetime.fromtimestamp(deps.clock(), UTC).isoformat(),
            turn_ids=(),
        )
    )


@dataclass(frozen=True)
class Distilled:
    finished: list[Episode]  # now `extracted`, each linked to its memories (or its outcome)
    deferred: list[Episode]  # the model failed on them again: `pending` (again)
    memory_ids: list[str]


def distil_episodes(
    batch: list[Episode],
    trace_id: str,
    config: PipelineConfig,
    deps: BackfillDeps,
    stage_deps: Callable[[str], Any],
) -> Distilled:
    """One extraction batch of episodes (`extraction_batches`) through every pipeline stage,
    as the live pipeline runs its turns, under `trace_id` and on the model budget's backfill
    lane; then the episodes written: `extracted`, or `pending` (again) where the model failed.
    `stage_deps` gives each stage its deps (the batch lane's extract stage answers from its
    batch). Raises `BudgetExhausted` before writing anything."""
    tenant = batch[0].tenant
    turns = [episode.turn.model_copy(update={"trace_id": trace_id}) for episode in batch]
    payload: Any = ExtractInput(turns=turns, backfill=True)
    deferred: set[str] = set()
    with (
        calling_for(caller_of(tenant, config.model, Lane.BACKFILL)),
        metering_for(tenant, deps.metering),
    ):
        for stage in pipeline_stages():
            payload = stage.run(payload, config, stage_deps(stage.name))
            if isinstance(payload, ExtractOutput):
                deferred = {t.turn_id for t in payload.turns if t.extractor is Extractor.DEFERRED}
    assert isinstance(payload, ItemsPayload)
    produced: dict[str, list[str]] = {}
    for item in payload.items:
        if item.memory_id is not None and item.outcome is not None:
            produced.setdefault(item.turn_id, []).append(item.memory_id)
    spans = deps.spans.spans_of(tenant, trace_id)
    reasons = _reject_reasons(spans)
    excluded = _excluded_turns(spans, config)
    finished: list[Episode] = []
    again: list[Episode] = []
    reset: list[Episode] = []  # deferred, and not pending before (in a provider batch)
    memory_ids: list[str] = []
    for episode in batch:
        if episode.turn_id in deferred:
            pending = episode.model_copy(update={"status": EpisodeStatus.PENDING, "batch_id": None})
            again.append(pending)
            if episode.status is not EpisodeStatus.PENDING:
                reset.append(pending)
            continue
        ids = sorted(set(produced.get(episode.turn_id, [])))
        memory_ids.extend(ids)
        if episode.turn_id in excluded:
            # The model put it under an excluded topic: its words go, the episode expires.
            topic = excluded[episode.turn_id]
            finished.append(_withheld(episode, topic, ids, trace_id, deps.clock()))
            continue
        finished.append(
            episode.model_copy(
                update={
                    "status": EpisodeStatus.EXTRACTED,
                    "batch_id": None,
                    "memory_ids": ids,
                    "outcome": None if ids else reasons.get(episode.turn_id, "NoCandidates"),
                    "backfill_trace_id": trace_id,
                    # `retention_days` counts from distillation (docs/episodes.md).
                    "expires_at": config.episodes.expires_at_distilled(deps.clock()),
                }
            )
        )
    # Batch by batch: a failure later leaves what is done marked, the rest pending.
    deps.episodes.update_episodes([*finished, *reset])
    if excluded:
        # The words the pre-filter recorded for the live turn go too (its trace's inputs).
        withheld = [e.turn for e in batch if e.turn_id in excluded]
        withhold_words(withheld, excluded, deps.ledger, deps.clock())
        # Deleted now where the store sweeps (SQLite, its index document with it); on
        # DynamoDB by its TTL, and no read returns it meanwhile.
        deps.episodes.expire(deps.clock())
    return Distilled(finished=finished, deferred=again, memory_ids=memory_ids)


def _excluded_turns(spans: Sequence[StageSpan], config: PipelineConfig) -> dict[str, str]:
    """turn id -> the excluded topic extraction found in it (docs/design.md §2)."""
    found: dict[str, str] = {}
    for span in spans:
        reason = span.reason
        if isinstance(reason, ExcludedTopic) and reason.topic in config.extract.exclude_topics:
            found[span.item_id.split(":", 1)[0]] = reason.topic
    return found


def _withheld(
    episode: Episode, topic: str, memory_ids: list[str], trace_id: str, now: float
) -> Episode:
    """The episode of an excluded topic: its words replaced, expired at once (its candidates
    of other topics, if any, were stored as memories)."""
    return episode.model_copy(
        update={
            "turn": withheld_turn(episode.turn, topic),
            "status": EpisodeStatus.EXTRACTED,
            "memory_ids": memory_ids,
            "outcome": "ExcludedTopic",
            "backfill_trace_id": trace_id,
            "expires_at": int(now) - 1,
        }
    )


def _reject_reasons(spans: Sequence[StageSpan]) -> dict[str, str]:
    """turn id -> the type of the last rejection on its items (why it produced nothing)."""
    reasons: dict[str, str] = {}
    for span in spans:
        if span.result is SpanResult.REJECT and span.reason is not None:
            turn_id = span.item_id.split(":", 1)[0]
            reasons[turn_id] = span.reason.type
    return reasons


def backfill_pending(
    settings_for: Callable[[str], PipelineConfig],
    deps: BackfillDeps,
    shard: UserShard | None = None,
) -> list[BackfillResult]:
    """Every user (of every tenant) with a pending episode, each backfilled in turn: the AWS
    schedule's job. `settings_for(tenant)` is that tenant's effective config. A user whose
    backfill fails is left pending for the next run (the error is logged, not raised), so one
    user cannot stop the others. With a `shard`, only its users (other workers take the rest)."""
    if not deps.has_model:
        raise ModelRequired("a backfill needs a model (ANTHROPIC_API_KEY or Bedrock)")
    results = []
    for tenant, user_id in deps.episodes.pending_users():
        if shard is not None and not shard.owns(tenant, user_id):
            continue
        try:
            results.append(
                backfill_user(tenant, user_id, BackfillRequest(), settings_for(tenant), deps)
            )
        except MemwriteError:
            _log.exception("backfill of one user failed; its episodes stay pending")
    return results
