"""Stage 7 indexes a stream batch together: one embedder call and one index write for all its
rows, a user's memories read at once, the same documents and scores as row by row, and a row
the index refuses fails alone (a partial batch response on AWS; locally its outbox row stays
pending)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any

import pytest

import functions.hype.handler as hype_handler
from memwrite.adapters.aws.opensearch_index import OpenSearchIndex, signed_client
from memwrite.adapters.sqlite.embedded_index import EmbeddedIndex
from memwrite.hype.stage import run, run_batch
from memwrite.index import IndexWrite, MemoryDoc
from memwrite.payloads import OutboxChange
from tests.fake_opensearch import FakeOpenSearch, serving
from tests.integration.conftest import Local, MakeLocal
from tests.streams import stream_event as outbox_stream_event

FACTS = (
    "I live in Lisbon.",
    "I work at Google as an engineer.",
    "My sister is called Ana.",
    "I am allergic to peanuts.",
)
QUERIES = ("Where does the user live?", "Who is Ana?", "What food is dangerous?", "job")


def pipeline_only(local: Local, make_body: Callable[..., dict[str, Any]]) -> Local:
    """The facts persisted by the pipeline; their outbox rows not indexed yet."""
    assert local.post_turns(make_body(*FACTS)).status == 202
    local.runner.index_outbox = lambda report, stop=None: None  # type: ignore[method-assign]
    local.runner.drain()
    return local


@pytest.fixture
def persisted(local: Local, make_body: Callable[..., dict[str, Any]]) -> Local:
    return pipeline_only(local, make_body)


def stream_event(local: Local) -> dict[str, Any]:
    return outbox_stream_event(local.aws.handler_env()["OUTBOX_TABLE"])


def pending(local: Local) -> list[OutboxChange]:
    _, deps = hype_handler.deps()
    rows: list[OutboxChange] = deps.outbox.pending(100)
    return rows


class Counted:
    """Every call of one method, its argument kept, passed on to the real one."""

    def __init__(self, method: Callable[[Any], Any]) -> None:
        self._method = method
        self.calls: list[Any] = []

    def __call__(self, argument: Any) -> Any:
        self.calls.append(list(argument))
        return self._method(argument)


def test_a_batch_is_indexed_with_one_embedder_call_and_one_index_write(
    persisted: Local, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the outbox's stream after the pipeline persisted the memories
    event = stream_event(persisted)
    rows = len(event["Records"])
    assert rows >= len(FACTS)
    _, deps = hype_handler.deps()
    embeds, writes = Counted(deps.embedder.embed), Counted(deps.index.write)
    monkeypatch.setattr(deps.embedder, "embed", embeds)
    monkeypatch.setattr(deps.index, "write", writes)
    reads: list[list[str]] = []
    get_memories = deps.store.get_memories

    def counted_read(tenant: str, user_id: str, ids: Sequence[str]) -> Any:
        reads.append(list(ids))
        return get_memories(tenant, user_id, ids)

    monkeypatch.setattr(deps.store, "get_memories", counted_read)

    # When the hype Lambda gets the whole batch
    response = hype_handler.lambda_handler(event, persisted.runner_context())

    # Then every row was indexed with one embedder call (each memory's text and questions)
    # and one index write holding every document, and no row is pending
    assert response == {"batchItemFailures": []}
    assert len(embeds.calls) == 1
    assert len(writes.calls) == 1
    documents = writes.calls[0]
    assert len(documents) == rows
    assert all(isinstance(doc, MemoryDoc) and doc.vector is not None for doc in documents)
    assert len(embeds.calls[0]) == sum(1 + len(doc.question_vectors) for doc in documents)
    assert deps.index.count(persisted.tenant, "user-1") == rows
    assert pending(persisted) == []
    # And the user's memories were read once before the write and once after (erased meanwhile?)
    assert [len(ids) for ids in reads] == [rows, rows]


def hits(index: Any, embed: Callable[[list[str]], Any], tenant: str) -> list[Any]:
    return [
        [(h.memory_id, h.score, h.matched) for h in index.hybrid(tenant, "user-1", q, v, 10)]
        for q, v in zip(QUERIES, embed(list(QUERIES)), strict=True)
    ]


def test_a_batch_indexes_the_same_documents_with_the_same_scores_as_row_by_row(
    persisted: Local,
) -> None:
    # Given the pending rows, and two empty indexes
    configs, deps = hype_handler.deps()
    changes = pending(persisted)
    one_by_one = EmbeddedIndex(dimension=deps.embedder.dimension)
    batched = EmbeddedIndex(dimension=deps.embedder.dimension)

    # When one index gets the rows one at a time and the other gets them as one batch
    for change in changes:
        run(change, configs.for_request(change.tenant), replace(deps, index=one_by_one))
    outcomes = run_batch(changes, configs.for_request, replace(deps, index=batched))

    # Then every row succeeded, and every query finds the same memories with the same scores
    assert not [outcome for outcome in outcomes if isinstance(outcome, Exception)]
    tenant = persisted.tenant
    assert batched.count(tenant, "user-1") == one_by_one.count(tenant, "user-1") == len(changes)
    assert hits(batched, deps.embedder.embed, tenant) == hits(
        one_by_one, deps.embedder.embed, tenant
    )


@pytest.fixture
def opensearch(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenSearch]:
    with serving(monkeypatch) as server:
        yield server


def test_a_document_opensearch_refuses_fails_its_record_alone(
    persisted: Local, opensearch: FakeOpenSearch, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given OpenSearch (opensearch-py against a fake cluster) that refuses the batch's second
    # document in its `_bulk` reply and takes the others
    _, deps = hype_handler.deps()
    index = OpenSearchIndex(
        signed_client(opensearch.url, "eu-west-1", "es"),
        "memories",
        dimension=deps.embedder.dimension,
    )
    monkeypatch.setattr(deps, "index", index)
    event = stream_event(persisted)
    items: list[dict[str, Any]] = [{"index": {"status": 201}} for _ in event["Records"]]
    items[1] = {"index": {"status": 400, "error": {"type": "mapper_parsing_exception"}}}
    opensearch.replies[("POST", "/_bulk")] = (200, {"errors": True, "items": items})

    # When the hype Lambda gets the batch
    response = hype_handler.lambda_handler(event, persisted.runner_context())

    # Then only that record is reported failed (for the stream's retries), in one request
    second = event["Records"][1]["dynamodb"]["SequenceNumber"]
    assert response == {"batchItemFailures": [{"itemIdentifier": second}]}
    assert [r.path.split("?")[0] for r in opensearch.requests] == ["/_bulk"]
    # And only its row is still pending, with an error span on the trace that wrote it
    refused = OutboxChange.from_row(
        {k: v["S"] for k, v in event["Records"][1]["dynamodb"]["NewImage"].items() if "S" in v}
    )
    assert [(c.memory_id, c.rev) for c in pending(persisted)] == [(refused.memory_id, refused.rev)]
    assert refused.trace_id is not None
    spans = persisted.get_trace(refused.trace_id).body["spans"]
    errors = [
        s["reason"]["error"]
        for s in spans
        if s["stage"] == "hype" and s["item_id"] == f"{refused.memory_id}#{refused.rev}"
    ]
    assert errors == ["IndexUnavailable"]


class RefusingOne:
    """The index, refusing every write of one memory's document (a poison document)."""

    def __init__(self, index: Any, memory_id: str) -> None:
        self._index = index
        self._memory_id = memory_id

    def write(self, writes: Sequence[IndexWrite]) -> dict[int, str]:
        poison = {i for i, w in enumerate(writes) if w.memory_id == self._memory_id}
        refused = self._index.write([w for i, w in enumerate(writes) if i not in poison])
        assert refused == {}
        return dict.fromkeys(poison, "mapper_parsing_exception (status 400)")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._index, name)


def test_locally_a_refused_row_stays_pending_and_the_others_are_indexed(
    make_local: MakeLocal, make_body: Callable[..., dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the local runner (SQLite) with the memories persisted, and an index that refuses
    # the first pending row's document
    local = pipeline_only(make_local(backend="sqlite"), make_body)
    del local.runner.index_outbox  # the runner's own again
    rows = pending(local)
    assert len(rows) >= len(FACTS)
    poison = rows[0].memory_id
    _, deps = hype_handler.deps()
    monkeypatch.setattr(deps, "index", RefusingOne(deps.index, poison))

    # When the runner drains the outbox
    report = local.runner.drain()

    # Then that row alone is given up on after its retries, and stays pending; the others
    # are indexed and done
    assert [key.split("#")[0] for key in report.index_failed] == [poison]
    assert [c.memory_id for c in pending(local)] == [poison]
    assert sorted(i.memory_id for i in report.indexed) == sorted(r.memory_id for r in rows[1:])
    assert deps.index.count(local.tenant, "user-1") == len(rows) - 1
