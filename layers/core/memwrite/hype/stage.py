"""Stage 7, HyPE: make one changed memory searchable, then mark its outbox row done.

For each outbox row (delivered by the outbox's DynamoDB stream on AWS, by the local runner
offline) the stage reads the memory as it is *now* in the store, so rows may arrive late, twice
or out of order and the index still converges on the store:

- gone (erased, rolled back), superseded, retracted or past its user expiry (`expires_on`,
  or announced as such by the expiry sweep, `memwrite.expiry`): its document is deleted (also
  when it is gone by the time the document is written: an erasure racing the job);
- otherwise its text is indexed first (BM25-searchable at once), then `hype_questions`
  questions are generated (the extractor's own search questions when it wrote enough; else the
  `QuestionGenerator`: a model, or templates offline), the text and questions are embedded and
  the document is upserted again with its vectors. Tasks stay BM25-only (docs/design.md §9).

An episode's row (`episode:<turn id>`, `memwrite.records.episode`) indexes the kept turn as a
document of kind `episode`: its BM25 text the end of the turn it replies to then its own words
(`memwrite.records.episode.search_text`), its content vector its own words (no questions: they are
the user's own words), or removes it when the episode is gone (erased, expired).

A deletion's row (`memwrite.records.change_events.deleted_memory_of`, `DELETE
/v1/memories/{memory_id}`) deletes the memory's document unless the memory is back in the store
(stored again since: its own rows index it) and sends `memory.deleted`; its span joins the
trace that stored the memory.

An erasure's row (`memwrite.records.change_events.is_erasure_row`) indexes nothing: its
`user.erased` goes out on the feed as below (no trace to hold the attempts' spans: the user's went
with them), then the row is deleted.

A memory's row then goes out on the change feed (`memwrite.feed`): its event onto the
environment's EventBridge bus when there is one (`HypeDeps.publisher`; a rejected entry raises
`EventsUnpublished`, transient), then one delivery per webhook of the tenant subscribed to the
event's type is handed to the webhook queue (`memwrite.feed.delivery`: the delivery lane makes
the HTTP calls and their retries, never this stage; a refused hand-off is transient too).

The row is marked done last: a crash, an unpublished event or a refused hand-off anywhere
before leaves it pending, and the retry redoes the whole job with the same result (upserts
replace by memory id, deletes of absent documents are no-ops, the event and its deliveries
keep their ids: receivers dedupe).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import numpy as np

from memwrite.claims.candidate import MemoryType, Tier
from memwrite.config.settings import PipelineConfig, Webhook
from memwrite.costs.usage import LlmUsage, metered
from memwrite.errors import MemwriteError
from memwrite.feed import deliveries_for
from memwrite.index import DocKind, MemoryDoc, Vector
from memwrite.models import SpanResult
from memwrite.payloads import IndexAction, IndexedChange, OutboxChange
from memwrite.ports import (
    Embedder,
    EpisodeStore,
    EventPublisher,
    GeneratedQuestions,
    MemoryIndex,
    MemoryStore,
    MetricsSink,
    Outbox,
    QuestionGenerator,
    SpanStore,
    WebhookQueue,
)
from memwrite.reasons import IndexingError
from memwrite.records.change_events import (
    ChangeEvent,
    deleted_memory_of,
    event_for_change,
    is_erasure_row,
    memory_deleted_event,
    user_erased_event,
)
from memwrite.records.episode import EpisodeStatus, episode_of_doc_id, search_text
from memwrite.records.memory import MemoryUnit
from memwrite.spans import make_span, store_spans, usage_summary

if TYPE_CHECKING:
    from memwrite.ports import StageAdapters

__all__ = ["STAGE", "HypeDeps", "document_of", "run"]

STAGE = "hype"


@dataclass
class HypeDeps:
    store: MemoryStore
    index: MemoryIndex
    embedder: Embedder
    questions: QuestionGenerator
    outbox: Outbox
    spans: SpanStore
    metrics: MetricsSink
    # The change feed: the tenant's webhooks, and the delivery lane's queue they are handed to.
    webhooks_for: Callable[[str], Sequence[Webhook]]
    webhook_queue: WebhookQueue
    episodes: EpisodeStore | None = None
    # The environment's event bus (None: none, e.g. locally): every memory row's event.
    publisher: EventPublisher | None = None


def _index_episode(change: OutboxChange, turn_id: str, deps: HypeDeps) -> IndexedChange:
    """An episode's document: its text (BM25) and content vector, or nothing once it is gone."""
    found = (
        deps.episodes.get_episodes(change.tenant, change.user_id, [turn_id])
        if deps.episodes is not None
        else {}
    )
    episode = found.get(turn_id)
    if episode is None or episode.status_at(time.time()) is EpisodeStatus.EXPIRED:
        deps.index.delete(change.tenant, change.user_id, change.memory_id)
        return IndexedChange(memory_id=change.memory_id, action=IndexAction.REMOVED)
    # Its vector is its own words; its BM25 text begins with the turn it replies to.
    vector = deps.embedder.embed([episode.turn.text])[0]
    deps.index.upsert(
        MemoryDoc(
            memory_id=change.memory_id,
            tenant=change.tenant,
            user_id=change.user_id,
            text=search_text(episode.turn),
            # Memory fields an episode does not have: never read (queries filter by kind).
            type=MemoryType.EVENT,
            topic="episode",
            tier=Tier.CANDIDATE,
            confidence=0.0,
            vector=vector if np.any(vector) else None,
            kind=DocKind.EPISODE,
            expires_at=float(episode.expires_at),
        )
    )
    if not deps.episodes or not deps.episodes.get_episodes(
        change.tenant, change.user_id, [turn_id]
    ):
        deps.index.delete(change.tenant, change.user_id, change.memory_id)  # erased meanwhile
    at = _now()
    return IndexedChange(
        memory_id=change.memory_id,
        action=IndexAction.INDEXED,
        text_indexed_at=at,
        vectors_indexed_at=at,
    )


def build_deps(adapters: StageAdapters) -> HypeDeps:

    return HypeDeps(
        store=adapters.memory_store(),
        index=adapters.search_index(),
        embedder=adapters.embedder(),
        questions=adapters.questions(),
        outbox=adapters.outbox(),
        spans=adapters.spans,
        metrics=adapters.metrics,
        webhooks_for=adapters.tenant_webhooks().webhooks_for,
        webhook_queue=adapters.webhook_queue(),
        episodes=adapters.episodes(),
        publisher=adapters.event_publisher(),
    )


def document_of(memory: MemoryUnit) -> MemoryDoc:
    """The memory's text document, without vectors yet."""
    return MemoryDoc(
        memory_id=memory.memory_id,
        tenant=memory.tenant,
        user_id=memory.user_id,
        text=memory.text,
        type=memory.type,
        topic=memory.topic,
        tier=memory.tier,
        confidence=memory.confidence,
    )


def _questions(memory: MemoryUnit, count: int, generator: QuestionGenerator) -> GeneratedQuestions:
    # The LLM extractor already wrote search questions for its memories: no second call.
    if len(memory.search_questions) >= count:
        return GeneratedQuestions(memory.search_questions[:count])
    return generator.questions_for(memory, count)


def _with_vectors(doc: MemoryDoc, vectors: Sequence[Vector]) -> MemoryDoc:
    """`doc` with its content vector (first) and question vectors; a zero vector (a text
    without words) is left out, as it is similar to nothing."""
    content = vectors[0] if np.any(vectors[0]) else None
    questions = tuple(row for row in vectors[1:] if np.any(row))
    return replace(doc, vector=content, question_vectors=questions)


def run(payload: OutboxChange, config: PipelineConfig, deps: HypeDeps) -> IndexedChange:
    """Index (or remove) the memory of one outbox row, then mark the row done; a failure
    leaves an error span on the trace (overwritten by the retry's) and propagates."""
    change = payload
    if is_erasure_row(change.memory_id):
        _send(user_erased_event(change), change, deps)
        deps.outbox.mark_done(change)
        return IndexedChange(memory_id=change.memory_id, action=IndexAction.REMOVED)
    started = time.perf_counter()
    try:
        with metered() as paid:
            result, calls, feed = _index(change, config, deps)
    except MemwriteError as exc:
        # Questions generated before the index or embedder failed were paid for all the same.
        error = IndexingError(error=type(exc).__name__)
        _record(change, deps, result=SpanResult.ERROR, reason=error, calls=paid, started=started)
        deps.metrics.llm_usage(STAGE, paid)
        raise
    # The trace shows the memory indexed (pass) or taken out of every query (transform).
    verdict = SpanResult.TRANSFORM if result.action is IndexAction.REMOVED else SpanResult.PASS
    _record(change, deps, result=verdict, reason=None, calls=calls, started=started)
    deps.metrics.count(STAGE, result.action.value, None)
    deps.metrics.llm_usage(STAGE, calls)
    if feed is not None and deleted_memory_of(change.memory_id) is not None:
        _send(memory_deleted_event(change), change, deps)
    elif feed is not None:
        _send(event_for_change(change, feed.memory, _now()), change, deps)
    # Done last: a crash or an undelivered event before this leaves the row pending.
    deps.outbox.mark_done(change)
    return result


def _send(event: ChangeEvent, change: OutboxChange, deps: HypeDeps) -> None:
    """The row's event onto the bus, then its deliveries to the webhook queue (no HTTP call
    here: the delivery lane makes them); a failure raises (the row stays pending)."""
    if deps.publisher is not None:
        deps.publisher.publish([event])  # a failed entry raises: the row stays pending
    deliveries = deliveries_for(event, change.rev, deps.webhooks_for(change.tenant))
    if deliveries:
        deps.webhook_queue.enqueue(deliveries)  # a refusal raises: the row stays pending
        deps.metrics.count(STAGE, "webhook_queued", None, len(deliveries))


@dataclass(frozen=True)
class _FeedChange:
    """A memory row's change for the feed: the memory as it is now (None: gone)."""

    memory: MemoryUnit | None


def _index(
    change: OutboxChange, config: PipelineConfig, deps: HypeDeps
) -> tuple[IndexedChange, tuple[LlmUsage, ...], _FeedChange | None]:
    """The row's work, the model calls its questions cost and its change for the feed (None:
    an episode's row, not a memory change)."""
    turn_id = episode_of_doc_id(change.memory_id)
    if turn_id is not None:
        return _index_episode(change, turn_id, deps), (), None
    deleted = deleted_memory_of(change.memory_id)
    if deleted is not None:
        memory_id = deleted[0]
        if not deps.store.get_memories(change.tenant, change.user_id, [memory_id]):
            deps.index.delete(change.tenant, change.user_id, memory_id)
        return IndexedChange(memory_id=memory_id, action=IndexAction.REMOVED), (), _FeedChange(None)
    stored = deps.store.get_memories(change.tenant, change.user_id, [change.memory_id])
    current = stored.get(change.memory_id)
    calls: tuple[LlmUsage, ...] = ()
    memory = current.memory if current is not None else None
    if memory is None or not memory.active or memory.expiry_announced or memory.expired(_now()):
        deps.index.delete(change.tenant, change.user_id, change.memory_id)
        result = IndexedChange(memory_id=change.memory_id, action=IndexAction.REMOVED)
    else:
        doc = document_of(memory)
        deps.index.upsert(doc)
        result = IndexedChange(
            memory_id=memory.memory_id, action=IndexAction.INDEXED, text_indexed_at=_now()
        )
        if memory.type is not MemoryType.TASK:
            generated = _questions(memory, config.search.hype_questions, deps.questions)
            questions, calls = generated.questions, generated.calls
            vectors = deps.embedder.embed([memory.text, *questions])
            deps.index.upsert(_with_vectors(doc, list(vectors)))
            result = result.model_copy(
                update={"questions": questions, "vectors_indexed_at": _now()}
            )
        if not deps.store.get_memories(change.tenant, change.user_id, [change.memory_id]):
            # Erased after the read above: the erasure may have cleared the index before the
            # upserts, so the document goes again. (Still there now: the erasure deletes the
            # memory after this read and the index after that, taking the document along.)
            deps.index.delete(change.tenant, change.user_id, change.memory_id)
            result = IndexedChange(memory_id=change.memory_id, action=IndexAction.REMOVED)
            memory = None
    return result, calls, _FeedChange(memory)


def _record(
    change: OutboxChange,
    deps: HypeDeps,
    *,
    result: SpanResult,
    reason: IndexingError | None,
    calls: Sequence[LlmUsage],
    started: float,
) -> None:
    """The row's span joins the trace that wrote the change (one per row: a retry's replaces
    the failed attempt's, adding what that attempt's calls cost)."""
    latency_ms = (time.perf_counter() - started) * 1000
    if change.trace_id is not None:
        span = make_span(
            trace_id=change.trace_id,
            tenant=change.tenant,
            user_id=change.user_id,
            stage=STAGE,
            item_id=f"{change.memory_id}#{change.rev}",
            result=result,
            reason=reason,
            latency_ms=latency_ms,
            llm=usage_summary(calls),
        )
        store_spans([span], deps.spans)
    if reason is not None:
        deps.metrics.count(STAGE, result.value, reason)
    deps.metrics.timing(STAGE, latency_ms)


def _now() -> datetime:
    return datetime.now(UTC)
