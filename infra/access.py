"""What each function may do: the least-privilege grants.

A stage declares its own in `memwrite.stages.STAGES` (tables, search index, model and embedder);
this module declares the functions that are not stages, and joins the two for the stack.
Tables are `memwrite.schema` logical names.
"""

from __future__ import annotations

from collections.abc import Sequence

from memwrite.schema import Access, SearchAccess
from memwrite.stages import STAGES, StageDef, StagePlacement

__all__ = [
    "EMBEDDING_CALLERS",
    "FUNCTION_ACCESS",
    "LLM_CALLERS",
    "SEARCH_ACCESS",
    "STAGE_ACCESS",
    "USAGE_WRITERS",
    "embedding_callers",
    "llm_callers",
    "search_access",
    "usage_writers",
]

R, W, RW = Access.READ, Access.WRITE, Access.READ_WRITE
RD = Access.READ_DELETE
RP = Access.READ_PUT

# Functions that are not stages.
FUNCTION_ACCESS: dict[str, dict[str, Access]] = {
    # Traces (turns, spans), search and memories (memories; retrieval counters in turns), the
    # erase route (`memwrite.adapters.aws.dynamodb_erase`: exactly these six tables, and its mark
    # on the user's trace rows, which stops persist committing them) and the rollback route
    # (`memwrite.adapters.aws.dynamodb_rollback`: memories, entity_facts and outbox rows put and
    # deleted in one transaction, its record in turns, its span), the delete route (the same
    # tables: `memwrite.adapters.aws.dynamodb_delete`) and the tenant's settings.
    # The backfill route (`memwrite.backfill`) runs the pipeline stages in-process:
    # resolve_refs writes entities, hence RW there; so does the import route
    # (`memwrite.adapters.aws.dynamodb_portability`: entities put only if absent).
    "api": {
        "memories": RW,
        "entity_facts": RW,
        "entities": RW,
        "outbox": RW,
        "turns": RW,
        "spans": RW,
        "tenant_settings": RP,  # GET|PUT /v1/settings: whole items, never a delete
        "usage": R,  # GET /v1/usage: a query of the tenant's hours
    },
    "dead_letter": {"spans": W},
    # The scheduled backfill runs the pipeline's stages in-process (their tables), and finds
    # the users with pending episodes in turns.
    "backfill": {
        "tenant_settings": R,  # extraction's tenant instructions, topics and verifier
        "memories": RW,
        "entity_facts": RW,
        "entities": RW,
        "outbox": RW,
        "turns": RW,
        "spans": RW,
    },
    # The scheduled expiry sweep (`memwrite.expiry`): the `expiry_due` index and the memory
    # (reads), its new rev and outbox row in one transaction (puts). A topic sweep handed to
    # it (`memwrite.edit.topic_sweep`): the tenant's settings, its users' keys (scans), each
    # memory's deletion (memory, fact row, outbox, span) and its episodes (turns).
    "expire": {
        "tenant_settings": R,
        "memories": RW,
        "entity_facts": RW,
        "outbox": RW,
        "turns": RW,
        "spans": W,
    },
    # The webhook delivery lane (`memwrite.feed.delivery`): the tenants' webhooks, and each
    # attempt's span on its trace while the trace exists (turns: read). Its queue's grants
    # come with its event source (infra/webhooks.py).
    "webhook_delivery": {"tenant_settings": R, "turns": R, "spans": W},
    "dispatch": {},  # starts executions only
    "authorizer": {"api_keys": R},  # a key's hash -> tenant (`memwrite keys` writes it)
    "index_setup": {},  # the search index only (deploy time)
}
# What non-stage functions do to the search index: api searches and erases, index_setup
# creates it. These, and the stages that declare `search`, get the OPENSEARCH_* environment.
_FUNCTION_SEARCH: dict[str, SearchAccess] = {
    "api": SearchAccess.READ_WRITE,
    "backfill": SearchAccess.READ,  # dedupe's and persist's look-ups
    "expire": SearchAccess.READ_WRITE,  # documents past their expiry (episodes after TTL)
    "index_setup": SearchAccess.ADMIN,
}
# api embeds search queries, and its replay runs the stages that call the LLM.
_FUNCTION_EMBEDDING_CALLERS = frozenset({"api"})
_FUNCTION_LLM_CALLERS = frozenset({"api", "backfill"})  # backfill: the stages' models


def usage_writers(stages: Sequence[StageDef]) -> frozenset[str]:
    """The functions that meter a tenant's usage (`memwrite.metering`): the API functions
    (every request: turns in, replays' model calls, search queries' embeddings), every stage
    that calls the model or the embedder, and the backfill (its stages in-process). Each adds
    to its hour's counters (UpdateItem `ADD` only)."""
    api = frozenset(stage.name for stage in stages if stage.placement is StagePlacement.INGEST)
    return api | llm_callers(stages) | embedding_callers(stages) | {"api", "backfill"}


def search_access(stages: Sequence[StageDef]) -> dict[str, SearchAccess]:
    """Function -> what it does to the search index (`memwrite.wiring` builds it for each)."""
    return {
        **{stage.name: stage.search for stage in stages if stage.search is not None},
        **_FUNCTION_SEARCH,
    }


def embedding_callers(stages: Sequence[StageDef]) -> frozenset[str]:
    """The functions that call the deployed embedder (`settings.pipeline.search.embedder`)."""
    return frozenset(s.name for s in stages if s.calls_embedder) | _FUNCTION_EMBEDDING_CALLERS


def llm_callers(stages: Sequence[StageDef]) -> frozenset[str]:
    """The functions that call the LLM."""
    return frozenset(s.name for s in stages if s.calls_model) | _FUNCTION_LLM_CALLERS


# The deployed stage list's: stage name -> table logical name -> access, and the above.
STAGE_ACCESS: dict[str, dict[str, Access]] = {s.name: dict(s.tables) for s in STAGES}
SEARCH_ACCESS = search_access(STAGES)
EMBEDDING_CALLERS = embedding_callers(STAGES)
LLM_CALLERS = llm_callers(STAGES)
USAGE_WRITERS = usage_writers(STAGES)
