"""What each function may do to each table: the least-privilege grants, declared once.

A stage added to `memwrite.stages.STAGES` without an entry here fails the synth by name:
its Lambda gets no access by accident.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["FUNCTION_ACCESS", "STAGE_ACCESS", "Access", "access_of_stage"]


class Access(StrEnum):
    READ = "read"
    WRITE = "write"
    READ_WRITE = "read_write"


R, W, RW = Access.READ, Access.WRITE, Access.READ_WRITE
# The memory store's reads (dedupe, conflict): memories, their fact rows, the outbox's pending
# index and the ledger; persist writes all four in one transaction.
_STORE_READ = {"memories": R, "entity_facts": R, "outbox": R, "turns": R}

# stage name -> table logical name (memwrite.schema) -> access
STAGE_ACCESS: dict[str, dict[str, Access]] = {
    "pre_filter": {"turns": RW, "spans": W},  # ledger, traces, rate claims, session's question
    "extract": {"turns": RW, "spans": W},  # the session log (read and appended)
    "resolve_refs": {"entities": RW, "turns": R, "spans": W},
    "dedupe": {**_STORE_READ, "spans": W},
    "conflict": {**_STORE_READ, "spans": W},
    "persist": {"memories": RW, "entity_facts": RW, "outbox": RW, "turns": RW, "spans": W},
    "hype": {"outbox": RW, "memories": R, "spans": W},  # marks outbox rows done
}

# Functions that are not stages.
FUNCTION_ACCESS: dict[str, dict[str, Access]] = {
    "query": {"turns": R, "spans": R},  # traces; issue 10 adds memories (read, erase)
    "dead_letter": {"spans": W},
    "dispatch": {},  # starts executions only
    "authorizer": {},  # keys come from its environment
}


def access_of_stage(name: str) -> dict[str, Access]:
    try:
        return STAGE_ACCESS[name]
    except KeyError:
        raise ValueError(
            f"stage {name!r} has no table access in infra/access.py: declare what it reads "
            "and writes"
        ) from None
