"""Persist task: one atomic DynamoDB transaction per candidate, re-planned on a lost race.

Input `ItemsPayload`; output the same with `memory_id` and `outcome` set on every item. A
failure writes error spans and propagates (the state machine's Catch, the DLQ).
"""

from functions.store_task import deps, handler_for
from memwrite.store_stages import persist_stage

__all__ = ["deps", "lambda_handler"]

lambda_handler = handler_for(persist_stage, "memwrite-persist")
