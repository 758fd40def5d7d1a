"""DynamoDB table schemas, defined once: the moto tests, the local runner and CDK all use these.

Keys are generic (`pk`, `sk`) with typed prefixes so one table can hold a few related item
kinds and stay readable: the turns table holds the ledger (`TURN#`), traces (`TRACE#`) and
rate-gate claims (`RATE#`) and each session's redacted turns as extraction saw them
(`SESSION#`, the LLM's context). Its index `lookup` is sparse and overloaded: a trace
item is listed under its user (`USERTRACES#tenant#user`, sorted by `created_at#trace_id`) and a
trace's memory outcome under its memory (`MEMTRACES#tenant#memory_id`). Its index
`pending_episodes` is sparse: it lists the pending episodes alone, so the scheduled backfill
finds who has one without reading the table. (DynamoDB builds one new index per update: a
deployed table gains one index per deploy.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from memwrite.ids import content_hash

__all__ = [
    "API_KEYS",
    "API_KEYS_BY_ID",
    "API_KEYS_LISTING",
    "BUDGET",
    "ENTITIES",
    "ENTITY_FACTS",
    "EXPIRY_DUE",
    "EXPIRY_SHARD",
    "EXPIRY_SHARDS",
    "KEY_LISTING_SHARDS",
    "MEMORIES",
    "MEMORIES_BY_ID",
    "MEMORIES_EXPIRY_DUE",
    "OUTBOX",
    "OUTBOX_PENDING",
    "PARTITION_KEY",
    "PENDING_SHARD",
    "PENDING_SHARDS",
    "PENDING_USER",
    "SORT_KEY",
    "SPANS",
    "SPANS_BY_USER",
    "TABLES",
    "TENANT_SETTINGS",
    "TTL_ATTRIBUTE",
    "TURNS",
    "TURNS_LOOKUP",
    "TURNS_PENDING_EPISODES",
    "USAGE",
    "Access",
    "GlobalIndex",
    "SearchAccess",
    "StreamView",
    "TableSchema",
    "expiry_due_sort",
    "expiry_shard_of",
    "key_listing_shard_of",
    "outbox_sort_key",
    "pending_shard_of",
]


# Every table keys its items the same way; adapters take these names from here.
PARTITION_KEY = "pk"
SORT_KEY = "sk"
TTL_ATTRIBUTE = "expires_at"


class StreamView(StrEnum):
    NEW_IMAGE = "NEW_IMAGE"
    NEW_AND_OLD_IMAGES = "NEW_AND_OLD_IMAGES"


@dataclass(frozen=True)
class GlobalIndex:
    name: str
    partition_key: str
    sort_key: str | None = None
    keys_only: bool = False  # project the keys alone (a listing needs nothing more)


@dataclass(frozen=True)
class TableSchema:
    """Key design of one table; `logical_name` is the role, not the deployed name."""

    logical_name: str
    partition_key: str = PARTITION_KEY
    sort_key: str | None = SORT_KEY
    ttl_attribute: str | None = None
    stream: StreamView | None = None
    indexes: tuple[GlobalIndex, ...] = field(default=())

    def create_table_kwargs(self, table_name: str) -> dict[str, Any]:
        """Arguments for `create_table` (on-demand billing; every key attribute is a string)."""
        attributes = {self.partition_key}
        keys = [{"AttributeName": self.partition_key, "KeyType": "HASH"}]
        if self.sort_key:
            attributes.add(self.sort_key)
            keys.append({"AttributeName": self.sort_key, "KeyType": "RANGE"})
        indexes = []
        for index in self.indexes:
            index_keys = [{"AttributeName": index.partition_key, "KeyType": "HASH"}]
            attributes.add(index.partition_key)
            if index.sort_key:
                attributes.add(index.sort_key)
                index_keys.append({"AttributeName": index.sort_key, "KeyType": "RANGE"})
            indexes.append(
                {
                    "IndexName": index.name,
                    "KeySchema": index_keys,
                    "Projection": {"ProjectionType": "KEYS_ONLY" if index.keys_only else "ALL"},
                }
            )
        kwargs: dict[str, Any] = {
            "TableName": table_name,
            "KeySchema": keys,
            "AttributeDefinitions": [
                {"AttributeName": name, "AttributeType": "S"} for name in sorted(attributes)
            ],
            "BillingMode": "PAY_PER_REQUEST",
        }
        if indexes:
            kwargs["GlobalSecondaryIndexes"] = indexes
        if self.stream:
            kwargs["StreamSpecification"] = {
                "StreamEnabled": True,
                "StreamViewType": self.stream.value,
            }
        return kwargs


LOOKUP_KEY, LOOKUP_SORT = "lookup_key", "lookup_sort"
TURNS_LOOKUP = GlobalIndex("lookup", partition_key=LOOKUP_KEY, sort_key=LOOKUP_SORT)
# `pending_episodes`: the episodes still pending (docs/design.md §10), under their user
# (`tenant#user_id`). Sparse: the attributes exist only while the episode is pending, so the
# scheduled backfill reads who has work, never the table. Spread over `PENDING_SHARDS` fixed
# partitions (by user) so no one key takes every deferred turn of an outage.
PENDING_SHARDS = tuple(f"PENDING#{n}" for n in range(4))
PENDING_SHARD, PENDING_USER = "pending_shard", "pending_user"
TURNS_PENDING_EPISODES = GlobalIndex(
    "pending_episodes", partition_key=PENDING_SHARD, sort_key=PENDING_USER, keys_only=True
)
TURNS = TableSchema(
    logical_name="turns",
    ttl_attribute=TTL_ATTRIBUTE,
    indexes=(TURNS_LOOKUP, TURNS_PENDING_EPISODES),
)


def pending_shard_of(tenant: str, user_id: str) -> str:
    """The `pending_episodes` partition of a user's episodes: one of `PENDING_SHARDS`."""
    return PENDING_SHARDS[int(content_hash("pending", tenant, user_id), 16) % len(PENDING_SHARDS)]


SPAN_USER_KEY, SPAN_AT = "user_key", "at"  # a user's spans over time
SPANS_BY_USER = GlobalIndex("by_user", partition_key=SPAN_USER_KEY, sort_key=SPAN_AT)
SPANS = TableSchema(logical_name="spans", indexes=(SPANS_BY_USER,))
# pk = tenant#user_id, sk = memory_id; `by_id` finds a memory from its id alone (GET by id).
MEMORIES_BY_ID = GlobalIndex("by_id", partition_key="id_key")
# `expiry_due`: the memories whose user expiry the sweep (`memwrite.expiry`) has still to
# announce, by when (`MemoryUnit.expiry_due`). Sparse: its attributes exist only while there is
# something to announce, so the sweep reads the due items alone, never the table. Spread over
# `EXPIRY_SHARDS` fixed partitions (by memory id) so no one key takes every write of an expiry.
EXPIRY_SHARDS = tuple(f"EXPIRY#{n}" for n in range(4))
EXPIRY_SHARD, EXPIRY_DUE = "expiry_shard", "expiry_due"
MEMORIES_EXPIRY_DUE = GlobalIndex("expiry_due", partition_key=EXPIRY_SHARD, sort_key=EXPIRY_DUE)
MEMORIES = TableSchema(
    logical_name="memories",
    ttl_attribute=TTL_ATTRIBUTE,  # tasks are ephemeral
    indexes=(MEMORIES_BY_ID, MEMORIES_EXPIRY_DUE),
)


def expiry_shard_of(memory_id: str) -> str:
    """The `expiry_due` partition of a memory: one of `EXPIRY_SHARDS`, fixed by its id."""
    return EXPIRY_SHARDS[int(content_hash("expiry", memory_id), 16) % len(EXPIRY_SHARDS)]


def expiry_due_sort(at: datetime) -> str:
    """The `expiry_due` sort key: UTC, fixed width, so string order is time order."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# pk = tenant#user_id, sk = entity_id#predicate (stateful) or entity_id#predicate#value-hash
# (idempotent): every observation of one predicate (value) and a version.
ENTITY_FACTS = TableSchema(logical_name="entity_facts")
# pk = tenant#user_id, sk = entity_id: canonical name, kind and accumulated aliases.
ENTITIES = TableSchema(logical_name="entities")
# pk = tenant#user_id, sk = memory_id#rev: one row per memory change for the indexer (stage 7).
# `pending_key` exists only until the row is indexed, so the sparse `pending` index lists
# exactly the not-yet-indexed changes of a user.
OUTBOX_PENDING = GlobalIndex("pending", partition_key="pending_key", sort_key=SORT_KEY)
OUTBOX = TableSchema(logical_name="outbox", stream=StreamView.NEW_IMAGE, indexes=(OUTBOX_PENDING,))


def outbox_sort_key(memory_id: str, rev: int) -> str:
    """`memory_id#rev`, the rev zero-padded so that a memory's rows sort in write order."""
    return f"{memory_id}#{rev:08d}"


# pk = SHA-256 of an API key (hex), never the key: `key_id` (public, for `memwrite keys list |
# revoke`), `tenant`, `created_at`. Read by the authorizer only; the CLI writes it with the
# operator's credentials. `by_key_id` finds a key's item from its id (revoke); `listing` lists
# the keys (`memwrite keys list`) by tenant, a query per shard (`KEY_LISTING_SHARDS`, by key
# id), never a scan.
API_KEYS_BY_ID = GlobalIndex("by_key_id", partition_key="key_id")
KEY_LISTING_SHARDS = tuple(f"KEYS#{n}" for n in range(4))
API_KEYS_LISTING = GlobalIndex("listing", partition_key="listing_shard", sort_key="listing_sort")
API_KEYS = TableSchema(
    logical_name="api_keys", sort_key=None, indexes=(API_KEYS_BY_ID, API_KEYS_LISTING)
)


def key_listing_shard_of(key_id: str) -> str:
    """The `listing` partition of a key: one of `KEY_LISTING_SHARDS`, fixed by its id."""
    return KEY_LISTING_SHARDS[int(content_hash("keys", key_id), 16) % len(KEY_LISTING_SHARDS)]


# pk = tenant: its own settings (`PUT /v1/settings`) as one JSON document (`settings`) and
# `updated_at`. Written by the api function, read by the stages that use settings.
TENANT_SETTINGS = TableSchema(logical_name="tenant_settings", sort_key=None)

# pk = one shard of one model-budget bucket (`memwrite.budget`): `model#provider/model#n` or
# `tenant#tenant#provider/model#n`, n < `pipeline.model.shards`, each holding its part of the
# limits so that no one item takes every call's conditional write. Attributes: the levels
# (`r`, `i`, `o`), `at`, the AIMD `f`, `blocked` (retry-after), `decreased`, a version `v`
# every write is conditioned on, and a TTL (an idle bucket's item goes; absent is full).
# Written by every function that calls the model.
BUDGET = TableSchema(logical_name="budget", sort_key=None, ttl_attribute=TTL_ATTRIBUTE)

# pk = tenant, sk = a UTC hour (`2026-11-27T21`): that hour's usage counters (`memwrite.
# metering`), each unit of work adding to them with one `ADD` update; `GET /v1/usage` queries
# a tenant's range of hours. Written by every function that meters (Access.UPDATE), read by the
# api function.
USAGE = TableSchema(logical_name="usage")

TABLES = (
    TURNS,
    SPANS,
    MEMORIES,
    ENTITY_FACTS,
    ENTITIES,
    OUTBOX,
    API_KEYS,
    TENANT_SETTINGS,
    BUDGET,
    USAGE,
)


class Access(StrEnum):
    """What a function may do to one table (its Lambda role's grant)."""

    READ = "read"
    WRITE = "write"
    READ_WRITE = "read_write"
    # Reads and deletes, no puts or updates (the erase route). DynamoDB's BatchWriteItem
    # action covers batched puts too: IAM cannot tell them apart.
    READ_DELETE = "read_delete"
    # Reads and PutItem only: replaces whole items, never deletes (tenant settings, the model
    # budget's shards).
    READ_PUT = "read_put"
    # UpdateItem only: counters added to, never read, replaced or deleted (the usage meter).
    UPDATE = "update"


class SearchAccess(StrEnum):
    """What a function may do to the search index (and whether it gets its environment)."""

    READ = "read"  # BM25 / kNN / hybrid queries
    READ_WRITE = "read_write"  # also index and delete documents
    ADMIN = "admin"  # create the index and the hybrid search pipeline
