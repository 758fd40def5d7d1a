"""One contract per port, run against both implementations: the DynamoDB/SQS adapters on moto
and the SQLite adapters of the embedded mode. A behaviour the pipeline relies on holds on both
or fails here, naming the backend.

Backends are module-scoped (one moto account, one SQLite file); tests keep apart by using their
own tenant, user or trace ids. Queues are made per test: a queue test receives everything.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import boto3
import pytest

from memwrite.adapters.aws.dynamodb_ledger import (
    DynamoRateStore,
    DynamoSessionLog,
    DynamoSpanStore,
    DynamoTurnLedger,
)
from memwrite.adapters.aws.dynamodb_store import DynamoEntityStore
from memwrite.adapters.aws.sqs import SqsTurnConsumer, SqsTurnQueue
from memwrite.adapters.sqlite.database import SqliteDatabase
from memwrite.adapters.sqlite.delete import SqliteMemoryDeletion
from memwrite.adapters.sqlite.erase import SqliteUserEraser
from memwrite.adapters.sqlite.expiry import DUE_QUERY, SqliteExpiryFinder
from memwrite.adapters.sqlite.ledger import (
    SqliteRateStore,
    SqliteSessionLog,
    SqliteSpanStore,
    SqliteTurnLedger,
)
from memwrite.adapters.sqlite.outbox import SqliteOutbox
from memwrite.adapters.sqlite.portability import SqlitePortability
from memwrite.adapters.sqlite.queue import SqliteTurnQueue
from memwrite.adapters.sqlite.rollback import SqliteTraceRollback
from memwrite.adapters.sqlite.store import SqliteEntityStore, SqliteMemoryStore
from memwrite.adapters.sqlite.tenant_settings import SqliteTenantSettingsStore
from memwrite.claims.candidate import Tier
from memwrite.claims.entities import Entity, EntityKind, VersionedEntity
from memwrite.config.tenant_overrides import TenantOverrides
from memwrite.edit.ports import MemoryDeletion
from memwrite.errors import (
    InvalidQuery,
    SourceErased,
    SourceRolledBack,
    UnknownTrace,
    WriteConflict,
)
from memwrite.ids import content_hash
from memwrite.models import (
    LlmUsageSummary,
    QueuedTurn,
    Role,
    Source,
    SpanResult,
    StageSpan,
    TraceInput,
)
from memwrite.payloads import OutboxChange
from memwrite.ports import (
    EntityStore,
    ExpiryFinder,
    MemoryReader,
    MemoryStore,
    Outbox,
    RateStore,
    SessionLog,
    SpanStore,
    TenantSettingsStore,
    TraceRecord,
    TraceRollback,
    TurnConsumer,
    TurnLedger,
    TurnQueue,
    UserEraser,
    UserPortability,
)
from memwrite.reasons import MemoryDeleted, TooShort
from memwrite.records.change_events import deleted_memory_of, deletion_row_id
from memwrite.records.entity_facts import FactObservation
from memwrite.records.episode import Episode, EpisodeStatus, episode_doc_id
from memwrite.records.memory import MemoryType, MemoryUnit
from memwrite.records.store import (
    Commit,
    DeletionCommit,
    DeletionRecord,
    FactRow,
    LedgerEntry,
    OutboxOp,
    OutboxRow,
    RollbackCommit,
    RollbackRecord,
    VersionedMemory,
)
from memwrite.records.user_snapshot import RestoreUnit, StoredFactRow, StoredMemory, UserSnapshot
from memwrite.schema import EXPIRY_SHARDS, MEMORIES_EXPIRY_DUE
from memwrite.wiring import build_api_function_deps, build_expiry_deps, build_stage_deps
from memwrite_local.runtime.aws import LocalAws

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
_ids = itertools.count()


def fresh(prefix: str) -> str:
    return f"{prefix}-{next(_ids)}"


@dataclass
class Ports:
    name: str
    ledger: TurnLedger
    rate: RateStore
    spans: SpanStore
    session_log: SessionLog
    entities: EntityStore
    store: MemoryStore
    reader: MemoryReader
    outbox: Outbox
    eraser: UserEraser
    rollbacks: TraceRollback
    deletions: MemoryDeletion
    tenant_settings: TenantSettingsStore
    portability: UserPortability
    expiry: ExpiryFinder
    # A fresh, empty queue: both ends of it.
    new_queue: Callable[[], tuple[TurnQueue, TurnConsumer]]


def _moto_ports(aws: LocalAws) -> Ports:
    assert aws.resources is not None
    names = aws.resources.table_names
    dynamodb, sqs = boto3.client("dynamodb"), boto3.client("sqs")

    def new_queue() -> tuple[TurnQueue, TurnConsumer]:
        suffix = uuid.uuid4().hex[:12]
        queue_url, dead_url = (
            sqs.create_queue(QueueName=f"{name}-{suffix}.fifo", Attributes={"FifoQueue": "true"})[
                "QueueUrl"
            ]
            for name in ("turns", "dead")
        )
        return SqsTurnQueue(sqs, queue_url), SqsTurnConsumer(sqs, queue_url, dead_url)

    # The environment LocalAws set names every table: wiring builds the stores of the read path
    # and stage 7 as the Lambdas get them.
    query_api = build_api_function_deps()
    query = query_api.query
    _, hype = build_stage_deps("hype")
    return Ports(
        name="moto",
        ledger=DynamoTurnLedger(dynamodb, names["turns"]),
        rate=DynamoRateStore(dynamodb, names["turns"]),
        spans=DynamoSpanStore(dynamodb, names["spans"]),
        session_log=DynamoSessionLog(dynamodb, names["turns"]),
        entities=DynamoEntityStore(dynamodb, names["entities"], names["turns"]),
        store=query.store,
        reader=query.reader,
        outbox=hype.outbox,
        eraser=query_api.erase.eraser,
        rollbacks=query_api.rollback.rollbacks,
        deletions=query_api.delete.deletions,
        tenant_settings=_written(query_api.configs.store),
        portability=query_api.portability,
        expiry=build_expiry_deps().finder,
        new_queue=new_queue,
    )


def _written(store: TenantSettingsStore | None) -> TenantSettingsStore:
    assert store is not None, "the api function writes tenant settings"
    return store


def _sqlite_ports(directory: Path) -> Ports:
    database = SqliteDatabase(directory)

    def new_queue() -> tuple[TurnQueue, TurnConsumer]:
        queue = SqliteTurnQueue(SqliteDatabase(directory / uuid.uuid4().hex[:12]))
        return queue, queue

    return Ports(
        name="sqlite",
        ledger=SqliteTurnLedger(database),
        rate=SqliteRateStore(database),
        spans=SqliteSpanStore(database),
        session_log=SqliteSessionLog(database),
        entities=SqliteEntityStore(database),
        store=SqliteMemoryStore(database),
        reader=SqliteMemoryStore(database),
        outbox=SqliteOutbox(database),
        eraser=SqliteUserEraser(database),
        rollbacks=SqliteTraceRollback(database),
        deletions=SqliteMemoryDeletion(database),
        tenant_settings=SqliteTenantSettingsStore(database),
        portability=SqlitePortability(database),
        expiry=SqliteExpiryFinder(database),
        new_queue=new_queue,
    )


@pytest.fixture(scope="module", params=["moto", "sqlite"])
def ports(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Ports]:
    if request.param == "sqlite":
        yield _sqlite_ports(tmp_path_factory.mktemp("sqlite"))
        return
    with LocalAws() as aws:
        yield _moto_ports(aws)


# --- TurnLedger ---------------------------------------------------------------------------


def test_ledger_records_a_turn_once_and_reports_who_came_second(ports: Ports) -> None:
    tenant = fresh("tenant")
    # Given turns a and b recorded by a first request
    assert ports.ledger.record_enqueued(tenant, "trace-1", ["a", "b"]) == set()
    # When a second request records b and c / Then b is reported as taken, c is new
    assert ports.ledger.record_enqueued(tenant, "trace-2", ["b", "c"]) == {"b"}
    assert ports.ledger.already_enqueued(tenant, ["a", "b", "c", "d"]) == {"a", "b", "c"}
    # And another tenant's ledger is its own
    assert ports.ledger.already_enqueued(fresh("tenant"), ["a", "b"]) == set()


@pytest.mark.parametrize("agent_id", [None, "bot-1"])
def test_ledger_keeps_traces_per_tenant(ports: Ports, agent_id: str | None) -> None:
    trace = TraceRecord(
        trace_id=fresh("trace"),
        tenant=fresh("tenant"),
        user_id="dana",
        session_id="s1",
        agent_id=agent_id,
        source="user_explicit",
        created_at=T0.isoformat(),
        turn_ids=("t2", "t1"),
    )
    ports.ledger.put_trace(trace)
    assert ports.ledger.get_trace(trace.tenant, trace.trace_id) == trace
    assert ports.ledger.get_trace("someone-else", trace.trace_id) is None
    assert ports.ledger.get_trace(trace.tenant, "no-such-trace") is None


def test_a_trace_keeps_its_masked_inputs_in_request_order(ports: Ports) -> None:
    tenant = fresh("tenant")
    trace = TraceRecord(
        trace_id=uuid.uuid4().hex,
        tenant=tenant,
        user_id="dana",
        session_id="s1",
        agent_id=None,
        source="user_explicit",
        created_at=T0.isoformat(),
        turn_ids=("t1", "t2", "t3"),
    )
    inputs = [
        TraceInput(role=Role.USER, content="I live in Berlin.", timestamp=T0),
        TraceInput(role=Role.ASSISTANT, content="Nice! Since when?", timestamp=None),
        # A turn at the API's size limit: one DynamoDB item could not hold a hundred of these
        TraceInput(role=Role.USER, content="my card is [REDACTED:card_number] " * 400),
    ]
    # Given a trace recorded with its inputs
    ports.ledger.put_trace(trace, inputs)
    # Then they come back as recorded, in order, to that tenant only
    assert ports.ledger.trace_inputs(tenant, trace.trace_id) == inputs
    assert ports.ledger.get_trace(tenant, trace.trace_id) == trace
    assert ports.ledger.trace_inputs(fresh("tenant"), trace.trace_id) == []
    # And a trace recorded without inputs has none
    bare = replace(trace, trace_id=uuid.uuid4().hex)
    ports.ledger.put_trace(bare)
    assert ports.ledger.trace_inputs(tenant, bare.trace_id) == []


def test_a_users_traces_come_newest_first_in_a_time_range_page_by_page(ports: Ports) -> None:
    tenant, user = fresh("tenant"), fresh("user")

    def trace_at(minute: int, user_id: str = user, of_tenant: str = tenant) -> TraceRecord:
        record = TraceRecord(
            trace_id=uuid.uuid4().hex,
            tenant=of_tenant,
            user_id=user_id,
            session_id="s1",
            agent_id=None,
            source="user_explicit",
            created_at=(T0 + timedelta(minutes=minute)).isoformat(),
            turn_ids=("t",),
        )
        ports.ledger.put_trace(record)
        return record

    # Given five traces of the user a minute apart (two in the same minute), and traces of
    # another user and of the same user id in another tenant
    traces = [trace_at(minute) for minute in (0, 1, 2, 2, 4)]
    trace_at(2, user_id=fresh("user"))
    trace_at(2, of_tenant=fresh("tenant"))
    newest_first = sorted(traces, key=lambda t: (t.created_at, t.trace_id), reverse=True)

    # When the traces between minute 1 and minute 2 are listed (both bounds inclusive)
    page = ports.ledger.traces_of_user(
        tenant,
        user,
        since=T0 + timedelta(minutes=1),
        until=T0 + timedelta(minutes=2),
        limit=10,
        cursor=None,
    )
    # Then exactly those come, newest first, on one page
    assert page.traces == [t for t in newest_first if t.created_at[14:16] in ("01", "02")]
    assert page.next_cursor is None

    # And all of them, two per page, come each once in the same order
    seen: list[TraceRecord] = []
    cursor = None
    while True:
        page = ports.ledger.traces_of_user(
            tenant, user, since=None, until=None, limit=2, cursor=cursor
        )
        seen.extend(page.traces)
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == newest_first
    # And a cursor this store did not issue is refused by name
    with pytest.raises(InvalidQuery, match="cursor"):
        ports.ledger.traces_of_user(tenant, user, since=None, until=None, limit=2, cursor="x")


def test_a_memorys_traces_are_those_that_stored_or_merged_into_it(ports: Ports) -> None:
    user = fresh("user")
    berlin = memory(user, "Berlin")
    first, second = uuid.uuid4().hex, uuid.uuid4().hex
    source_trace(ports, user)
    # Given one trace that stored the memory and another that merged into it
    stored = commit_of(user, (berlin, None), row=fact_row(berlin, version=0))
    ports.store.commit(replace(stored, ledger=[LedgerEntry(first, berlin.memory_id, "stored")]))
    merged = commit_of(user, (berlin, 1), row=fact_row(berlin, version=1))
    ports.store.commit(replace(merged, ledger=[LedgerEntry(second, berlin.memory_id, "merged")]))
    # Then the memory names both, with what each did; the traces name the memory
    assert sorted(ports.ledger.traces_of_memory("acme", berlin.memory_id)) == sorted(
        [(first, "stored"), (second, "merged")]
    )
    assert ports.ledger.memories_of_trace("acme", second) == [(berlin.memory_id, "merged")]
    # And another tenant sees none of it
    assert ports.ledger.traces_of_memory(fresh("tenant"), berlin.memory_id) == []


# --- RateStore ----------------------------------------------------------------------------


def test_rate_claims_hold_for_their_window_except_for_their_claimant(ports: Ports) -> None:
    key, now = fresh("rate"), 1_000_000.0
    assert ports.rate.claim_all([(key, "turn-1", now)], 60) == [True]
    assert ports.rate.claim_all([(key, "turn-2", now + 59)], 60) == [False]
    assert ports.rate.claim_all([(key, "turn-1", now + 30)], 60) == [True]  # the same turn re-sent
    # Once the window (renewed by the re-send) is over, anyone may claim
    assert ports.rate.claim_all([(key, "turn-2", now + 30 + 60)], 60) == [True]


def test_a_request_s_claims_are_judged_in_order_in_one_call(ports: Ports) -> None:
    # Given a key claimed by an earlier request, and a request of three claims: a new key, the
    # held one, and the new key again by another turn within its window
    held, new, now = fresh("rate"), fresh("rate"), 1_000_000.0
    ports.rate.claim_all([(held, "turn-0", now)], 60)
    claims = [(new, "turn-1", now + 1), (held, "turn-2", now + 1), (new, "turn-3", now + 2)]
    # When they are claimed in one call / Then each is judged as if alone, in order
    assert ports.rate.claim_all(claims, 60) == [True, False, False]


# --- SpanStore ----------------------------------------------------------------------------


def span(tenant: str, trace_id: str, stage: str, item: str, second: int) -> StageSpan:
    return StageSpan(
        trace_id=trace_id,
        tenant=tenant,
        user_id="dana",
        stage=stage,
        item_id=item,
        result=SpanResult.REJECT,
        reason=TooShort(word_count=1, min_words=3),
        latency_ms=0.5,
        at=T0 + timedelta(seconds=second),
    )


def test_spans_come_back_in_time_order_one_per_stage_and_item(ports: Ports) -> None:
    tenant, trace_id = fresh("tenant"), fresh("trace")
    late, early = span(tenant, trace_id, "extract", "t1", 5), span(tenant, trace_id, "pre", "t1", 1)
    ports.spans.put_spans([late, early])
    # A retried stage writes its span again (and one batch may name a key twice): one remains
    retried = span(tenant, trace_id, "extract", "t1", 9)
    ports.spans.put_spans([late, retried])
    assert ports.spans.spans_of(tenant, trace_id) == [early, retried]
    assert ports.spans.spans_of(fresh("tenant"), trace_id) == []


def test_llm_usage_of_reads_the_usage_at_the_keys_asked_and_no_other(ports: Ports) -> None:
    tenant, trace_id = fresh("tenant"), fresh("trace")
    usage = LlmUsageSummary(calls=2, input_tokens=900, output_tokens=40, cost_usd=0.0012)
    paid = span(tenant, trace_id, "extract", "t1#0", 1).model_copy(update={"llm": usage})
    other = span(tenant, trace_id, "extract", "t2", 2).model_copy(update={"llm": usage})
    unpaid = span(tenant, trace_id, "pre", "t1#0", 3)
    judged = span(tenant, trace_id, "dedupe", "t1#0", 4).model_copy(update={"llm": usage})
    ports.spans.put_spans([paid, other, unpaid, judged])
    # An item id may hold '#' (hype's `memory#rev`); a span without usage, or absent, is left out.
    keys = [("extract", "t1#0"), ("pre", "t1#0"), ("extract", "t9")]
    assert ports.spans.llm_usage_of(tenant, trace_id, keys) == {("extract", "t1#0"): usage}
    one_stage = [("dedupe", "t1#0"), ("dedupe", "t2")]
    assert ports.spans.llm_usage_of(tenant, trace_id, one_stage) == {("dedupe", "t1#0"): usage}
    assert ports.spans.llm_usage_of(fresh("tenant"), trace_id, keys) == {}
    assert ports.spans.llm_usage_of(tenant, trace_id, []) == {}


# --- SessionLog ---------------------------------------------------------------------------


def queued(
    user: str, session: str, minute: int, *, tenant: str = "acme", text: str = "I live in Rome."
) -> QueuedTurn:
    return QueuedTurn(
        tenant=tenant,
        user_id=user,
        session_id=session,
        agent_id=None,
        trace_id=f"trace-{user}",
        turn_id=f"{user}-{session}-{minute}",
        role=Role.USER,
        text=text,
        observed_at=T0 + timedelta(minutes=minute),
        source=Source.USER_EXPLICIT,
    )


NOW = T0.timestamp()  # the clock the stages pass in
DAY = 86_400


def log_turn(ports: Ports, turn: QueuedTurn, *, at: float = NOW, keep: int = DAY) -> frozenset[str]:
    return ports.session_log.append_batch([turn], now=at, retention_secs=keep)


def logged(ports: Ports, user: str, *, tenant: str = "acme", at: float = NOW) -> list[str]:
    return [t.turn_id for t in ports.session_log.recent(tenant, user, "s1", "~", 10, now=at)]


def test_session_log_gives_the_latest_turns_before_a_point_oldest_first(ports: Ports) -> None:
    user, other = fresh("user"), fresh("user")
    source_trace(ports, user)
    source_trace(ports, other)
    turns = [queued(user, "s1", minute) for minute in range(5)]
    for turn in [*turns, turns[2]]:  # appended twice: kept once
        log_turn(ports, turn)
    log_turn(ports, queued(other, "s1", 1))  # another user, same session
    before = f"{turns[4].observed_at.isoformat()}#"
    assert ports.session_log.recent("acme", user, "s1", before, 3, now=NOW) == turns[1:4]
    assert ports.session_log.recent("acme", user, "s1", before, 0, now=NOW) == []


def test_session_turns_expire_after_their_retention(ports: Ports) -> None:
    # Given two turns logged a day apart, each kept for two days
    user = fresh("user")
    source_trace(ports, user)
    first, second = queued(user, "s1", 0), queued(user, "s1", 1)
    log_turn(ports, first, at=NOW, keep=2 * DAY)
    log_turn(ports, second, at=NOW + DAY, keep=2 * DAY)
    # When the log is read just before, and then at, the first one's expiry
    # Then the expired turn is absent (DynamoDB's TTL may not have deleted it yet)
    assert logged(ports, user, at=NOW + 2 * DAY - 1) == [first.turn_id, second.turn_id]
    assert logged(ports, user, at=NOW + 2 * DAY) == [second.turn_id]
    assert logged(ports, user, at=NOW + 3 * DAY) == []


def test_a_turn_whose_trace_was_erased_or_never_recorded_is_not_logged(ports: Ports) -> None:
    # Given an erased user with a turn still in flight, and a turn of a trace never recorded
    tenant, user = fresh("tenant"), fresh("user")
    _, trace_id = leave_everything(ports, tenant, user)
    ports.eraser.erase_user(tenant, user)
    late = queued(user, "s1", 5, tenant=tenant)
    stray = queued(fresh("user"), "s1", 0)
    # When extract appends them / Then the log refuses them, naming the trace
    assert log_turn(ports, late) == {trace_id}
    assert log_turn(ports, stray) == {stray.trace_id}
    # And nothing of them was written
    assert logged(ports, user, tenant=tenant) == []
    assert logged(ports, stray.user_id) == []
    assert set(ports.eraser.erase_user(tenant, user).removed.values()) == {0}


def test_a_batch_is_logged_but_for_the_turns_of_an_erased_trace(ports: Ports) -> None:
    # Given a batch of one session: turns of two requests, the first of them erased meanwhile,
    # and of a third request that was never recorded
    tenant, user = fresh("tenant"), fresh("user")
    _, erased_trace = leave_everything(ports, tenant, user)
    ports.eraser.erase_user(tenant, user)
    erased = [queued(user, "s1", minute, tenant=tenant) for minute in (0, 2)]
    live = [
        queued(user, "s1", minute, tenant=tenant).model_copy(update={"trace_id": "trace-live"})
        for minute in (1, 3, 4)
    ]
    ports.ledger.put_trace(
        TraceRecord("trace-live", tenant, user, "s1", None, "user_explicit", T0.isoformat(), ())
    )
    stray = queued(user, "s1", 5, tenant=tenant).model_copy(update={"trace_id": "trace-none"})
    # When extract appends the batch in one write
    refused = ports.session_log.append_batch(
        [erased[0], live[0], erased[1], *live[1:], stray], now=NOW, retention_secs=DAY
    )
    # Then it names the traces it refused, and the other request's turns are all logged
    assert refused == {erased_trace, "trace-none"}
    assert logged(ports, user, tenant=tenant) == [turn.turn_id for turn in live]


# --- EntityStore --------------------------------------------------------------------------


def entity(user: str, name: str, day: int) -> Entity:
    return Entity.create("acme", user, name, kind=EntityKind.PERSON, at=T0 + timedelta(days=day))


def test_entities_are_written_only_on_the_version_that_was_read(ports: Ports) -> None:
    user = fresh("user")
    sources = [source_trace(ports, user)]
    ana = entity(user, "Ana", 0)
    ports.entities.put(ana, None, sources)
    with pytest.raises(WriteConflict):
        ports.entities.put(ana, None, sources)  # created twice
    stored = ports.entities.get("acme", user, ana.entity_id)
    assert stored is not None and (stored.entity, stored.version) == (ana, 1)
    moved = entity(user, "Ana", 3)
    ports.entities.put(moved, 1, sources)
    with pytest.raises(WriteConflict):
        ports.entities.put(ana, 1, sources)  # a stale read
    assert ports.entities.get("acme", user, ana.entity_id).entity == moved  # type: ignore[union-attr]


def test_an_entity_from_an_erased_trace_is_not_written(ports: Ports) -> None:
    # Given an erased user with a turn still in flight, and a live trace of another user
    tenant, user, other = fresh("tenant"), fresh("user"), fresh("user")
    _, erased = leave_everything(ports, tenant, user)
    ports.eraser.erase_user(tenant, user)
    live = source_trace(ports, other, tenant)
    ana = Entity.create(tenant, user, "Ana", kind=EntityKind.PERSON, at=T0)
    # When resolve writes an entity of the erased trace, alone or beside a live one
    # Then the store refuses it, naming the erased trace, and writes nothing
    for sources in ([erased], [live, erased]):
        with pytest.raises(SourceErased) as refused:
            ports.entities.put(ana, None, sources)
        assert (refused.value.tenant, refused.value.trace_id) == (tenant, erased)
    assert ports.entities.entities_of(tenant, user, 10) == []
    assert set(ports.eraser.erase_user(tenant, user).removed.values()) == {0}
    # And the version check still comes second: a live trace's write goes through
    bo = Entity.create(tenant, other, "Bo", kind=EntityKind.PERSON, at=T0)
    ports.entities.put(bo, None, [live])
    assert ports.entities.entities_of(tenant, other, 10) == [bo]


def test_entities_of_a_user_come_newest_first(ports: Ports) -> None:
    user = fresh("user")
    sources = [source_trace(ports, user)]
    for name, day in [("Ana", 1), ("Priya", 5), ("Bo", 3)]:
        ports.entities.put(entity(user, name, day), None, sources)
    assert [e.name for e in ports.entities.entities_of("acme", user, 2)] == ["Priya", "Bo"]
    assert ports.entities.get("acme", fresh("user"), "missing") is None


# --- MemoryStore --------------------------------------------------------------------------


def memory(user: str, value: str, *, tenant: str = "acme") -> MemoryUnit:
    return MemoryUnit(
        memory_id=content_hash(tenant, user, value),
        tenant=tenant,
        user_id=user,
        text=f"The user lives in {value}.",
        type=MemoryType.FACT,
        topic="home",
        importance=0.5,
        confidence=0.85,
        extractor_confidence=0.9,
        tier=Tier.WORKING,
        source="user_explicit",
        source_session="s1",
        trace_id="trace-m",
        turn_id=f"turn-{value}",
        created_at=T0,
        observed_at=T0,
        last_seen=T0,
        entity="user",
        entity_id="e-user",
        attribute="lives_in",
        value=value,
        predicate_is_stateful=True,
    )


def fact_row(*memories: MemoryUnit, version: int) -> FactRow:
    facts = {
        m.memory_id: FactObservation(
            memory_id=m.memory_id, value=m.value.lower(), negated=False, observed_at=T0
        )
        for m in memories
    }
    return FactRow(facts=facts, version=version)


def source_trace(ports: Ports, user: str, tenant: str = "acme", *turn_ids: str) -> str:
    """Record the trace the user's commits come from (`trace-<user>`), as ingest does before it
    enqueues a turn: a commit without it is refused."""
    trace_id = f"trace-{user}"
    ports.ledger.put_trace(
        TraceRecord(
            trace_id=trace_id,
            tenant=tenant,
            user_id=user,
            session_id="s1",
            agent_id=None,
            source="user_explicit",
            created_at=T0.isoformat(),
            turn_ids=turn_ids,
        )
    )
    return trace_id


def commit_of(
    user: str, *changes: tuple[MemoryUnit, int | None], row: FactRow | None = None
) -> Commit:
    return Commit(
        tenant="acme",
        user_id=user,
        trace_id=f"trace-{user}",
        memories=list(changes),
        fact_key="e-user#lives_in" if row is not None else None,
        fact_row=row,
        ledger=[LedgerEntry(f"trace-{user}", m.memory_id, "stored") for m, _ in changes],
        outbox=[OutboxRow(m.memory_id, OutboxOp.UPSERT, f"trace-{user}") for m, _ in changes],
    )


def test_a_new_memory_is_inserted_only_if_absent(ports: Ports) -> None:
    user = fresh("user")
    source_trace(ports, user)
    berlin = memory(user, "Berlin")
    ports.store.commit(commit_of(user, (berlin, None), row=fact_row(berlin, version=0)))
    # When the same insert is committed again (a redelivered plan) / Then it is refused whole
    with pytest.raises(WriteConflict):
        ports.store.commit(commit_of(user, (berlin, None)))
    found = ports.store.get_memories("acme", user, [berlin.memory_id, "nope"])
    assert list(found) == [berlin.memory_id]
    assert (found[berlin.memory_id].memory, found[berlin.memory_id].rev) == (berlin, 1)
    assert ports.ledger.memories_of_trace("acme", f"trace-{user}") == [(berlin.memory_id, "stored")]


def test_a_commit_with_one_stale_condition_applies_nothing(ports: Ports) -> None:
    # Given a user with Berlin stored (row version 1)
    user = fresh("user")
    source_trace(ports, user)
    berlin, lisbon = memory(user, "Berlin"), memory(user, "Lisbon")
    ports.store.commit(commit_of(user, (berlin, None), row=fact_row(berlin, version=0)))
    before = ports.store.memories_of("acme", user)
    # When Lisbon is committed on the row version read before Berlin (0)
    with pytest.raises(WriteConflict):
        ports.store.commit(commit_of(user, (lisbon, None), row=fact_row(berlin, lisbon, version=0)))
    # Then neither Lisbon, nor its row, ledger or outbox entries were written
    assert ports.store.memories_of("acme", user) == before
    assert ports.store.get_fact_row("acme", user, "e-user#lives_in") == fact_row(berlin, version=1)
    assert [m.value for m in ports.store.pending_memories("acme", user, 10)] == ["Berlin"]
    assert (lisbon.memory_id, "stored") not in ports.ledger.memories_of_trace(
        "acme", f"trace-{user}"
    )


def test_memories_and_fact_rows_move_one_version_per_commit(ports: Ports) -> None:
    user = fresh("user")
    source_trace(ports, user)
    berlin, lisbon = memory(user, "Berlin"), memory(user, "Lisbon")
    ports.store.commit(commit_of(user, (berlin, None), row=fact_row(berlin, version=0)))
    ended = berlin.model_copy(update={"superseded_by": lisbon.memory_id, "valid_until": T0})
    ports.store.commit(
        commit_of(user, (lisbon, None), (ended, 1), row=fact_row(berlin, lisbon, version=1))
    )
    stored = ports.store.get_memories("acme", user, [berlin.memory_id, lisbon.memory_id])
    assert (stored[berlin.memory_id].rev, stored[lisbon.memory_id].rev) == (2, 1)
    assert stored[berlin.memory_id].memory == ended
    assert ports.store.get_fact_row("acme", user, "e-user#lives_in").version == 2
    # A write on a rev that has moved on is refused
    with pytest.raises(WriteConflict):
        ports.store.commit(commit_of(user, (berlin, 1)))
    assert ports.store.get_fact_row("acme", user, "absent").version == 0
    assert sorted(m.value for m in ports.store.memories_of("acme", user)) == ["Berlin", "Lisbon"]


# --- Outbox -------------------------------------------------------------------------------


def pending_of(ports: Ports, user: str) -> list[OutboxChange]:
    return [change for change in ports.outbox.pending(1000) if change.user_id == user]


def test_the_outbox_lists_changes_in_rev_order_until_marked_done(ports: Ports) -> None:
    # Given a memory inserted then changed, and another user's memory
    user, other = fresh("user"), fresh("user")
    source_trace(ports, user)
    source_trace(ports, other)
    berlin = memory(user, "Berlin")
    ports.store.commit(commit_of(user, (berlin, None)))
    ports.store.commit(commit_of(user, (berlin.model_copy(update={"confidence": 0.9}), 1)))
    ports.store.commit(commit_of(other, (memory(other, "Rome"), None)))
    # When the consumer reads the pending rows
    mine = pending_of(ports, user)
    # Then it sees both revisions in order, each with the trace that wrote it
    assert [(c.tenant, c.memory_id, c.rev, c.trace_id) for c in mine] == [
        ("acme", berlin.memory_id, 1, f"trace-{user}"),
        ("acme", berlin.memory_id, 2, f"trace-{user}"),
    ]
    # And once marked done (twice: a redelivered consumer), they are pending no more
    ports.outbox.mark_done(mine)
    ports.outbox.mark_done(mine)
    assert pending_of(ports, user) == []
    assert ports.store.pending_memories("acme", user, 10) == []
    assert [m.value for m in ports.store.pending_memories("acme", other, 10)] == ["Rome"]


# --- MemoryReader -------------------------------------------------------------------------


def test_a_memory_is_read_by_id_only_within_its_tenant(ports: Ports) -> None:
    user = fresh("user")
    source_trace(ports, user)
    berlin = memory(user, "Berlin")
    ports.store.commit(commit_of(user, (berlin, None)))
    assert ports.reader.memory_by_id("acme", berlin.memory_id) == berlin
    assert ports.reader.memory_by_id(fresh("tenant"), berlin.memory_id) is None
    assert ports.reader.memory_by_id("acme", content_hash("nobody")) is None


def test_a_users_memories_come_page_by_page_each_once(ports: Ports) -> None:
    user = fresh("user")
    source_trace(ports, user)
    values = ["Berlin", "Lisbon", "Rome", "Oslo", "Porto"]
    for value in values:
        ports.store.commit(commit_of(user, (memory(user, value), None)))
    seen: list[str] = []
    cursor: str | None = None
    while True:
        page = ports.reader.page_of("acme", user, 2, cursor)
        assert len(page.memories) <= 2
        seen.extend(m.value for m in page.memories)
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert sorted(seen) == sorted(values)
    assert ports.reader.page_of("acme", fresh("user"), 2, None).memories == []
    with pytest.raises(InvalidQuery):
        ports.reader.page_of("acme", user, 2, "not-a-cursor")


def test_retrievals_are_counted_beside_the_memory(ports: Ports) -> None:
    user = fresh("user")
    source_trace(ports, user)
    berlin = memory(user, "Berlin")
    ports.store.commit(commit_of(user, (berlin, None)))
    ports.reader.record_access(
        "acme", user, [berlin.memory_id, berlin.memory_id], "2026-03-03T10:00:00+00:00"
    )
    ports.reader.record_access("acme", user, [berlin.memory_id], "2026-03-04T10:00:00+00:00")
    read = ports.reader.memory_by_id("acme", berlin.memory_id)
    assert read is not None
    assert (read.access_count, read.last_accessed) == (2, T0.replace(day=4, hour=10))
    # The memory itself is untouched: its next commit is on the rev it had
    assert ports.store.get_memories("acme", user, [berlin.memory_id])[berlin.memory_id].rev == 1


def test_a_retrieval_after_the_user_was_erased_counts_nothing(ports: Ports) -> None:
    # Given a search that found a memory, and the user erased before its count was recorded
    tenant, user = fresh("tenant"), fresh("user")
    berlin, _ = leave_everything(ports, tenant, user)
    ports.eraser.erase_user(tenant, user)
    # When the count arrives late / Then no counter of the erased user remains
    ports.reader.record_access(tenant, user, [berlin.memory_id], "2026-03-03T10:00:00+00:00")
    assert set(ports.eraser.erase_user(tenant, user).removed.values()) == {0}


# --- TurnLedger: a session's last question ------------------------------------------------


def ask(ports: Ports, user: str, session: str, question: str | None, **when: float) -> None:
    at, keep = when.get("at", NOW), int(when.get("keep", DAY))
    ports.ledger.set_last_question("acme", user, session, question, now=at, retention_secs=keep)


def test_the_last_question_is_kept_per_session_until_replaced(ports: Ports) -> None:
    user = fresh("user")
    assert ports.ledger.last_question("acme", user, "s1", now=NOW) is None
    ask(ports, user, "s1", "Where do you live?")
    ask(ports, user, "s2", "Any pets?")
    assert ports.ledger.last_question("acme", user, "s1", now=NOW) == "Where do you live?"
    ask(ports, user, "s1", None)  # the next request ended otherwise
    assert ports.ledger.last_question("acme", user, "s1", now=NOW) is None
    assert ports.ledger.last_question("acme", user, "s2", now=NOW) == "Any pets?"


def test_the_last_question_expires_after_its_window(ports: Ports) -> None:
    # Given a question asked at NOW, waiting an hour for its short answer
    user = fresh("user")
    ask(ports, user, "s1", "Where do you live?", keep=3_600)
    # When the next request comes just before, and then at, the end of the hour
    # Then the expired question is absent (DynamoDB's TTL may not have deleted it yet)
    assert ports.ledger.last_question("acme", user, "s1", now=NOW + 3_599) == "Where do you live?"
    assert ports.ledger.last_question("acme", user, "s1", now=NOW + 3_600) is None
    # And a question asked later waits its own full window
    ask(ports, user, "s1", "Any pets?", at=NOW + 7_200, keep=3_600)
    assert ports.ledger.last_question("acme", user, "s1", now=NOW + 10_799) == "Any pets?"


# --- UserEraser ---------------------------------------------------------------------------


def leave_everything(ports: Ports, tenant: str, user: str) -> tuple[MemoryUnit, str]:
    """A user with a memory (fact row, outbox, ledger), an entity, a trace with its spans,
    session turns and a last question."""
    turn = queued(user, "s1", 0, tenant=tenant)
    trace_id = source_trace(ports, user, tenant, turn.turn_id)
    berlin = memory(user, "Berlin", tenant=tenant)
    ports.store.commit(
        replace(commit_of(user, (berlin, None), row=fact_row(berlin, version=0)), tenant=tenant)
    )
    ports.entities.put(
        Entity.create(tenant, user, "Ana", kind=EntityKind.PERSON, at=T0),
        expected_version=None,
        source_trace_ids=[trace_id],
    )
    ports.ledger.record_enqueued(tenant, trace_id, [turn.turn_id])
    # The trace keeps its (masked) input, which the erasure takes too.
    record = ports.ledger.get_trace(tenant, trace_id)
    assert record is not None
    ports.ledger.put_trace(record, [TraceInput(role=Role.USER, content=turn.text, timestamp=T0)])
    ports.spans.put_spans(
        [span(tenant, trace_id, "pre", turn.turn_id, 0).model_copy(update={"user_id": user})]
    )
    log_turn(ports, turn)
    ports.ledger.set_last_question(
        tenant, user, "s1", "Where do you live?", now=NOW, retention_secs=DAY
    )
    ports.rollbacks.apply_rollback(
        RollbackCommit(
            tenant,
            user,
            [],
            [],
            {},
            [],
            rollback_record(tenant, user, trace_id),
            rollback_span(tenant, user, trace_id),
        )
    )
    return berlin, trace_id


def test_erasing_a_user_removes_everything_of_theirs_and_only_theirs(ports: Ports) -> None:
    tenant, user, other = fresh("tenant"), fresh("user"), fresh("user")
    berlin, trace_id = leave_everything(ports, tenant, user)
    kept, kept_trace = leave_everything(ports, tenant, other)
    changes = pending_of(ports, user)
    # When the user is erased
    erasure = ports.eraser.erase_user(tenant, user)
    # Then every kind of item of theirs is counted and gone
    for kind in ("outbox", "memories", "entity_facts", "entities", "spans"):
        assert erasure.removed[kind] > 0, kind
    assert erasure.removed["turns_ledger_and_traces"] >= 4  # ledger, trace, session, question
    assert ports.store.memories_of(tenant, user) == []
    assert ports.reader.memory_by_id(tenant, berlin.memory_id) is None
    assert ports.store.get_fact_row(tenant, user, "e-user#lives_in").version == 0
    assert ports.entities.entities_of(tenant, user, 10) == []
    assert ports.ledger.get_trace(tenant, trace_id) is None
    assert ports.ledger.trace_inputs(tenant, trace_id) == []
    assert ports.ledger.memories_of_trace(tenant, trace_id) == []
    assert ports.ledger.already_enqueued(tenant, [f"{user}-s1-0"]) == set()
    assert ports.spans.spans_of(tenant, trace_id) == []
    assert logged(ports, user, tenant=tenant) == []
    assert ports.ledger.last_question(tenant, user, "s1", now=NOW) is None
    assert ports.rollbacks.rollback_of(tenant, trace_id) is None
    assert pending_of(ports, user) == []
    # And a late consumer marking a row done does not bring it back
    ports.outbox.mark_done(changes[:1])
    assert pending_of(ports, user) == []
    assert ports.store.pending_memories(tenant, user, 10) == []
    # And the other user keeps all of theirs
    assert ports.store.memories_of(tenant, other) == [kept]
    assert ports.ledger.get_trace(tenant, kept_trace) is not None
    assert len(ports.spans.spans_of(tenant, kept_trace)) == 2  # the turn's, the rollback's
    assert ports.ledger.last_question(tenant, other, "s1", now=NOW) == "Where do you live?"
    assert ports.rollbacks.rollback_of(tenant, kept_trace) is not None
    # And erasing again removes nothing
    assert set(ports.eraser.erase_user(tenant, user).removed.values()) == {0}


def test_a_commit_whose_trace_was_erased_is_refused_and_writes_nothing(ports: Ports) -> None:
    # Given an erased user, and a turn of theirs still in flight when the erasure ran
    tenant, user = fresh("tenant"), fresh("user")
    _, trace_id = leave_everything(ports, tenant, user)
    ports.eraser.erase_user(tenant, user)
    lisbon = memory(user, "Lisbon", tenant=tenant)
    late = replace(commit_of(user, (lisbon, None), row=fact_row(lisbon, version=0)), tenant=tenant)
    # When persist commits it / Then the store refuses it, naming the erased trace
    with pytest.raises(SourceErased) as refused:
        ports.store.commit(late)
    assert (refused.value.tenant, refused.value.trace_id) == (tenant, trace_id)
    # And nothing of it was written: no memory, fact row, outbox row or trace outcome
    assert ports.store.memories_of(tenant, user) == []
    assert ports.store.get_fact_row(tenant, user, "e-user#lives_in").version == 0
    assert ports.store.pending_memories(tenant, user, 10) == []
    assert ports.ledger.memories_of_trace(tenant, trace_id) == []
    assert set(ports.eraser.erase_user(tenant, user).removed.values()) == {0}


def test_a_commit_from_a_trace_never_recorded_is_refused(ports: Ports) -> None:
    user = fresh("user")
    berlin = memory(user, "Berlin")
    with pytest.raises(SourceErased):
        ports.store.commit(commit_of(user, (berlin, None), row=fact_row(berlin, version=0)))
    assert ports.store.memories_of("acme", user) == []
    assert ports.store.get_fact_row("acme", user, "e-user#lives_in").version == 0


# --- TraceRollback ------------------------------------------------------------------------


def rollback_record(
    tenant: str, user: str, trace_id: str, removed: tuple[str, ...] = ()
) -> RollbackRecord:
    return RollbackRecord(
        trace_id=trace_id,
        tenant=tenant,
        user_id=user,
        rolled_back_at=T0,
        requested_via="api",
        removed=list(removed),
        restored=[],
        updated=[],
    )


def rollback_span(tenant: str, user: str, trace_id: str) -> StageSpan:
    stage = span(tenant, trace_id, "rollback", trace_id, 60)
    return stage.model_copy(update={"user_id": user, "result": SpanResult.TRANSFORM})


def berlin_then_lisbon(ports: Ports, user: str) -> tuple[MemoryUnit, MemoryUnit]:
    """Berlin stored, then Lisbon (trace `trace-<user>`) superseding it: Berlin at rev 2,
    Lisbon at rev 1, the row at version 2."""
    source_trace(ports, user)
    berlin, lisbon = memory(user, "Berlin"), memory(user, "Lisbon")
    ports.store.commit(commit_of(user, (berlin, None), row=fact_row(berlin, version=0)))
    ended = berlin.model_copy(update={"superseded_by": lisbon.memory_id, "valid_until": T0})
    ports.store.commit(
        commit_of(user, (lisbon, None), (ended, 1), row=fact_row(berlin, lisbon, version=1))
    )
    return ended, lisbon


def lisbon_rolled_back(user: str, ended: MemoryUnit, lisbon: MemoryUnit) -> RollbackCommit:
    restored = ended.model_copy(update={"superseded_by": None, "valid_until": None})
    return RollbackCommit(
        tenant="acme",
        user_id=user,
        removed=[VersionedMemory(lisbon, 1)],
        changed=[(restored, 2)],
        fact_rows={"e-user#lives_in": fact_row(ended, version=2)},
        outbox=[OutboxRow(ended.memory_id, OutboxOp.UPSERT, f"trace-{user}")],
        record=rollback_record("acme", user, f"trace-{user}", (lisbon.memory_id,)),
        span=rollback_span("acme", user, f"trace-{user}"),
    )


def test_a_rollback_removes_restores_and_records_itself_once(ports: Ports) -> None:
    user = fresh("user")
    ended, lisbon = berlin_then_lisbon(ports, user)
    rollback = lisbon_rolled_back(user, ended, lisbon)
    # When Lisbon's trace is rolled back
    ports.rollbacks.apply_rollback(rollback)
    # Then Lisbon and every outbox row of it are gone, Berlin is active at its next rev
    stored = ports.store.get_memories("acme", user, [ended.memory_id, lisbon.memory_id])
    assert list(stored) == [ended.memory_id]
    assert stored[ended.memory_id] == VersionedMemory(rollback.changed[0][0], 3)
    assert ports.reader.memory_by_id("acme", lisbon.memory_id) is None
    assert [(c.memory_id, c.rev) for c in pending_of(ports, user)] == [
        (ended.memory_id, 1),
        (ended.memory_id, 2),
        (ended.memory_id, 3),
    ]
    # And the row holds Berlin only, one version on; the record and the span read back
    assert ports.store.get_fact_row("acme", user, "e-user#lives_in") == fact_row(ended, version=3)
    assert ports.rollbacks.rollback_of("acme", f"trace-{user}") == rollback.record
    assert ports.rollbacks.rollback_of("other", f"trace-{user}") is None
    assert ports.spans.spans_of("acme", f"trace-{user}") == [rollback.span]
    # And a second application of the same rollback is refused whole
    with pytest.raises(WriteConflict):
        ports.rollbacks.apply_rollback(replace(rollback, removed=[], changed=[], outbox=[]))


def test_a_rollback_with_one_stale_condition_applies_nothing(ports: Ports) -> None:
    user = fresh("user")
    ended, lisbon = berlin_then_lisbon(ports, user)
    before = (ports.store.memories_of("acme", user), pending_of(ports, user))
    rollback = lisbon_rolled_back(user, ended, lisbon)
    stale_row = {"e-user#lives_in": fact_row(ended, version=1)}
    for stale in (
        replace(rollback, removed=[VersionedMemory(lisbon, 2)]),
        replace(rollback, changed=[(rollback.changed[0][0], 1)]),
        replace(rollback, fact_rows=stale_row),
    ):
        with pytest.raises(WriteConflict):
            ports.rollbacks.apply_rollback(stale)
    assert (ports.store.memories_of("acme", user), pending_of(ports, user)) == before
    assert ports.store.get_fact_row("acme", user, "e-user#lives_in").version == 2
    assert ports.rollbacks.rollback_of("acme", f"trace-{user}") is None


def test_a_rollback_of_a_trace_erased_or_never_recorded_writes_nothing(ports: Ports) -> None:
    # Given a user's Berlin and Lisbon, then the user erased (their trace with them)
    user = fresh("user")
    ended, lisbon = berlin_then_lisbon(ports, user)
    rollback = lisbon_rolled_back(user, ended, lisbon)
    turn_span = span("acme", f"trace-{user}", "pre", "t", 0).model_copy(update={"user_id": user})
    ports.spans.put_spans([turn_span])
    ports.eraser.erase_user("acme", user)
    # When the rollback planned before the erasure is applied / Then it is refused whole
    nothing = replace(rollback, removed=[], changed=[], fact_rows={}, outbox=[])
    with pytest.raises(UnknownTrace):
        ports.rollbacks.apply_rollback(nothing)
    assert ports.rollbacks.rollback_of("acme", f"trace-{user}") is None
    assert ports.spans.spans_of("acme", f"trace-{user}") == []
    # And so is one of a trace never recorded
    other = fresh("user")
    with pytest.raises(UnknownTrace):
        ports.rollbacks.apply_rollback(
            replace(
                nothing,
                user_id=other,
                record=rollback_record("acme", other, f"trace-{other}"),
                span=rollback_span("acme", other, f"trace-{other}"),
            )
        )
    assert ports.rollbacks.rollback_of("acme", f"trace-{other}") is None


def test_a_memory_rolled_back_and_stored_again_starts_afresh(ports: Ports) -> None:
    # Given Berlin alone, retrieved once, then rolled back (its row emptied)
    user = fresh("user")
    source_trace(ports, user)
    berlin = memory(user, "Berlin")
    ports.store.commit(commit_of(user, (berlin, None), row=fact_row(berlin, version=0)))
    ports.reader.record_access("acme", user, [berlin.memory_id], T0.isoformat())
    ports.rollbacks.apply_rollback(
        RollbackCommit(
            tenant="acme",
            user_id=user,
            removed=[VersionedMemory(berlin, 1)],
            changed=[],
            fact_rows={"e-user#lives_in": FactRow(version=1)},
            outbox=[],
            record=rollback_record("acme", user, f"trace-{user}", (berlin.memory_id,)),
            span=rollback_span("acme", user, f"trace-{user}"),
        )
    )
    assert ports.store.get_fact_row("acme", user, "e-user#lives_in") == FactRow()
    assert pending_of(ports, user) == []
    # When a late retry of the rolled-back trace commits it again / Then the store refuses it,
    # naming the trace, and writes nothing (the rollback stays whole)
    again = commit_of(user, (berlin, None), row=fact_row(berlin, version=0))
    outcomes = ports.ledger.memories_of_trace("acme", f"trace-{user}")
    with pytest.raises(SourceRolledBack) as refused:
        ports.store.commit(again)
    assert (refused.value.tenant, refused.value.trace_id) == ("acme", f"trace-{user}")
    assert ports.store.memories_of("acme", user) == []
    assert ports.store.get_fact_row("acme", user, "e-user#lives_in") == FactRow()
    assert pending_of(ports, user) == []
    assert ports.ledger.memories_of_trace("acme", f"trace-{user}") == outcomes
    # When another trace stores the same memory again
    other_trace = f"trace-again-{user}"
    ports.ledger.put_trace(
        TraceRecord(
            trace_id=other_trace,
            tenant="acme",
            user_id=user,
            session_id="s1",
            agent_id=None,
            source="user_explicit",
            created_at=T0.isoformat(),
            turn_ids=(),
        )
    )
    ports.store.commit(
        replace(
            again,
            trace_id=other_trace,
            ledger=[LedgerEntry(other_trace, berlin.memory_id, "stored")],
            outbox=[OutboxRow(berlin.memory_id, OutboxOp.UPSERT, other_trace)],
        )
    )
    # Then it is new: rev 1, a pending outbox row, no retrievals counted
    assert [(c.memory_id, c.rev) for c in pending_of(ports, user)] == [(berlin.memory_id, 1)]
    assert ports.reader.memory_by_id("acme", berlin.memory_id) == berlin


def test_the_ledger_names_the_trace_of_each_turn_within_the_tenant(ports: Ports) -> None:
    trace_id, turn, unknown = fresh("trace"), fresh("turn"), fresh("turn")
    ports.ledger.record_enqueued("acme", trace_id, [turn])
    assert ports.rollbacks.traces_of_turns("acme", [turn, unknown]) == {turn: trace_id}
    assert ports.rollbacks.traces_of_turns("other", [turn]) == {}
    assert ports.rollbacks.traces_of_turns("acme", []) == {}


# --- TurnQueue + TurnConsumer -------------------------------------------------------------


def test_the_queue_delivers_a_turn_once_per_enqueue_and_forgets_it_when_deleted(
    ports: Ports,
) -> None:
    queue, consumer = ports.new_queue()
    turn = queued("dana", "s1", 0)
    assert queue.enqueue([turn]).sent == {turn.turn_id}
    queue.enqueue([turn])  # the same turn again while it waits: deduplicated
    [delivery] = consumer.receive(10, 30)
    assert (delivery.turn, delivery.receive_count) == (turn, 1)
    consumer.delete([delivery])
    assert consumer.receive(10, 0) == []


def test_one_sessions_turns_come_in_order_and_wait_while_one_is_in_flight(ports: Ports) -> None:
    queue, consumer = ports.new_queue()
    dana = [queued("dana", "s1", minute) for minute in (3, 1, 2)]  # enqueue order, not time
    bo = queued("bo", "s9", 0)
    queue.enqueue([dana[0]])
    queue.enqueue([dana[1], bo, dana[2]])
    # The first receive takes dana's first turn only
    [first] = consumer.receive(1, 30)
    assert first.turn == dana[0]
    # While it is in flight, dana's later turns wait; bo's turn is not held up
    assert [d.turn for d in consumer.receive(10, 30)] == [bo]
    consumer.delete([first])
    assert [d.turn for d in consumer.receive(10, 30)] == dana[1:]


def test_an_undeleted_delivery_comes_back_after_its_visibility_timeout(ports: Ports) -> None:
    queue, consumer = ports.new_queue()
    turn = queued("dana", "s1", 0)
    queue.enqueue([turn])
    [hidden] = consumer.receive(10, 30)
    assert consumer.receive(10, 30) == []  # hidden for 30 s
    consumer.release([hidden])  # a failed attempt: visible again now
    [again] = consumer.receive(10, 0)  # visibility 0: a consumer that died at once
    [third] = consumer.receive(10, 30)
    assert (again.turn, again.receive_count, third.receive_count) == (turn, 2, 3)


def test_dead_letters_leave_the_queue_with_their_error(ports: Ports) -> None:
    queue, consumer = ports.new_queue()
    turns = [queued("dana", "s1", 0), queued("dana", "s1", 1)]
    queue.enqueue(turns)
    deliveries = consumer.receive(10, 30)
    consumer.dead_letter(deliveries, "RuntimeError: index down")
    assert consumer.receive(10, 0) == []
    letters = consumer.dead_letters(10)
    assert sorted(letter.turn.turn_id for letter in letters) == sorted(t.turn_id for t in turns)
    assert {letter.error for letter in letters} == {"RuntimeError: index down"}


# --- TenantSettingsStore -------------------------------------------------------------------


def test_tenant_settings_are_replaced_whole_and_read_per_tenant(ports: Ports) -> None:
    # Given a tenant that stored instructions, topics and a webhook, then replaced them
    tenant, other = fresh("acme"), fresh("globex")
    first = TenantOverrides.model_validate(
        {
            "min_words": 2,
            "extraction": {
                "instructions": "Remember the user's tools.",
                "topics": [{"name": "tools", "description": "Software the user works with."}],
                "exclude_topics": ["food"],
            },
            "webhooks": [
                {
                    "url": "https://hooks.example.com/memwrite",
                    "secret": "s" * 32,
                    "events": ["memory.created"],
                }
            ],
        }
    )
    assert ports.tenant_settings.get(tenant) is None
    ports.tenant_settings.put(tenant, first, "2026-03-02T09:00:00+00:00")
    # When it is read back
    # Then it is what was stored, and no other tenant sees it
    assert ports.tenant_settings.get(tenant) == first
    assert ports.tenant_settings.get(other) is None
    # When it is replaced by settings without extraction
    second = TenantOverrides(min_words=5)
    ports.tenant_settings.put(tenant, second, "2026-03-02T09:01:00+00:00")
    # Then nothing of the first remains
    assert ports.tenant_settings.get(tenant) == second


# --- ExpiryFinder -------------------------------------------------------------------------

# The only test here that gives memories an expiry: `due` lists them across tenants.
E0 = datetime(2001, 1, 1, tzinfo=UTC)


def test_due_expiries_are_the_passed_unannounced_active_ones_earliest_first(
    ports: Ports,
) -> None:
    # Given memories of two tenants, expiring a day apart, one with an offset other than UTC
    tenant, other = fresh("tenant"), fresh("tenant")
    user = fresh("user")
    due: list[MemoryUnit] = []
    for day in range(6):
        at = E0 + timedelta(days=day)
        if day == 2:
            at = at.astimezone(timezone(timedelta(hours=5)))
        owner = tenant if day % 2 else other
        mem = memory(user, f"City{day}", tenant=owner).model_copy(update={"expires_on": at})
        ports.store.commit(replace(commit_of(user, (mem, None)), tenant=owner, from_trace=False))
        due.append(mem)
    # And memories with nothing to announce: no expiry, announced, superseded, retracted
    quiet = [
        memory(user, "Nowhere", tenant=tenant),
        due[0].model_copy(update={"memory_id": "announced", "expiry_announced": True}),
        due[0].model_copy(update={"memory_id": "ended", "superseded_by": due[1].memory_id}),
        due[0].model_copy(update={"memory_id": "retracted", "negated": True}),
    ]
    for mem in quiet:
        ports.store.commit(replace(commit_of(user, (mem, None)), tenant=tenant, from_trace=False))

    # When the due ones are asked for at the end of day 3 / Then days 0-3, earliest first
    found = ports.expiry.due(E0 + timedelta(days=3, hours=1), 10)
    assert [d.memory_id for d in found] == [m.memory_id for m in due[:4]]
    assert [(d.tenant, d.user_id) for d in found] == [(m.tenant, user) for m in due[:4]]
    assert found[2].due == due[2].expires_on
    # And a limit takes the earliest, whatever their shard
    assert [d.memory_id for d in ports.expiry.due(E0 + timedelta(days=9), 3)] == [
        m.memory_id for m in due[:3]
    ]

    # When one is announced, one cleared and one moved later (each a whole new rev)
    rev = 1
    changed = [
        due[0].model_copy(update={"expiry_announced": True}),
        due[1].model_copy(update={"expires_on": None}),
        due[2].model_copy(update={"expires_on": E0 + timedelta(days=8)}),
    ]
    for mem in changed:
        ports.store.commit(
            replace(commit_of(user, (mem, rev)), tenant=mem.tenant, from_trace=False)
        )
    # Then the index follows: only the moved one comes back, at its new time
    found = ports.expiry.due(E0 + timedelta(days=9), 10)
    assert [d.memory_id for d in found] == [m.memory_id for m in (due[3], due[4], due[5], due[2])]

    # When the users are erased / Then none of theirs is due any more
    ports.eraser.erase_user(tenant, user)
    ports.eraser.erase_user(other, user)
    assert ports.expiry.due(E0 + timedelta(days=9), 10) == []


def test_the_sqlite_finder_reads_its_partial_index_not_the_table(tmp_path: Path) -> None:
    # Given a database / When the due query is planned / Then it searches the partial index
    database = SqliteDatabase(tmp_path)
    with database.connection() as connection:
        plan = connection.execute(f"EXPLAIN QUERY PLAN {DUE_QUERY}", (T0.isoformat(), 10))
        [(*_, detail)] = plan.fetchall()
    assert detail.startswith("SEARCH memories USING INDEX memories_expiry_due"), detail


def test_the_dynamodb_expiry_index_holds_the_due_memories_only_spread_over_shards() -> None:
    # Given 16 memories with an expiry to announce and 2 without, on moto
    with LocalAws() as aws:
        assert aws.resources is not None
        table = aws.resources.table_names["memories"]
        store = build_api_function_deps().query.store
        for n in range(18):
            mem = memory("ua", f"Town{n}")
            if n < 16:
                mem = mem.model_copy(update={"expires_on": E0 + timedelta(hours=n)})
            store.commit(replace(commit_of("ua", (mem, None)), from_trace=False))
        # When the sparse index is read whole (a test's look; the sweep queries it per shard)
        items = boto3.client("dynamodb").scan(TableName=table, IndexName=MEMORIES_EXPIRY_DUE.name)
    # Then it holds the 16 alone, keyed by fixed shards, more than one of them in use
    assert items["Count"] == 16
    shards = {item[MEMORIES_EXPIRY_DUE.partition_key]["S"] for item in items["Items"]}
    assert shards <= set(EXPIRY_SHARDS) and len(shards) > 1


# --- UserPortability ----------------------------------------------------------------------


def test_restore_writes_a_unit_whole_at_its_revs_and_snapshot_reads_it_back(ports: Ports) -> None:
    # Given a chain (Paris superseded by Lisbon) with its row, an entity and retrievals
    user = fresh("user")
    paris, lisbon = memory(user, "Paris"), memory(user, "Lisbon")
    paris = paris.model_copy(update={"superseded_by": lisbon.memory_id, "valid_until": T0})
    row = fact_row(paris, lisbon, version=2)
    entity = Entity.create("acme", user, "Priya", kind=EntityKind.PERSON, at=T0)
    unit = RestoreUnit(
        tenant="acme",
        user_id=user,
        entities=[VersionedEntity(entity, 3)],
        fact_rows=[StoredFactRow("e-user#lives_in", row.facts, row.version)],
        memories=[
            StoredMemory(paris, 1),
            StoredMemory(lisbon, 4, access_count=2, last_accessed=T0),
        ],
    )

    # When it is restored
    ports.portability.restore(unit)

    # Then a snapshot gives back every item, at its rev or version, with the counters
    snapshot = ports.portability.snapshot("acme", user)
    assert snapshot.entities == [VersionedEntity(entity, 3)]
    assert snapshot.fact_rows == unit.fact_rows
    assert sorted(snapshot.memories, key=lambda m: m.rev) == unit.memories
    # And stage 7 gets one outbox row per memory at its rev (Paris: to be removed)
    rows = {(c.memory_id, c.rev) for c in ports.outbox.pending(1000) if c.user_id == user}
    assert rows == {(paris.memory_id, 1), (lisbon.memory_id, 4)}
    assert ports.store.get_memories("acme", user, [lisbon.memory_id])[lisbon.memory_id].rev == 4


def test_restore_of_a_unit_with_one_present_item_writes_nothing(ports: Ports) -> None:
    # Given a user with one memory
    user = fresh("user")
    berlin, rome = memory(user, "Berlin"), memory(user, "Rome")
    ports.portability.restore(RestoreUnit("acme", user, memories=[StoredMemory(berlin, 1)]))

    # When a unit holding it and a new one is restored
    with pytest.raises(WriteConflict):
        ports.portability.restore(
            RestoreUnit("acme", user, memories=[StoredMemory(rome, 1), StoredMemory(berlin, 1)])
        )

    # Then the new one was not written either
    snapshot = ports.portability.snapshot("acme", user)
    assert [m.memory.memory_id for m in snapshot.memories] == [berlin.memory_id]
    assert ports.portability.snapshot("acme", fresh("user")) == UserSnapshot()


def test_restore_writes_episodes_if_absent_with_their_outbox_rows(ports: Ports) -> None:
    # Given a user's kept turn, extracted by a backfill (every field of the record set)
    user = fresh("user")
    turn = QueuedTurn(
        tenant="acme",
        user_id=user,
        session_id="s1",
        agent_id=None,
        trace_id=fresh("trace"),
        turn_id=uuid.uuid4().hex,
        role=Role.USER,
        text="We settled in Porto, [EMAIL] has the new address.",
        observed_at=T0,
        source=Source.USER_EXPLICIT,
        context="Where do you live now?",
    )
    episode = Episode(
        turn=turn,
        status=EpisodeStatus.EXTRACTED,
        deferred_reason={"type": "DeferredNoLLM"},
        expires_at=int(T0.timestamp()) + 86_400,
        memory_ids=["a" * 32],
        outcome=None,
        backfill_trace_id=fresh("backfill"),
    )

    # When it is restored
    ports.portability.restore(RestoreUnit("acme", user, episodes=[episode]))

    # Then a snapshot gives it back whole, and stage 7 has its outbox row
    assert ports.portability.snapshot("acme", user) == UserSnapshot(episodes=[episode])
    rows = [c.memory_id for c in ports.outbox.pending(1000) if c.user_id == user]
    assert rows == [episode_doc_id(turn.turn_id)]
    # And restoring it again is refused, nothing applied
    with pytest.raises(WriteConflict):
        ports.portability.restore(RestoreUnit("acme", user, episodes=[episode]))
    assert ports.portability.snapshot("acme", user) == UserSnapshot(episodes=[episode])


# --- MemoryDeletion (memwrite.edit.ports) -------------------------------------------------


def lisbon_deleted(user: str, ended: MemoryUnit, lisbon: MemoryUnit) -> DeletionCommit:
    """Lisbon (rev 1) deleted: Berlin (rev 2) current again, the row at version 2."""
    berlin = ended.model_copy(update={"superseded_by": None, "valid_until": None})
    at = T0 + timedelta(days=1)
    deleted = span("acme", lisbon.trace_id, "delete", lisbon.memory_id, 60)
    return DeletionCommit(
        tenant="acme",
        user_id=user,
        removed=VersionedMemory(lisbon, 1),
        changed=[(berlin, 2)],
        fact_key="e-user#lives_in",
        fact_row=fact_row(ended, version=2),
        outbox=[OutboxRow(berlin.memory_id, OutboxOp.UPSERT, lisbon.trace_id)],
        announcement=OutboxRow(
            deletion_row_id(lisbon.memory_id, at), OutboxOp.DELETE, lisbon.trace_id
        ),
        record=DeletionRecord(
            memory_id=lisbon.memory_id,
            user_id=user,
            trace_id=lisbon.trace_id,
            deleted_at=at,
            restored=[berlin.memory_id],
            updated=[],
        ),
        span=deleted.model_copy(
            update={
                "user_id": user,
                "result": SpanResult.TRANSFORM,
                "reason": MemoryDeleted(memory_id=lisbon.memory_id, restored=1),
            }
        ),
    )


def test_a_deletion_removes_restores_and_announces_itself(ports: Ports) -> None:
    user = fresh("user")
    ended, lisbon = berlin_then_lisbon(ports, user)
    deletion = lisbon_deleted(user, ended, lisbon)
    # When Lisbon is deleted
    ports.deletions.apply_deletion(deletion)
    # Then Lisbon and every outbox row of it are gone, Berlin is current at its next rev
    stored = ports.store.get_memories("acme", user, [ended.memory_id, lisbon.memory_id])
    assert list(stored) == [ended.memory_id]
    assert stored[ended.memory_id] == VersionedMemory(deletion.changed[0][0], 3)
    assert ports.reader.memory_by_id("acme", lisbon.memory_id) is None
    pending = pending_of(ports, user)
    assert [(c.memory_id, c.rev) for c in pending if c.memory_id == lisbon.memory_id] == []
    # And the deletion's own row is pending for stage 7, on Lisbon's trace
    [announced] = [c for c in pending if deleted_memory_of(c.memory_id) is not None]
    assert deleted_memory_of(announced.memory_id) == (lisbon.memory_id, T0 + timedelta(days=1))
    assert (announced.rev, announced.trace_id) == (1, lisbon.trace_id)
    # And the row holds Berlin only, one version on; the span is on the trace
    assert ports.store.get_fact_row("acme", user, "e-user#lives_in") == fact_row(ended, version=3)
    assert deletion.span in ports.spans.spans_of("acme", lisbon.trace_id)
    # And Berlin's pending memory rows are read as memories, the announcement is not
    assert {m.memory_id for m in ports.store.pending_memories("acme", user, 10)} == {
        ended.memory_id
    }


def test_a_deletion_with_one_stale_condition_applies_nothing(ports: Ports) -> None:
    user = fresh("user")
    ended, lisbon = berlin_then_lisbon(ports, user)
    before = (ports.store.memories_of("acme", user), pending_of(ports, user))
    deletion = lisbon_deleted(user, ended, lisbon)
    stale_row = fact_row(ended, version=1)
    for stale in (
        replace(deletion, removed=VersionedMemory(lisbon, 2)),
        replace(deletion, changed=[(deletion.changed[0][0], 1)]),
        replace(deletion, fact_row=stale_row),
    ):
        with pytest.raises(WriteConflict):
            ports.deletions.apply_deletion(stale)
    assert (ports.store.memories_of("acme", user), pending_of(ports, user)) == before
    assert ports.store.get_fact_row("acme", user, "e-user#lives_in").version == 2
    assert deletion.span not in ports.spans.spans_of("acme", lisbon.trace_id)


def test_a_memory_of_many_revisions_goes_with_every_outbox_row(ports: Ports) -> None:
    # Given a memory written 120 times (more outbox rows than one DynamoDB transaction holds)
    user = fresh("user")
    source_trace(ports, user)
    oslo = memory(user, "Oslo")
    ports.store.commit(commit_of(user, (oslo, None)))
    for rev in range(1, 120):
        changed = oslo.model_copy(update={"confidence": 0.5 + rev / 1000})
        ports.store.commit(commit_of(user, (changed, rev)))
    current = ports.store.get_memories("acme", user, [oslo.memory_id])[oslo.memory_id]
    assert current.rev == 120
    # When it is deleted (an event-like memory: no row to write)
    deletion = replace(
        lisbon_deleted(user, oslo, oslo),
        removed=current,
        changed=[],
        fact_key=None,
        fact_row=None,
        outbox=[],
    )
    ports.deletions.apply_deletion(deletion)
    # Then the memory and all 120 of its outbox rows are gone; only the announcement waits
    assert ports.store.get_memories("acme", user, [oslo.memory_id]) == {}
    assert [deleted_memory_of(c.memory_id) is not None for c in pending_of(ports, user)] == [True]
