"""Extract task: a batch of one session's queued turns in (`ExtractInput`), candidates out
(`ExtractOutput`): the rule fast-path, then one LLM call for what the rules cannot handle."""

from functions.stage_handler import stage_handler

handler = stage_handler("extract")
lambda_handler = handler.lambda_handler
