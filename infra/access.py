"""What each function may do: the least-privilege grants, declared once.

A stage added to `memwrite.stages.STAGES` without an entry here fails the synth by name:
its Lambda gets no access by accident. Tables are `memwrite.schema` logical names.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "EMBEDDING_CALLERS",
    "FUNCTION_ACCESS",
    "LLM_CALLERS",
    "SEARCH_ACCESS",
    "STAGE_ACCESS",
    "Access",
    "SearchAccess",
    "access_of_stage",
]


class Access(StrEnum):
    READ = "read"
    WRITE = "write"
    READ_WRITE = "read_write"
    # Reads and deletes, no puts or updates (the erase route). DynamoDB's BatchWriteItem
    # action covers batched puts too: IAM cannot tell them apart.
    READ_DELETE = "read_delete"


R, W, RW = Access.READ, Access.WRITE, Access.READ_WRITE
RD = Access.READ_DELETE
# The memory store's reads (dedupe, conflict): memories, their fact rows, the outbox's pending
# index and the ledger; persist writes all four in one transaction, which also checks the
# source trace (a ConditionCheck on the turns table: part of the read grant).
_STORE_READ = {"memories": R, "entity_facts": R, "outbox": R, "turns": R}

# stage name -> table logical name (memwrite.schema) -> access
STAGE_ACCESS: dict[str, dict[str, Access]] = {
    "pre_filter": {"turns": RW, "spans": W},  # ledger, traces, rate claims, session's question
    # The session log (read, and appended with its source trace's ConditionCheck)
    "extract": {"turns": RW, "spans": W},
    # Entities written with their source traces' ConditionChecks (part of the turns read grant)
    "resolve_refs": {"entities": RW, "turns": R, "spans": W},
    "dedupe": {**_STORE_READ, "spans": W},
    "conflict": {**_STORE_READ, "spans": W},
    "persist": {"memories": RW, "entity_facts": RW, "outbox": RW, "turns": RW, "spans": W},
    "hype": {"outbox": RW, "memories": R, "spans": W},  # marks outbox rows done
}

# Functions that are not stages.
FUNCTION_ACCESS: dict[str, dict[str, Access]] = {
    # Traces (turns, spans), search and memories (memories; retrieval counters in turns), the
    # erase route (`memwrite.adapters.aws.dynamodb_erase`: exactly these six tables, and its mark
    # on the user's trace rows, which stops persist committing them) and the rollback route
    # (`memwrite.adapters.aws.dynamodb_rollback`: memories, entity_facts and outbox rows put and
    # deleted in one transaction, its record in turns, its span).
    "query": {
        "memories": RW,
        "entity_facts": RW,
        "entities": RD,
        "outbox": RW,
        "turns": RW,
        "spans": RW,
    },
    "dead_letter": {"spans": W},
    "dispatch": {},  # starts executions only
    "authorizer": {"api_keys": R},  # a key's hash -> tenant (`memwrite keys` writes it)
    "index_setup": {},  # the search index only (deploy time)
}


class SearchAccess(StrEnum):
    READ = "read"  # BM25 / kNN / hybrid queries
    READ_WRITE = "read_write"  # also index and delete documents
    ADMIN = "admin"  # create the index and the hybrid search pipeline


# Function -> what it does to the search index (`memwrite.wiring` builds the index for each):
# dedupe and persist look up indexed events and tasks, hype indexes, query searches and erases.
# These functions, and only these, get the OPENSEARCH_* environment.
SEARCH_ACCESS: dict[str, SearchAccess] = {
    "dedupe": SearchAccess.READ,
    "persist": SearchAccess.READ,
    "hype": SearchAccess.READ_WRITE,
    "query": SearchAccess.READ_WRITE,
    "index_setup": SearchAccess.ADMIN,
}

# Functions that call the deployed embedder (`settings.pipeline.search.embedder`): hype embeds
# memories and their questions, query embeds search queries.
EMBEDDING_CALLERS = frozenset({"hype", "query"})
# Functions that call the LLM: extract, the resolve and dedupe judges (dedupe, persist), the
# verifier (extract) and HyPE's question generator (hype); query's replay runs those stages.
LLM_CALLERS = frozenset({"extract", "resolve_refs", "dedupe", "persist", "hype", "query"})


def access_of_stage(name: str) -> dict[str, Access]:
    try:
        return STAGE_ACCESS[name]
    except KeyError:
        raise ValueError(
            f"stage {name!r} has no table access in infra/access.py: declare what it reads "
            "and writes"
        ) from None
