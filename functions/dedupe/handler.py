"""Dedupe task: marks each candidate new, or a duplicate found by tier 1, 2 or 3.

Input `ItemsPayload`; output the same with `dedupe` set on every item.
"""

from functions.store_task import deps, handler_for
from memwrite.store_stages import dedupe_stage

__all__ = ["deps", "lambda_handler"]

lambda_handler = handler_for(dedupe_stage, "memwrite-dedupe")
