"""Persist task: one atomic DynamoDB transaction per candidate, committing what dedupe and
conflict decided; decided again only when the transaction is refused."""

from functions.stage_handler import stage_handler

handler = stage_handler("persist")
lambda_handler = handler.lambda_handler
