"""Dedupe task: each candidate marked new, or a duplicate found by tier 1, 2 or 3; the decision
is recorded on the item (`DedupeNote`) for persist to commit."""

from functions.stage_handler import stage_handler

handler = stage_handler("dedupe")
lambda_handler = handler.lambda_handler
