"""Conflict task: what each candidate supersedes (stateful) or contradicts (idempotent).

Input `ItemsPayload`; output the same with `conflict` set on every item.
"""

from functions.store_task import deps, handler_for
from memwrite.store_stages import conflict_stage

__all__ = ["deps", "lambda_handler"]

lambda_handler = handler_for(conflict_stage, "memwrite-conflict")
