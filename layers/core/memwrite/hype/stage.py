"""Stage 7, HyPE: make changed memories searchable, then mark their outbox rows done.

For each outbox row of a batch (a batch of the outbox's DynamoDB stream on AWS, of its pending
rows in the local runner) the stage reads the memory as it is *now* in the store, so rows may
arrive late, twice or out of order and the index still converges on the store:

- gone (erased, rolled back), superseded, retracted or past its user expiry (`expires_on`,
  or announced as such by the expiry sweep, `memwrite.expiry`): its document is deleted (also
  when it is gone by the time the document is written: an erasure racing the job);
- otherwise `hype_questions` questions are generated (the extractor's own search questions
  when it wrote enough; else the `QuestionGenerator`: a model, or templates offline), the text
  and questions are embedded and the document is written with its vectors (with its text alone
  when its questions or vectors failed: BM25-searchable, the row failed). Tasks stay BM25-only
  (docs/design.md §9).

The batch's rows share one embedder call, one index write (`MemoryIndex.write`), one span
write and one mark-done (a COMMIT, a Bedrock or OpenSearch round trip each, rather than one
per row); each row still succeeds or fails on its own (`run_batch`).

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

The rows are marked done last: a crash, an unpublished event or a refused hand-off anywhere
before leaves a row pending, and the retry redoes the whole job with the same result (writes
replace by memory id, deletes of absent documents are no-ops, the event and its deliveries
keep their ids: receivers dedupe).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Generic, TypeVar

import numpy as np
import numpy.typing as npt

from memwrite.claims.candidate import MemoryType, Tier
from memwrite.config.settings import PipelineConfig
from memwrite.config.tenant_overrides import Webhook
from memwrite.costs.usage import LlmUsage, metered
from memwrite.errors import IndexUnavailable, MemwriteError
from memwrite.feed import deliveries_for
from memwrite.index import DocKind, DocRemoval, IndexWrite, MemoryDoc
from memwrite.metering import UsageCounts, count_usage, metering_for
from memwrite.model_ports import Embedder, GeneratedQuestions, QuestionGenerator
from memwrite.models import SpanResult, StageSpan
from memwrite.payloads import IndexAction, IndexedChange, OutboxChange
from memwrite.ports import (
    EpisodeStore,
    EventPublisher,
    MemoryIndex,
    MemoryStore,
    MetricsSink,
    Outbox,
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
    from memwrite.records.episode import Episode
    from memwrite.records.store import VersionedMemory

__all__ = ["STAGE", "HypeDeps", "Scope", "document_of", "run", "run_batch"]

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


Scope = Callable[[str], AbstractContextManager[object]]
"""A tenant's unit of work, around the model calls and embeddings made for it."""


def _unscoped(_tenant: str) -> AbstractContextManager[object]:
    return nullcontext()


def run(payload: OutboxChange, config: PipelineConfig, deps: HypeDeps) -> IndexedChange:
    """Index (or remove) the memory of one outbox row, then mark the row done: `run_batch` of
    one row, whose failure propagates."""
    (outcome,) = run_batch([payload], lambda _tenant: config, deps)
    if isinstance(outcome, Exception):
        raise outcome
    return outcome


def run_batch(
    changes: Sequence[OutboxChange],
    config_for: Callable[[str], PipelineConfig],
    deps: HypeDeps,
    scope: Scope = _unscoped,
) -> list[IndexedChange | Exception]:
    """Index (or remove) the memories of a batch of outbox rows, then mark the rows done.

    Each row's outcome, in order: what it did, or why it failed (its row stays pending, an
    error span on its trace for a `MemwriteError`). The rows share one embedder call, one
    index write, one span write and one mark-done; a step that fails as a whole is done again
    row by row, so only the rows that fail on their own fail. `scope(tenant)` wraps the work
    of each tenant's rows (the handler's: the model budget's caller, the usage metering).
    """
    started = time.perf_counter()
    rows = [_Row(change) for change in changes]
    work = [row for row in rows if not row.erasure]
    by_tenant: dict[str, list[_Row]] = {}
    for row in work:
        by_tenant.setdefault(row.change.tenant, []).append(row)
    reads = _Reads(work, deps)
    for tenant, group in by_tenant.items():
        try:
            config = config_for(tenant)
            with scope(tenant):
                for row in group:
                    _plan(row, reads, config, deps)
        except Exception as exc:  # the tenant's settings could not be read: its rows fail
            for row in group:
                row.error = row.error or exc
    _embed(work, deps, scope)
    _isolated([row for row in work if row.write is not None], lambda rs: _write(rs, deps))
    _erased_meanwhile(work, deps)
    _record(work, deps, started)
    for row in rows:
        if row.error is None:
            _announce(row, deps)
    # Done last: a crash or an undelivered event before this leaves the row pending.
    done = [row for row in rows if row.error is None]
    _isolated(done, lambda rs: deps.outbox.mark_done([row.change for row in rs]))
    return [row.error if row.error is not None else row.outcome for row in rows]


@dataclass(frozen=True)
class _FeedChange:
    """A memory row's change for the feed: the memory as it is now (None: gone)."""

    memory: MemoryUnit | None


@dataclass
class _Row:
    """One outbox row of a batch, as far as it got."""

    change: OutboxChange
    result: IndexedChange | None = None
    feed: _FeedChange | None = None  # its change for the feed; None: an episode's row
    write: IndexWrite | None = None  # a memory's text alone until its vectors are added
    texts: list[str] = field(default_factory=list)  # to embed: content first, then questions
    calls: tuple[LlmUsage, ...] = ()  # the model calls its work paid for
    span: StageSpan | None = None
    error: Exception | None = None

    @property
    def erasure(self) -> bool:
        return is_erasure_row(self.change.memory_id)

    @property
    def episode(self) -> str | None:
        """The turn id of an episode's row."""
        return episode_of_doc_id(self.change.memory_id)

    @property
    def outcome(self) -> IndexedChange:
        if self.result is None:  # an erasure's row: its user's documents went with them
            return IndexedChange(memory_id=self.change.memory_id, action=IndexAction.REMOVED)
        return self.result


def _isolated(rows: list[_Row], step: Callable[[list[_Row]], None]) -> None:
    """`step` over `rows` at once; when that fails, over each row alone, so that only the rows
    that fail on their own fail (each step may be redone: writes replace by id, removals and
    marks are idempotent). A row keeps the first error it met."""
    if not rows:
        return
    try:
        step(rows)
        return
    except Exception as exc:
        if len(rows) == 1:
            rows[0].error = rows[0].error or exc
            return
    for row in rows:
        try:
            step([row])
        except Exception as exc:
            row.error = row.error or exc


_User = tuple[str, str]  # (tenant, user_id)
T = TypeVar("T")


class _ReadOnce(Generic[T]):
    """One kind of stored item of a batch's rows, read once per user: the ids wanted of each
    user, and what a read of all of them found (`read(tenant, user_id, ids)`)."""

    def __init__(self, read: Callable[[str, str, list[str]], dict[str, T]]) -> None:
        self._read = read
        self.wanted: dict[_User, dict[str, None]] = {}
        self._found: dict[_User, dict[str, T]] = {}

    def get(self, user: _User, item_id: str) -> T | None:
        wanted = self.wanted.setdefault(user, {})
        if item_id not in wanted or user not in self._found:
            wanted[item_id] = None
            self._found[user] = self._read(*user, list(wanted))
        return self._found[user].get(item_id)


class _Reads:
    """The stored memories and episodes of a batch's rows, read once per user and kind: the
    first row of a user that asks reads them for all of the user's rows (a failed read is
    tried again by the user's next row, so each row meets its own error)."""

    def __init__(self, rows: Sequence[_Row], deps: HypeDeps) -> None:
        self._memories = _ReadOnce(deps.store.get_memories)
        episodes = deps.episodes
        self._episodes = None if episodes is None else _ReadOnce(episodes.get_episodes)
        for row in rows:
            user = (row.change.tenant, row.change.user_id)
            if row.episode is not None:
                if self._episodes is not None:
                    self._episodes.wanted.setdefault(user, {})[row.episode] = None
            else:
                deleted = deleted_memory_of(row.change.memory_id)
                memory_id = deleted[0] if deleted is not None else row.change.memory_id
                self._memories.wanted.setdefault(user, {})[memory_id] = None

    def memory(self, change: OutboxChange, memory_id: str) -> VersionedMemory | None:
        return self._memories.get((change.tenant, change.user_id), memory_id)

    def episode(self, change: OutboxChange, turn_id: str) -> Episode | None:
        if self._episodes is None:
            return None
        return self._episodes.get((change.tenant, change.user_id), turn_id)


def _plan(row: _Row, reads: _Reads, config: PipelineConfig, deps: HypeDeps) -> None:
    """The row's reads and questions: what it writes and embeds. A failure is the row's (a
    memory whose questions failed still has its text written, searchable by BM25)."""
    with metered() as paid:
        try:
            _plan_row(row, reads, config, deps)
        except Exception as exc:
            row.error = exc
    row.calls = tuple(paid)  # a failure's calls were paid for too


def _plan_row(row: _Row, reads: _Reads, config: PipelineConfig, deps: HypeDeps) -> None:
    change = row.change
    removal = DocRemoval(change.tenant, change.user_id, change.memory_id)
    removed = IndexedChange(memory_id=change.memory_id, action=IndexAction.REMOVED)
    if row.episode is not None:
        # An episode's document: its text (BM25) and content vector, or nothing once gone.
        episode = reads.episode(change, row.episode)
        if episode is None or episode.status_at(time.time()) is EpisodeStatus.EXPIRED:
            row.write, row.result = removal, removed
            return
        # Its vector is its own words; its BM25 text begins with the turn it replies to.
        row.texts = [episode.turn.text]
        row.result = IndexedChange(memory_id=change.memory_id, action=IndexAction.INDEXED)
        row.write = MemoryDoc(
            memory_id=change.memory_id,
            tenant=change.tenant,
            user_id=change.user_id,
            text=search_text(episode.turn),
            # Memory fields an episode does not have: never read (queries filter by kind).
            type=MemoryType.EVENT,
            topic="episode",
            tier=Tier.CANDIDATE,
            confidence=0.0,
            kind=DocKind.EPISODE,
            expires_at=float(episode.expires_at),
        )
        return
    deleted = deleted_memory_of(change.memory_id)
    if deleted is not None:
        memory_id = deleted[0]
        if reads.memory(change, memory_id) is None:
            row.write = DocRemoval(change.tenant, change.user_id, memory_id)
        row.result = IndexedChange(memory_id=memory_id, action=IndexAction.REMOVED)
        row.feed = _FeedChange(None)
        return
    current = reads.memory(change, change.memory_id)
    memory = current.memory if current is not None else None
    row.feed = _FeedChange(memory)
    if memory is None or not memory.active or memory.expiry_announced or memory.expired(_now()):
        row.write, row.result = removal, removed
        return
    row.write = document_of(memory)
    row.result = IndexedChange(memory_id=memory.memory_id, action=IndexAction.INDEXED)
    if memory.type is not MemoryType.TASK:
        generated = _questions(memory, config.search.hype_questions, deps.questions)
        row.texts = [memory.text, *generated.questions]
        row.result = row.result.model_copy(update={"questions": generated.questions})


def _embed(work: list[_Row], deps: HypeDeps, scope: Scope) -> None:
    """Every text of the batch in one embedder call; each row's vectors into its document.
    A row whose texts cannot be embedded fails (a memory's text is still written)."""
    wanted = [row for row in work if row.error is None and row.texts]

    def embed(rows: list[_Row]) -> None:
        # One call for the batch's tenants: each tenant's texts are counted in its own scope
        # below, not on a unit of work that may be open around this call.
        with metering_for("", None):
            vectors = deps.embedder.embed([text for row in rows for text in row.texts])
        at = 0
        for row in rows:
            row.write = _with_vectors(row, vectors[at : at + len(row.texts)])
            at += len(row.texts)

    _isolated(wanted, embed)
    embedded: dict[str, int] = {}
    for row in wanted:
        if row.error is None:
            embedded[row.change.tenant] = embedded.get(row.change.tenant, 0) + len(row.texts)
        elif row.episode is not None:
            row.write = None  # an episode without its vector is not written
    for tenant, count in embedded.items():
        with scope(tenant):
            count_usage(UsageCounts(embeddings=count))


def _with_vectors(row: _Row, vectors: npt.NDArray[np.float32]) -> MemoryDoc:
    """The row's document with its content vector (first) and question vectors; a zero vector
    (a text without words) is left out, as it is similar to nothing."""
    assert isinstance(row.write, MemoryDoc)  # only documents have texts to embed
    content = vectors[0] if np.any(vectors[0]) else None
    questions = tuple(vector for vector in vectors[1:] if np.any(vector))
    return replace(row.write, vector=content, question_vectors=questions)


def _write(rows: list[_Row], deps: HypeDeps) -> None:
    """The rows' writes in one index request; a refused one fails its row."""
    refused = deps.index.write([row.write for row in rows if row.write is not None])  # all
    at = _now()
    for position, row in enumerate(rows):
        if position in refused:
            why = refused[position]
            row.error = row.error or IndexUnavailable(
                f"index refused {row.change.memory_id}: {why}"
            )
        elif row.result is not None and row.result.action is IndexAction.INDEXED:
            embedded = isinstance(row.write, MemoryDoc) and row.write.vector is not None
            stamps = {"text_indexed_at": at} | ({"vectors_indexed_at": at} if embedded else {})
            row.result = row.result.model_copy(update=stamps)


def _erased_meanwhile(work: list[_Row], deps: HypeDeps) -> None:
    """Documents written for what was erased after it was read: the erasure may have cleared
    the index before the write, so they go again. (Still there now: the erasure deletes the
    memory after this read and the index after that, taking the document along.)"""
    gone: list[_Row] = []
    written = [row for row in work if row.error is None and isinstance(row.write, MemoryDoc)]
    reads = _Reads(written, deps)  # read anew: after the write
    for row in written:
        change = row.change
        try:
            if row.episode is not None:
                there = reads.episode(change, row.episode) is not None
            else:
                there = reads.memory(change, change.memory_id) is not None
        except Exception as exc:
            row.error = exc
            continue
        if not there:
            row.write = DocRemoval(change.tenant, change.user_id, change.memory_id)
            if row.episode is None:
                row.result = IndexedChange(memory_id=change.memory_id, action=IndexAction.REMOVED)
                row.feed = _FeedChange(None)
            gone.append(row)
    _isolated(gone, lambda rows: _write(rows, deps))


def _record(work: list[_Row], deps: HypeDeps, started: float) -> None:
    """Each row's span joins the trace that wrote its change (one per row: a retry's replaces
    the failed attempt's, adding what that attempt's calls cost), all in one write; then its
    metrics. A row failing other than with a `MemwriteError` gets no span (a bug, not a
    reason). Latency: from the batch's start, as the row waited for the batch."""
    latency_ms = (time.perf_counter() - started) * 1000
    for row in work:
        change, reason = row.change, None
        if row.error is None:
            removed = row.outcome.action is IndexAction.REMOVED
            # The trace shows the memory indexed (pass) or taken out of every query (transform).
            result = SpanResult.TRANSFORM if removed else SpanResult.PASS
        elif isinstance(row.error, MemwriteError):
            result, reason = SpanResult.ERROR, IndexingError(error=type(row.error).__name__)
        else:
            continue
        if change.trace_id is not None:
            row.span = make_span(
                trace_id=change.trace_id,
                tenant=change.tenant,
                user_id=change.user_id,
                stage=STAGE,
                item_id=f"{change.memory_id}#{change.rev}",
                result=result,
                reason=reason,
                latency_ms=latency_ms,
                llm=usage_summary(row.calls),
            )
        if reason is not None:
            deps.metrics.count(STAGE, result.value, reason)
        deps.metrics.timing(STAGE, latency_ms)
        if row.error is None:
            deps.metrics.count(STAGE, row.outcome.action.value, None)
        deps.metrics.llm_usage(STAGE, row.calls)
    spanned = [row for row in work if row.span is not None]
    _isolated(spanned, lambda rows: store_spans([row.span for row in rows if row.span], deps.spans))


def _announce(row: _Row, deps: HypeDeps) -> None:
    """The row's event on the change feed (none for an episode's row); a failure is the row's."""
    change = row.change
    try:
        if row.erasure:
            _send(user_erased_event(change), change, deps)
        elif row.feed is not None and deleted_memory_of(change.memory_id) is not None:
            _send(memory_deleted_event(change), change, deps)
        elif row.feed is not None:
            _send(event_for_change(change, row.feed.memory, _now()), change, deps)
    except Exception as exc:
        row.error = exc


def _send(event: ChangeEvent, change: OutboxChange, deps: HypeDeps) -> None:
    """The row's event onto the bus, then its deliveries to the webhook queue (no HTTP call
    here: the delivery lane makes them); a failure raises (the row stays pending)."""
    if deps.publisher is not None:
        deps.publisher.publish([event])  # a failed entry raises: the row stays pending
    deliveries = deliveries_for(event, change.rev, deps.webhooks_for(change.tenant))
    if deliveries:
        deps.webhook_queue.enqueue(deliveries)  # a refusal raises: the row stays pending
        deps.metrics.count(STAGE, "webhook_queued", None, len(deliveries))


def _now() -> datetime:
    return datetime.now(UTC)
