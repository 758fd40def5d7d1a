"""The batch lane (docs/design.md §10): pending episodes distilled through the provider's batch
API at half price (`pipeline.backfill.mode = batch`) instead of live calls.

A round (`run_batch_round`: the scheduled backfill, `memwrite serve`'s batch worker, `memwrite
backfill`) first polls every open batch, then submits what is pending:

- **submit**: each pending user's episodes, grouped as a live backfill groups them
  (`extraction_batches`), give the exact requests a live extraction of that group sends
  (`memwrite.extract.requests.batch_prompts`: the same prompt, context and model), each with a
  content-addressed `custom_id`. One batch per model, up to `max_batch_requests` requests;
  fewer than the provider's minimum wait for a later round. Once the provider has the batch,
  its episodes go `pending -> in_batch` (with the batch id). A crash between the two leaves
  them pending: submitted again later, paid twice at worst, never lost.
- **apply**: an ended batch's answers are the model of a replay of the same stages a live
  backfill runs (`distil_episodes`): the extract stage renders the same prompts and gets each
  answer by its id (`BatchAnswers`), and every later stage runs as it does live. Each episode
  ends `extracted`, or `pending` again when its request errored, expired, was canceled or
  answered malformed (the model's answer is asked for once, as a live call retries once).
  A batch that failed, expired or was stopped as a whole puts all its episodes back to
  pending. Then the batch is closed. Several workers may apply the ended batches at once,
  each its shard of the users (`UserShard`): a batch is closed by the one that finds none of
  its episodes left in it, and one of them submits.

Applying is idempotent: only episodes still `in_batch` in that batch are applied, each user's
run has a trace id derived from the batch (so a re-run after a crash is recognised by persist),
and memory ids are content-addressed: a result applied twice changes nothing.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel

from memwrite.backfill.ports import (
    BatchAnswer,
    BatchRequest,
    BatchState,
    EpisodeBatches,
    ModelBatches,
)
from memwrite.backfill.run import (
    BackfillDeps,
    BackfillRequest,
    distil_episodes,
    extraction_batches,
    open_trace,
    pending_episodes,
)
from memwrite.backfill.shard import UserShard
from memwrite.config.settings import PipelineConfig
from memwrite.costs.usage import report_usage
from memwrite.errors import LlmUnavailable, MalformedLlmOutput, MemwriteError, ModelRequired
from memwrite.extract.requests import batch_prompts
from memwrite.ids import content_hash
from memwrite.model_ports import LlmCall
from memwrite.ports import MetricsSink, SessionLog
from memwrite.prompts import PromptMessage, RenderedPrompt
from memwrite.records.episode import Episode, EpisodeStatus

__all__ = [
    "BatchAnswers",
    "BatchDeps",
    "BatchRound",
    "apply_batch",
    "request_id",
    "run_batch_round",
    "submit_pending",
]

_log = logging.getLogger(__name__)
METRICS_STAGE = "backfill"
_EXTRACT = "extract"  # the stage whose model the answers replace


def request_id(model: str, prompt: RenderedPrompt) -> str:
    """A request's `custom_id`: the hash of everything the model is asked (32 hex digits,
    valid for both providers), so an answer finds its request again at apply time."""
    messages = json.dumps(prompt.messages, ensure_ascii=False, sort_keys=True)
    return content_hash("extract", model, prompt.system, messages)


class BatchAnswers:
    """`ExtractionLlm` over an ended batch's answers, for one extraction batch: each request
    is answered once (a live call's retry of a malformed answer finds none, as a live call
    that keeps failing does), and a request without an answer is `LlmUnavailable`, so the
    extract stage defers its turns and their episodes go back to pending."""

    def __init__(self, answers: dict[str, BatchAnswer]) -> None:
        self._answers = answers
        self._asked: set[str] = set()

    def extract(self, system: str, messages: Sequence[PromptMessage], model: str) -> LlmCall:
        key = request_id(model, RenderedPrompt(system, list(messages)))
        answer = self._answers.get(key)
        if answer is None or key in self._asked:
            raise LlmUnavailable("no batch answer to this request")
        self._asked.add(key)
        if answer.call is not None:
            report_usage(answer.call.usage)
            return answer.call
        if answer.usage is not None and answer.usage.malformed:
            report_usage(answer.usage)
            raise MalformedLlmOutput(f"batch answer {key} malformed", answer.usage)
        raise LlmUnavailable(f"batch request {key}: {answer.error or 'no result'}")

    def budget_wait_s(self, prompt_chars: int, model: str, within_s: float | None = None) -> float:
        return 0.0  # answered already: nothing left to charge


@dataclass
class BatchDeps:
    backfill: BackfillDeps
    batches: ModelBatches | None  # None: no model configured (a round refuses)
    store: EpisodeBatches
    session_log: SessionLog  # the context a live extraction reads (`batch_prompts`)
    metrics: MetricsSink
    max_requests: int  # per submitted batch (`backfill.max_batch_requests`)
    clock: Callable[[], float] = field(default=time.time)


class BatchRound(BaseModel):
    """What one round did, and how many episodes are in a batch after it."""

    applied_batches: list[str] = []
    extracted: int = 0  # episodes now `extracted`
    returned_to_pending: int = 0  # errored, expired, canceled, malformed, or a failed batch
    memory_ids: list[str] = []
    trace_ids: list[str] = []
    submitted_batches: list[str] = []
    submitted_episodes: int = 0
    waiting_episodes: int = 0  # pending, below the provider's minimum batch: next round
    episodes_in_batches: int = 0
    remaining_batches: int = 0  # ended, not applied: the round's time budget ran out

    def as_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


@dataclass
class _Pile:
    """The requests of one model on their way into one batch, with their episodes."""

    requests: dict[str, BatchRequest] = field(default_factory=dict)
    episodes: list[Episode] = field(default_factory=list)


def _requests_of(
    group: list[Episode], config: PipelineConfig, deps: BatchDeps
) -> list[BatchRequest]:
    model = config.extract.model
    turns = [episode.turn for episode in group]
    prompts = batch_prompts(turns, config.extract, deps.session_log, deps.clock())
    return [BatchRequest(request_id(model, prompt), model, prompt) for prompt in prompts]


def _provider(deps: BatchDeps) -> ModelBatches:
    if deps.batches is None or not deps.backfill.has_model:
        raise ModelRequired("a batch backfill needs a model (ANTHROPIC_API_KEY or Bedrock)")
    return deps.batches


def _submit(model: str, pile: _Pile, deps: BatchDeps, done: BatchRound) -> None:
    provider = _provider(deps)
    if len(pile.requests) < provider.min_requests:
        done.waiting_episodes += len(pile.episodes)
        return
    batch_id = provider.submit(model, list(pile.requests.values()))
    marked = deps.store.add_to_batch(batch_id, pile.episodes)
    done.submitted_batches.append(batch_id)
    done.submitted_episodes += len(marked)
    deps.metrics.event(METRICS_STAGE, "batch.submitted_requests", len(pile.requests))
    deps.metrics.event(METRICS_STAGE, "batch.submitted_episodes", len(marked))


def submit_pending(
    settings_for: Callable[[str], PipelineConfig], deps: BatchDeps, done: BatchRound
) -> None:
    """Every pending episode of every tenant into batches (one per model and
    `max_requests`), recorded on `done`."""
    piles: dict[str, _Pile] = {}
    for tenant, user_id in deps.backfill.episodes.pending_users():
        config = settings_for(tenant)
        pending = pending_episodes(tenant, user_id, BackfillRequest(), deps.backfill)
        for group in extraction_batches(pending, config.extract.coalesce_window_s):
            requests = _requests_of(group, config, deps)
            model = config.extract.model
            pile = piles.setdefault(model, _Pile())
            if pile.requests and len(pile.requests) + len(requests) > deps.max_requests:
                _submit(model, pile, deps, done)
                pile = piles[model] = _Pile()
            pile.requests.update((request.custom_id, request) for request in requests)
            pile.episodes.extend(group)
    for model, pile in piles.items():
        if pile.episodes:
            _submit(model, pile, deps, done)


def _by_user(episodes: Iterable[Episode]) -> dict[tuple[str, str], list[Episode]]:
    users: dict[tuple[str, str], list[Episode]] = {}
    for episode in sorted(episodes, key=lambda e: (e.tenant, e.user_id, e.sort_key)):
        users.setdefault((episode.tenant, episode.user_id), []).append(episode)
    return users


def _back_to_pending(episodes: Iterable[Episode]) -> list[Episode]:
    return [
        episode.model_copy(update={"status": EpisodeStatus.PENDING, "batch_id": None})
        for episode in episodes
    ]


def _with_answers(deps: BackfillDeps, answers: dict[str, BatchAnswer]) -> Callable[[str], Any]:
    """The backfill's stage deps, the extract stage's model replaced by one group's answers."""

    def stage_deps(name: str) -> Any:
        found = deps.stage_deps(name)
        if name != _EXTRACT:
            return found
        return replace(found, llm=BatchAnswers(answers))  # `ExtractDeps.llm`

    return stage_deps


def apply_batch(
    batch_id: str,
    settings_for: Callable[[str], PipelineConfig],
    deps: BatchDeps,
    done: BatchRound,
    state: BatchState | None = None,
    *,
    shard: UserShard | None = None,
) -> bool:
    """Apply the batch if it has ended (or failed), then close it; False while it is in
    progress. What it did is recorded on `done`. `state`: as the round's poll found it (None:
    asked here). With a `shard`, only its users' episodes are applied, and the batch is
    closed only when no episode is left in it (the other shards' workers have applied theirs)."""
    provider = _provider(deps)
    state = state or provider.state(batch_id)
    if state is BatchState.IN_PROGRESS:
        return False
    episodes = deps.store.batch_episodes(batch_id)
    if shard is not None:
        episodes = [e for e in episodes if shard.owns(e.tenant, e.user_id)]
    if state is BatchState.FAILED:
        back = _back_to_pending(episodes)
        deps.backfill.episodes.update_episodes(back)
        done.returned_to_pending += len(back)
    elif episodes:
        answers = {answer.custom_id: answer for answer in provider.answers(batch_id)}
        for (tenant, _), mine in _by_user(episodes).items():
            config = settings_for(tenant)
            _apply_user(batch_id, mine, answers=answers, config=config, deps=deps, done=done)
    if shard is not None and deps.store.batch_episodes(batch_id):
        return True  # another shard's users are still in it: their worker closes it
    deps.store.close_batch(batch_id)
    done.applied_batches.append(batch_id)
    deps.metrics.event(METRICS_STAGE, f"batch.{state.value}")
    return True


def _apply_user(
    batch_id: str,
    episodes: list[Episode],
    *,
    answers: dict[str, BatchAnswer],
    config: PipelineConfig,
    deps: BatchDeps,
    done: BatchRound,
) -> None:
    """One user's episodes of the batch (in observation order) through the stages."""
    tenant, user_id = episodes[0].tenant, episodes[0].user_id
    # Derived from the batch: a re-run after a crash writes under the same trace.
    trace_id = content_hash("batch", tenant, user_id, batch_id)
    if deps.backfill.ledger.get_trace(tenant, trace_id) is None:
        open_trace(trace_id, episodes, deps.backfill)
    done.trace_ids.append(trace_id)
    for group in extraction_batches(episodes, config.extract.coalesce_window_s):
        stage_deps = _with_answers(deps.backfill, answers)
        # Written there: `extracted`, or `pending` again where its request got no answer.
        distilled = distil_episodes(group, trace_id, config, deps.backfill, stage_deps)
        done.extracted += len(distilled.finished)
        done.returned_to_pending += len(distilled.deferred)
        done.memory_ids.extend(distilled.memory_ids)
    deps.metrics.event(METRICS_STAGE, "batch.applied_episodes", len(episodes))


def run_batch_round(
    settings_for: Callable[[str], PipelineConfig],
    deps: BatchDeps,
    *,
    budget_secs: float | None = None,
    shard: UserShard | None = None,
    submit: bool = True,
) -> BatchRound:
    """Poll every open batch (applying the ended ones), then submit what is pending. With
    `budget_secs`, no batch is applied or submitted once that many seconds are spent (the
    rest waits for the next round). A batch that cannot be read now stays open (logged).
    With a `shard`, only its users' episodes are applied (`apply_batch`); `submit` False
    leaves the submitting to another worker's round."""
    _provider(deps)
    started = time.perf_counter()
    done = BatchRound()

    def out_of_time() -> bool:
        return budget_secs is not None and time.perf_counter() - started >= budget_secs

    open_batches = deps.store.open_batches()
    states: dict[str, BatchState] = {}
    if open_batches:
        try:
            # Every open batch's state at once (one request where the provider lists them).
            states = _provider(deps).states(open_batches)
        except MemwriteError:
            _log.exception("open batches not polled this round; they stay open")
    for batch_id, state in states.items():
        if out_of_time():
            done.remaining_batches += 1
            continue
        try:
            apply_batch(batch_id, settings_for, deps, done, state, shard=shard)
        except MemwriteError:
            _log.exception("batch %s not applied this round; it stays open", batch_id)
    if submit and not out_of_time():
        submit_pending(settings_for, deps, done)
    done.memory_ids = sorted(set(done.memory_ids))
    done.episodes_in_batches = deps.store.episodes_in_batches()
    deps.metrics.event(METRICS_STAGE, "episodes_in_batches", done.episodes_in_batches)
    return done
