"""Conflict task: what each keyed candidate supersedes (stateful) or contradicts (idempotent);
the decision is recorded on the item (`ConflictNote`) for persist to commit."""

from functions.stage_handler import stage_handler

handler = stage_handler("conflict")
lambda_handler = handler.lambda_handler
