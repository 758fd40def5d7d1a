"""Anthropic adapters: every model call, direct with an API key or via Bedrock."""
