"""Resolve-refs task: each candidate's entity tied to a stable id, or dropped
(`ResolutionFailed`). `ExtractOutput` in, `ItemsPayload` out."""

from functions.stage_handler import stage_handler

handler = stage_handler("resolve_refs")
lambda_handler = handler.lambda_handler
