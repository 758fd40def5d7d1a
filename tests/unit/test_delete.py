"""Planning one memory's deletion (`memwrite.edit.delete.plan_deletion`), a pure function of
what was read: the memory goes, its row is derived again without it (what it had ended comes
back, a contradiction it was half of is lifted), and the change feed gets its own row."""

from __future__ import annotations

from memwrite.claims.candidate import MemoryType, Tier
from memwrite.edit.delete import plan_deletion
from memwrite.payloads import OutboxChange
from memwrite.reasons import MemoryDeleted
from memwrite.records.change_events import EventType, deleted_memory_of, memory_deleted_event
from memwrite.records.entity_facts import memory_fact_key
from memwrite.records.store import OutboxOp
from tests.unit.test_rollback import CONFIG, NOW, memory, stored


def test_deleting_the_newer_city_gives_the_older_one_back() -> None:
    # Given Paris (trace a), ended by Berlin (trace b)
    paris = memory("a", "lives_in", "Paris", day=0)
    berlin = memory("b", "lives_in", "Berlin", day=30)
    memories, rows = stored(paris, berlin)
    key = memory_fact_key(berlin)
    assert key is not None
    # When Berlin is planned away
    commit = plan_deletion(
        memories[berlin.memory_id],
        rows[key],
        {paris.memory_id: memories[paris.memory_id]},
        CONFIG,
        NOW,
    )
    # Then Berlin goes on the rev read, its row keeps Paris alone, and Paris is current again
    assert commit.removed == memories[berlin.memory_id]
    assert commit.fact_key == key and commit.fact_row is not None
    assert set(commit.fact_row.facts) == {paris.memory_id}
    [(restored, rev)] = commit.changed
    assert (restored.memory_id, restored.superseded_by, restored.valid_until, rev) == (
        paris.memory_id,
        None,
        None,
        2,
    )
    assert [(r.memory_id, r.op) for r in commit.outbox] == [(paris.memory_id, OutboxOp.UPSERT)]
    assert (commit.record.restored, commit.record.updated) == ([paris.memory_id], [])
    # And the span joins Berlin's trace; the announcement row names Berlin and that trace
    assert (commit.span.trace_id, commit.span.stage, commit.span.reason) == (
        "b",
        "delete",
        MemoryDeleted(memory_id=berlin.memory_id, restored=1),
    )
    assert deleted_memory_of(commit.announcement.memory_id) == (berlin.memory_id, NOW)
    assert commit.announcement.trace_id == "b"


def test_a_contradiction_is_lifted_when_one_side_is_deleted() -> None:
    likes = memory("a", "likes", "cilantro", day=0, stateful=False)
    dislikes = memory("b", "likes", "cilantro", day=1, stateful=False, negated=True)
    memories, rows = stored(likes, dislikes)
    key = memory_fact_key(dislikes)
    assert key is not None and memories[likes.memory_id].memory.tier is Tier.CHALLENGED
    commit = plan_deletion(
        memories[dislikes.memory_id],
        rows[key],
        {likes.memory_id: memories[likes.memory_id]},
        CONFIG,
        NOW,
    )
    [(lifted, _)] = commit.changed
    assert (lifted.links, lifted.tier) == ([], Tier.WORKING)
    # It was active all along: updated, not restored
    assert (commit.record.restored, commit.record.updated) == ([], [likes.memory_id])


def test_an_event_goes_without_a_row() -> None:
    event = memory("a", "event", "ran a marathon", day=0, type=MemoryType.EVENT)
    memories, _ = stored(event)
    commit = plan_deletion(memories[event.memory_id], None, {}, CONFIG, NOW)
    assert (commit.fact_key, commit.fact_row, commit.changed, commit.outbox) == (
        None,
        None,
        [],
        [],
    )


def test_the_deletion_row_is_one_memory_deleted_event_at_its_time() -> None:
    # Given a deletion's outbox row, seen twice
    paris = memory("a", "lives_in", "Paris", day=0)
    memories, _ = stored(paris)
    commit = plan_deletion(memories[paris.memory_id], None, {}, CONFIG, NOW)
    row = OutboxChange(
        tenant="acme", user_id="dana", memory_id=commit.announcement.memory_id, rev=1, trace_id="a"
    )
    first, again = memory_deleted_event(row), memory_deleted_event(row)
    # Then it is memory.deleted for the memory, at the deletion's time, with one id
    assert (first.type, first.memory_id, first.trace_id, first.at) == (
        EventType.MEMORY_DELETED,
        paris.memory_id,
        "a",
        NOW,
    )
    assert first.event_id == again.event_id
