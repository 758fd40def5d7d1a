"""Store cost per candidate: DynamoDB calls (reads, writes, items written) by store size.

The number of operations a candidate costs must not grow with how many memories the user
already has. Counted with botocore's event hooks on the real client against moto (moto's
timings are not DynamoDB's, so only counts are reported).
"""

from __future__ import annotations

import itertools
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3

from memwrite.adapters.aws.dynamodb_ledger import DynamoTurnLedger
from memwrite.adapters.aws.dynamodb_store import DynamoMemoryStore, StoreTables
from memwrite.adapters.in_memory import CountingMetrics, InMemorySpanStore
from memwrite.claims.candidate import Candidate
from memwrite.claims.entities import entity_id_for
from memwrite.config.settings import PipelineConfig
from memwrite.embedder import HashingEmbedder
from memwrite.persist.stage import PersistDeps, persist_candidate
from memwrite.records.store import StoreItem
from memwrite_local.runtime.aws import LocalAws
from tests.sources import record_trace

SIZES = (10, 100, 1_000)
MEASURED = 20
READS = frozenset({"GetItem", "BatchGetItem", "Query", "Scan"})
WRITES = frozenset({"PutItem", "TransactWriteItems", "UpdateItem", "BatchWriteItem"})
T0 = datetime(2025, 1, 1, tzinfo=UTC)
_turns = itertools.count()


def _candidate(attribute: str, value: str, stateful: bool, kind: str = "fact") -> Candidate:
    return Candidate.model_validate(
        {
            "text": f"The user {attribute.replace('_', ' ')} {value}.",
            "type": kind,
            "topic": "bench",
            "entity": "user",
            "attribute": attribute,
            "value": value,
            "predicate_is_stateful": stateful,
            "importance": 0.5,
            "confidence": 0.9,
            "grounded": True,
            "quality": {"verdict": "keep", "reason": "explicit statement"},
            "search_questions": ["What?", "Which?", "Who?"],
        }
    )


def _item(user: str, candidate: Candidate, day: int) -> StoreItem:
    return StoreItem(
        candidate=candidate,
        entity_id=entity_id_for("bench", user, "user"),
        tenant="bench",
        user_id=user,
        session_id="s",
        trace_id="t",
        turn_id=f"turn-{next(_turns)}",
        observed_at=T0 + timedelta(days=day),
        source="user_explicit",
    )


def _workload(user: str) -> list[StoreItem]:
    """New idempotent facts, a move (supersession), a repeat (merge), an event."""
    items = []
    for index in range(MEASURED // 4):
        items.append(_item(user, _candidate("likes", f"new thing {index}", False), 400 + index))
        items.append(_item(user, _candidate("lives_in", f"City {index}", True), 400 + index))
        items.append(_item(user, _candidate("likes", "thing 0", False), 400 + index))
        items.append(
            _item(user, _candidate("attended", f"concert {index}", False, "event"), 400 + index)
        )
    return items


def run() -> list[dict[str, Any]]:
    config = PipelineConfig()
    results = []
    with LocalAws() as aws:
        env = aws.handler_env()
        client = boto3.client("dynamodb")
        store = DynamoMemoryStore(
            client,
            StoreTables(
                memories=env["MEMORIES_TABLE"],
                entity_facts=env["ENTITY_FACTS_TABLE"],
                outbox=env["OUTBOX_TABLE"],
                turns=env["TURNS_TABLE"],
            ),
        )
        # Every candidate comes from trace "t" (`_item`), recorded as ingest records it.
        record_trace(DynamoTurnLedger(client, env["TURNS_TABLE"]), "bench", "user", "t")
        deps = PersistDeps(
            store=store,
            embedder=HashingEmbedder(),
            spans=InMemorySpanStore(),
            metrics=CountingMetrics(),
        )
        calls: Counter[str] = Counter()
        written: Counter[str] = Counter()

        def count(event_name: str, params: dict[str, Any], **_: Any) -> None:
            operation = event_name.rsplit(".", 1)[-1]
            calls[operation] += 1
            if operation == "TransactWriteItems":
                written["items"] += len(params["TransactItems"])

        client.meta.events.register("provide-client-params.dynamodb.*", count)
        for size in SIZES:
            user = f"user-{size}"
            for index in range(size):
                persist_candidate(
                    _item(user, _candidate("likes", f"thing {index}", False), index % 365),
                    config,
                    deps,
                )
            calls.clear()
            written.clear()
            for item in _workload(user):
                persist_candidate(item, config, deps)
            reads = sum(n for op, n in calls.items() if op in READS)
            writes = sum(n for op, n in calls.items() if op in WRITES)
            results.append(
                {
                    "memories_of_user": size,
                    "candidates": MEASURED,
                    "reads_per_candidate": round(reads / MEASURED, 2),
                    "writes_per_candidate": round(writes / MEASURED, 2),
                    # Puts plus the one ConditionCheck on the source trace.
                    "transaction_items_per_candidate": round(written["items"] / MEASURED, 2),
                    # Dedupe of events and tasks reads the outbox's pending index; the search
                    # index itself is not queried on the write path yet (stage 7 fills it).
                    "outbox_pending_queries_per_candidate": round(calls["Query"] / MEASURED, 2),
                    "calls": dict(calls),
                }
            )
    return results


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
