"""Ports: the Protocols the library needs from the outside world's stores, queues and
services; the models' and the embedder's are in `memwrite.model_ports`.

Adapters in `memwrite.adapters` implement them against DynamoDB, SQS, CloudWatch, Anthropic
and the embedded index (and in-memory stand-ins for tests); nothing above an adapter imports
boto3, anthropic or the index engines.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from memwrite.claims.entities import Entity, VersionedEntity
from memwrite.config.settings import Settings
from memwrite.config.tenant_overrides import TenantOverrides, Webhook
from memwrite.costs.usage import LlmUsage
from memwrite.index import (
    DEFAULT_FUSION,
    Fusion,
    IndexFilter,
    IndexHit,
    IndexWrite,
    MemoryDoc,
    Vector,
)
from memwrite.model_ports import (
    CandidateVerifier,
    DedupeJudge,
    Embedder,
    ExtractionLlm,
    QuestionGenerator,
    ResolveJudge,
)
from memwrite.models import LlmUsageSummary, QueuedTurn, StageSpan, TraceInput
from memwrite.payloads import OutboxChange
from memwrite.reasons import Reason
from memwrite.records.change_events import ChangeEvent, WebhookDelivery
from memwrite.records.episode import Episode, EpisodePage, EpisodeStatus
from memwrite.records.memory import MemoryUnit
from memwrite.records.store import Commit, FactRow, RollbackCommit, RollbackRecord, VersionedMemory
from memwrite.records.user_snapshot import RestoreUnit, SpilledExport, UserSnapshot

__all__ = [
    "ApiKeyRecord",
    "ApiKeyStore",
    "DeadLetter",
    "Delivery",
    "DueExpiry",
    "EnqueueResult",
    "EntityStore",
    "EpisodeStore",
    "EventPublisher",
    "ExpiryFinder",
    "ExportSpill",
    "MemoryIndex",
    "MemoryPage",
    "MemoryReader",
    "MemoryStore",
    "MetricsSink",
    "Outbox",
    "PipelineRunner",
    "PipelineStart",
    "RateStore",
    "SearchIndexSetup",
    "SessionLog",
    "SpanStore",
    "StageAdapters",
    "TenantSettingsStore",
    "TenantWebhooks",
    "TracePage",
    "TraceRecord",
    "TraceRollback",
    "TurnConsumer",
    "TurnLedger",
    "TurnQueue",
    "UserEraser",
    "UserErasure",
    "UserPortability",
    "WebhookMessage",
    "WebhookQueue",
]


class RateStore(Protocol):
    def claim_all(self, claims: Sequence[tuple[str, str, float]], window_secs: int) -> list[bool]:
        """Claim each (key, claimant, now), in order, for `window_secs`; False when another
        claimant holds the key unexpired. The same claimant (the same turn id, re-sent by a
        retrying client) may claim again. SQLite: one transaction."""


@dataclass(frozen=True)
class EnqueueResult:
    """Per-turn outcome of a batch send: ids that made it, and errors for those that did not."""

    sent: frozenset[str]
    failed: dict[str, str]


class TurnQueue(Protocol):
    def enqueue(self, turns: Sequence[QueuedTurn]) -> EnqueueResult:
        """Send each turn once: a turn already waiting in the queue is not queued again."""


@dataclass(frozen=True)
class Delivery:
    """One received message: the turn, the receipt that deletes it, and how often it came."""

    turn: QueuedTurn
    receipt: str
    receive_count: int


@dataclass(frozen=True)
class DeadLetter:
    turn: QueuedTurn
    error: str


class TurnConsumer(Protocol):
    """The consuming side of the work queue (SQS semantics): what the local runner drains (on
    AWS the Lambda event source mapping plays this part)."""

    def receive(self, max_messages: int, visibility_timeout_secs: int) -> list[Delivery]:
        """Up to `max_messages` visible messages, each hidden for the visibility timeout and
        then delivered again unless deleted. One user's messages come in the order they were
        enqueued, and none of them while another of that user is in flight (FIFO groups)."""

    def delete(self, deliveries: Sequence[Delivery]) -> None:
        """Done with these (each by the receipt of its latest delivery, as SQS requires)."""

    def release(self, deliveries: Sequence[Delivery], delay_secs: float = 0.0) -> None:
        """Visible again after `delay_secs` (0: now; a failed attempt, or a batch waiting for
        the model budget), when the next receive redelivers them."""

    def dead_letter(self, deliveries: Sequence[Delivery], error: str) -> None:
        """Out of the queue into the dead letters, with the error that put them there."""

    def dead_letters(self, limit: int) -> list[DeadLetter]:
        """Up to `limit` (at most 10) dead letters, oldest first; reading leaves them there."""


@dataclass(frozen=True)
class ApiKeyRecord:
    """What is stored of an API key: its hash, never the key (`memwrite.auth.api_keys`)."""

    key_id: str  # public: what `memwrite keys list` shows and `revoke` takes
    key_hash: str  # SHA-256 of the key, hex
    tenant: str
    created_at: str  # ISO 8601, UTC


class ApiKeyStore(Protocol):
    """API key hashes -> tenant: the authorizer reads it, `memwrite keys` writes it."""

    def add(self, record: ApiKeyRecord) -> None:
        """Store a new key; raises `ApiKeyExists` when its hash or its id is stored already."""

    def tenant_of(self, key_hash: str) -> str | None:
        """The tenant of the key with this hash; None for an unknown or revoked key."""

    def list_keys(self, tenant: str | None = None) -> list[ApiKeyRecord]:
        """Every stored key (of `tenant` when given), oldest first."""

    def revoke(self, key_id: str) -> ApiKeyRecord | None:
        """Delete the key with this id; its record, or None when no key has it."""


@dataclass(frozen=True)
class TraceRecord:
    trace_id: str
    tenant: str
    user_id: str
    session_id: str
    agent_id: str | None
    source: str
    created_at: str
    turn_ids: tuple[str, ...]


@dataclass(frozen=True)
class TracePage:
    traces: list[TraceRecord]
    next_cursor: str | None  # opaque; None on the last page


class TurnLedger(Protocol):
    def already_enqueued(self, tenant: str, turn_ids: Sequence[str]) -> set[str]:
        """The subset of `turn_ids` recorded as enqueued earlier."""

    def record_enqueued(self, tenant: str, trace_id: str, turn_ids: Sequence[str]) -> set[str]:
        """Record turns as enqueued (INSERT-if-absent); returns the ids someone recorded first."""

    def put_trace(self, trace: TraceRecord, inputs: Sequence[TraceInput] = ()) -> None:
        """Record the trace, its inputs first: a recorded trace always has its inputs."""

    def get_trace(self, tenant: str, trace_id: str) -> TraceRecord | None: ...

    def trace_inputs(self, tenant: str, trace_id: str) -> list[TraceInput]:
        """The trace's turns in request order; [] for a trace recorded without them."""

    def replace_inputs(self, tenant: str, trace_id: str, inputs: Sequence[TraceInput]) -> None:
        """Rewrite a recorded trace's inputs, same count (an excluded topic's turn withheld)."""

    def traces_of_user(
        self,
        tenant: str,
        user_id: str,
        *,
        since: datetime | None,
        until: datetime | None,
        limit: int,
        cursor: str | None,
    ) -> TracePage:
        """Up to `limit` traces of the user created in [since, until], newest first, from
        `cursor` (from a previous page). Raises `InvalidQuery` for a cursor it did not issue."""

    def memories_of_trace(self, tenant: str, trace_id: str) -> list[tuple[str, str]]:
        """(memory id, outcome: stored | merged) for every write this trace made."""

    def traces_of_memory(self, tenant: str, memory_id: str) -> list[tuple[str, str]]:
        """(trace id, outcome: stored | merged) for every trace that wrote the memory."""

    def last_question(self, tenant: str, user_id: str, session_id: str, now: float) -> str | None:
        """The question (masked) that the session's latest request ended with, if any and if
        it has not expired by `now` (epoch seconds)."""

    def set_last_question(
        self,
        tenant: str,
        user_id: str,
        session_id: str,
        question: str | None,
        *,
        now: float,
        retention_secs: int,
    ) -> None:
        """Record what `last_question` answers next (None: the request ended otherwise), for
        `retention_secs` from `now` (epoch seconds); expired ones are removed in time."""


class SpanStore(Protocol):
    def put_spans(self, spans: Sequence[StageSpan]) -> None: ...

    def spans_of(self, tenant: str, trace_id: str) -> list[StageSpan]: ...

    def llm_usage_of(
        self, tenant: str, trace_id: str, keys: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], LlmUsageSummary]:
        """The model usage on the trace's spans at `keys` (stage, item id), where any."""


class SessionLog(Protocol):
    """One user's (redacted) turns of a session that reached extraction: context for the LLM.
    Keyed per user: two users of one session never see each other's turns."""

    def recent(
        self, tenant: str, user_id: str, session_id: str, before: str, limit: int, *, now: float
    ) -> list[QueuedTurn]:
        """Up to `limit` turns observed before the sort key `before`, oldest first; turns
        whose retention ended by `now` (epoch seconds) are absent."""

    def append_batch(
        self,
        turns: Sequence[QueuedTurn],
        now: float,
        retention_secs: int,
        episodes: Mapping[str, Episode] | None = None,
    ) -> frozenset[str]:
        """Log a batch's turns for `retention_secs` from `now` (epoch seconds), each on the
        condition that its trace exists and its user's erasure has not started; returns the
        trace ids that failed it, none of whose turns is written. Expired turns are removed in
        time. `episodes` (turn id -> episode) are written with their turns (replacing one of
        the same turn), each with an outbox row `episode:<turn id>` for stage 7 to index it.
        SQLite: one transaction; DynamoDB: a turn, its episode and its trace's check in one."""


class EpisodeStore(Protocol):
    """A user's episodes (docs/design.md §10); written by `SessionLog.append_batch`."""

    def episodes_of(
        self,
        tenant: str,
        user_id: str,
        *,
        status: EpisodeStatus | None,
        since: datetime | None,
        until: datetime | None,
        limit: int,
        cursor: str | None,
        now: float,
    ) -> EpisodePage:
        """Up to `limit` episodes of the user observed in [since, until], oldest first, from
        `cursor`; `status` filters by `Episode.status_at(now)` (expired: past their expiry).
        Raises `InvalidQuery` for a cursor it did not issue."""

    def get_episodes(
        self, tenant: str, user_id: str, turn_ids: Sequence[str]
    ) -> dict[str, Episode]:
        """turn id -> episode, for those of `turn_ids` it holds (expired ones included)."""

    def update_episodes(self, episodes: Sequence[Episode]) -> None:
        """Replace the stored episodes of the same turns (status, links); an episode no longer
        stored (erased, expired) is not brought back."""

    def pending_users(self, tenant: str | None = None) -> list[tuple[str, str]]:
        """(tenant, user) pairs with a pending episode, sorted; of one tenant, or of all (a
        backfill of every user: the CLI without `--user`, the AWS schedule), from an index of
        the pending episodes alone (DynamoDB: the sparse `pending_episodes` GSI)."""

    def expire(self, now: float) -> list[Episode]:
        """Delete the episodes whose expiry has passed by `now`, each with an outbox row so
        that stage 7 takes its document out of the index; returns them. (DynamoDB's TTL does
        the deleting on AWS; search ignores an expired episode either way.)"""


class MetricsSink(Protocol):
    def count(self, stage: str, outcome: str, reason: Reason | None, value: int = 1) -> None:
        """Count items leaving `stage` with `outcome`, dimensioned by the reason's type."""

    def event(self, stage: str, name: str, value: int = 1) -> None:
        """Count `value` named events of a stage, e.g. `extraction_json_fail`."""

    def by_rule(self, stage: str, name: str, rule: str, value: int = 1) -> None:
        """Count named events of a stage by the rule behind them (`prefilter.rejected`); `rule`
        is a rule or reason name, never turn content."""

    def timing(self, stage: str, latency_ms: float) -> None: ...

    def llm_usage(self, stage: str, calls: Sequence[LlmUsage]) -> None:
        """The model calls a stage made, their tokens and their cost in USD (none: nothing)."""

    def tenant_cost(self, tenant: str, cost_usd: float) -> None:
        """What a tenant's model calls cost in USD, by tenant (`memwrite.metering`)."""


class EntityStore(Protocol):
    """The user's entity table (`entities`, docs/design.md §11)."""

    def entities_of(self, tenant: str, user_id: str, limit: int) -> list[Entity]:
        """Up to `limit` entities of the user, most recently seen first."""

    def get(self, tenant: str, user_id: str, entity_id: str) -> VersionedEntity | None: ...

    def put(
        self, entity: Entity, expected_version: int | None, source_trace_ids: Sequence[str]
    ) -> None:
        """Write the entity if its stored version is still `expected_version` (None: absent)
        and every source trace (of the entity's tenant) exists unerased; raise `WriteConflict`
        or `SourceErased` (naming an erased trace) otherwise, and write nothing. Merging is the
        caller's (`resolve.save_entity`)."""


class MemoryIndex(Protocol):
    """Hybrid (BM25 + kNN) search over one user's memories at a time."""

    def upsert(self, doc: MemoryDoc) -> None:
        """Index `doc`, replacing any document with the same (tenant, user, memory id)."""

    def delete(self, tenant: str, user_id: str, memory_id: str) -> None:
        """Remove one memory from every query; absent memories are ignored."""

    def write(self, writes: Sequence[IndexWrite]) -> dict[int, str]:
        """Apply `writes` in order in one request; returns the positions refused, with why (the
        rest applied). Raises `IndexUnavailable` when the request failed as a whole."""

    def delete_user(self, tenant: str, user_id: str) -> int:
        """Remove every memory of a user; returns how many there were."""

    def delete_expired(self, now: float, limit: int) -> int:
        """Remove up to `limit` documents of any tenant expired by `now`; returns how many."""

    def knn(
        self,
        tenant: str,
        user_id: str,
        vector: Vector,
        k: int,
        *,
        filter: IndexFilter | None = None,
    ) -> list[IndexHit]:
        """The `k` memories most similar to `vector`, each scored by the best of its content
        and question vectors (cosine), best first. Memories without vectors never match."""

    def bm25(
        self, tenant: str, user_id: str, query: str, k: int, *, filter: IndexFilter | None = None
    ) -> list[IndexHit]:
        """The `k` memories whose text best matches `query` (any of its words, stemmed;
        `BM25_STOPWORDS` and single letters ignored: only those match nothing), best first."""

    def hybrid(
        self,
        tenant: str,
        user_id: str,
        query: str,
        vector: Vector,
        k: int,
        *,
        filter: IndexFilter | None = None,
        fusion: Fusion = DEFAULT_FUSION,
    ) -> list[IndexHit]:
        """The top `k` of `bm25` and `knn` (k each) fused by `fuse_hybrid` with `fusion`."""

    def count(self, tenant: str, user_id: str) -> int:
        """How many memories of the user are indexed."""


class MemoryStore(Protocol):
    def get_memories(
        self, tenant: str, user_id: str, ids: Sequence[str]
    ) -> dict[str, VersionedMemory]: ...

    def get_fact_row(self, tenant: str, user_id: str, key: str) -> FactRow: ...

    def pending_memories(self, tenant: str, user_id: str, limit: int) -> list[MemoryUnit]:
        """Memories changed but not yet indexed (the outbox's pending rows), newest first."""

    def commit(self, commit: Commit) -> None:
        """Apply atomically; raise `WriteConflict` when a condition no longer holds, and
        `SourceErased` (nothing applied) when the commit's source trace no longer exists, and
        `SourceRolledBack` (nothing applied) when it was rolled back."""

    def memories_of(self, tenant: str, user_id: str) -> list[MemoryUnit]: ...


@dataclass(frozen=True)
class DueExpiry:
    """A memory whose user expiry has passed and is not announced yet (`MemoryUnit.expiry_due`)."""

    tenant: str
    user_id: str
    memory_id: str
    due: datetime


class ExpiryFinder(Protocol):
    """The memories the expiry sweep (`memwrite.expiry`) has to announce, found through an index
    of the due ones alone (SQLite: a partial index; DynamoDB: the sparse `expiry_due` GSI)."""

    def due(self, now: datetime, limit: int) -> list[DueExpiry]:
        """Up to `limit` memories, of every tenant, whose `expiry_due` is at or before `now`,
        earliest first. The list may lag the store (DynamoDB's GSI is eventually consistent):
        the sweep reads each memory again before writing."""


@dataclass(frozen=True)
class PipelineStart:
    """Whether a state machine execution started: `error` names why not."""

    started: bool
    error: str | None = None


class PipelineRunner(Protocol):
    def start(self, name: str, payload: str) -> PipelineStart:
        """Start the pipeline state machine on `payload` (JSON); waits for the start only."""
        ...


class SearchIndexSetup(Protocol):
    """The deploy-time step of a search server: the index mapping and the hybrid pipeline."""

    def ensure_index(self, fusion: Fusion) -> None:
        """Create (or update) the hybrid search pipeline of `fusion` and the index when absent.

        Idempotent: safe on every deploy; an existing index (and its documents) is kept.
        Raises `IndexUnavailable` when the server refuses or cannot be reached."""


class Outbox(Protocol):
    """The outbox as a change feed: what the indexer has not done yet (`pending`: the local
    runner's; on AWS the DynamoDB stream delivers the rows), and marking it done."""

    def pending(self, limit: int) -> list[OutboxChange]:
        """Up to `limit` not-yet-done rows; the rows of one memory in the order written."""

    def mark_done(self, changes: Sequence[OutboxChange]) -> None:
        """Mark rows done (idempotent): they leave `pending` and `MemoryStore.pending_memories`;
        a row already removed (the user erased) stays gone. An erasure's row (`records.
        change_events.is_erasure_row`) is deleted instead: nothing of the user outlives it."""


@dataclass(frozen=True)
class MemoryPage:
    memories: list[MemoryUnit]
    next_cursor: str | None  # opaque; None on the last page


class MemoryReader(Protocol):
    """The read API's view of the store: by id, and a user's memories page by page."""

    def memory_by_id(self, tenant: str, memory_id: str) -> MemoryUnit | None: ...

    def page_of(self, tenant: str, user_id: str, limit: int, cursor: str | None) -> MemoryPage:
        """Up to `limit` memories of the user in id order, from `cursor` (from a previous page);
        `InvalidQuery` for a cursor this store did not issue."""

    def record_access(self, tenant: str, user_id: str, memory_ids: Sequence[str], at: str) -> None:
        """Count one retrieval of each memory (`access_count`, `last_accessed`); advisory."""


@dataclass(frozen=True)
class UserErasure:
    """How many items of each kind an erasure removed (zero everywhere on a repeat)."""

    removed: dict[str, int]


class UserEraser(Protocol):
    def erase_user(self, tenant: str, user_id: str) -> UserErasure:
        """Remove every stored item of the user: memories, entity_facts, entities, outbox,
        the turns ledger and traces of their requests, session turns and spans. Idempotent.
        From its start no commit of the user's traces is accepted (`SourceErased`).
        Erasure rows of earlier erasures still pending (`announce`) are kept."""

    def announce(self, tenant: str, user_id: str, at: datetime) -> OutboxChange:
        """Write the erasure's outbox row
        (`memwrite.records.change_events.erasure_row_id(at)`, rev 1, pending): stage 7 sends
        `user.erased` from it, then deletes it."""


class UserPortability(Protocol):
    """One user's memories, entity_facts rows, entities and episodes as the store holds them
    (revs, versions, retrieval counters): what export reads and import writes back, same ids."""

    def snapshot(self, tenant: str, user_id: str) -> UserSnapshot:
        """Every memory (superseded ones too), entity_facts row, entity and episode (expired
        ones not yet deleted too) of the user."""

    def restore(self, unit: RestoreUnit) -> None:
        """Write the unit atomically, each item at its own rev or version and only if absent
        (else `WriteConflict`, nothing applied): memories with their counters and one outbox
        row each (stage 7 indexes it, or removes it when inactive), rows, entities, and
        episodes with their outbox row (`episode:<turn id>`: stage 7 indexes it)."""


class TraceRollback(Protocol):
    """Undoing one trace's writes (`POST /v1/traces/{trace_id}/rollback`) and its audit record.

    The memory store's reads (`MemoryStore`) decide what to undo; this applies it in one
    transaction, conditioned on everything it read."""

    def rollback_of(self, tenant: str, trace_id: str) -> RollbackRecord | None:
        """The record of the trace's rollback, if it was rolled back."""

    def traces_of_turns(self, tenant: str, turn_ids: Sequence[str]) -> dict[str, str]:
        """turn id -> the trace that enqueued it (the ledger), for the turns it knows."""

    def apply_rollback(self, rollback: RollbackCommit) -> None:
        """Apply atomically: delete `removed`, put `changed` and `fact_rows`, write the outbox
        rows and insert the record; raise `WriteConflict` (nothing applied) when a memory or
        row moved since it was read or the trace already has a record."""


class TenantSettingsStore(Protocol):
    """A tenant's own settings (`PUT /v1/settings`), laid over the deployment's file."""

    def get(self, tenant: str) -> TenantOverrides | None:
        """The tenant's stored settings, None if it never stored any (read consistently: a
        write is seen by the next read)."""

    def put(self, tenant: str, settings: TenantOverrides, updated_at: str) -> None:
        """Replace the tenant's settings whole."""


class TenantWebhooks(Protocol):
    """Where a tenant's change-feed events go (`memwrite.tenants.TenantConfigs`)."""

    def webhooks_for(self, tenant: str) -> tuple[Webhook, ...]:
        """The tenant's webhooks, () when it has none."""


class EventPublisher(Protocol):
    """Where the change feed's events go besides webhooks: the environment's EventBridge bus on
    AWS (`memwrite.adapters.aws.eventbridge`); locally there is none. All of `events` are
    published or it raises a `TransientError` (the outbox row stays pending, its retry
    publishes them again under the same event ids)."""

    def publish(self, events: Sequence[ChangeEvent]) -> None: ...


@dataclass(frozen=True)
class WebhookMessage:
    """One received message of the webhook queue: the delivery, the receipt that deletes or
    delays it, and how often it has been received (the attempt it is, 1-based)."""

    delivery: WebhookDelivery
    receipt: str
    receive_count: int


class WebhookQueue(Protocol):
    """The webhook delivery lane's queue (`memwrite.feed.delivery`), SQS standard-queue
    semantics: stage 7 enqueues, the lane's consumer receives (on AWS the event source mapping
    receives and deletes, and the `webhook_delivery` function calls only `retry_later`).

    `now` is the caller's clock (epoch seconds): the SQLite queue keeps time by it, so tests
    can move it; SQS keeps its own."""

    def enqueue(self, deliveries: Sequence[WebhookDelivery]) -> None:
        """Queue every one of `deliveries` durably, or raise a `TransientError` (the outbox row
        stays pending and its retry queues them again under the same delivery ids). A
        delivery already waiting may be queued once more (SQS) or not (SQLite): the receiver
        dedupes on the event id either way."""

    def receive(
        self, max_messages: int, visibility_timeout_secs: int, *, now: float
    ) -> list[WebhookMessage]:
        """Up to `max_messages` visible messages, oldest first, each hidden for the visibility
        timeout and then delivered again unless deleted or delayed. A message received as
        often as the queue's maximum receives goes to the dead letters instead (the redrive
        policy)."""

    def delete(self, messages: Sequence[WebhookMessage]) -> None:
        """Done with these (each by the receipt of its latest receive)."""

    def retry_later(self, message: WebhookMessage, delay_secs: int, *, now: float) -> None:
        """Hide the message for `delay_secs` from `now` (a failed attempt's backoff)."""

    def dead_letters(self, limit: int) -> list[WebhookDelivery]:
        """Up to `limit` (at most 10) deliveries given up on, oldest first; reading leaves
        them there."""


class ExportSpill(Protocol):
    """Where an export too large for one Lambda response goes: an object of the environment's
    exports bucket on AWS (`memwrite.adapters.aws.s3_exports`); locally there is none (the
    export is always answered inline). Stores all of `body` and returns a short-lived URL to
    it, or raises a `TransientError`."""

    def put(self, tenant: str, user_id: str, body: bytes) -> SpilledExport: ...


class StageAdapters(Protocol):
    """What a stage's `build_deps` may ask for: the stores of the deployment's backend and its
    model clients (`memwrite.wiring` picks them); it creates nothing it is not asked for."""

    @property
    def settings(self) -> Settings: ...

    @property
    def spans(self) -> SpanStore: ...

    @property
    def metrics(self) -> MetricsSink: ...

    def ledger(self) -> TurnLedger: ...

    def rate_store(self) -> RateStore: ...

    def queue(self) -> TurnQueue: ...

    def session_log(self) -> SessionLog: ...

    def episodes(self) -> EpisodeStore: ...

    def entities(self) -> EntityStore: ...

    def memory_store(self) -> MemoryStore: ...

    def outbox(self) -> Outbox: ...

    def tenant_settings(self) -> TenantSettingsStore | None:
        """The tenants' stored settings (None: the deployment keeps none, the file only)."""

    def tenant_webhooks(self) -> TenantWebhooks:
        """The tenants' change-feed endpoints (their stored settings over the file's, cached)."""

    def event_publisher(self) -> EventPublisher | None:
        """The environment's event bus (None: the environment names none, e.g. locally)."""

    def webhook_queue(self) -> WebhookQueue:
        """The webhook delivery lane's queue (SQS on AWS, the embedded database locally): stage
        7 hands deliveries to it, the lane (`memwrite.feed.delivery.build_deps`) consumes it."""

    def extraction_llm(self) -> ExtractionLlm | None:
        """The extractor's model client (None: offline, the rules only)."""

    def verifier(self) -> CandidateVerifier | None:
        """Built when some tenant turns the verifier on and a model is reachable."""

    def resolve_judge(self) -> ResolveJudge | None: ...

    def dedupe_judge(self) -> DedupeJudge | None: ...

    def questions(self) -> QuestionGenerator:
        """HyPE's question generator (offline: templates)."""

    def embedder(self) -> Embedder:
        """The search index's embedder (`settings.pipeline.search.embedder`)."""

    def similarity_embedder(self) -> Embedder:
        """Dedupe's embedder, whatever the index's: its thresholds are tuned on it."""

    def search_index(self) -> MemoryIndex:
        """The search index, dimensioned for `embedder()`."""
