"""Anthropic adapter for the dedupe judge (tier 3): one structured call, direct or via Bedrock.

The SDK call is `memwrite.adapters.anthropic.client`'s; the port's shape (a malformed answer
asked again once, then the pair kept distinct) is `memwrite.adapters.model_ports`'.
"""

from __future__ import annotations

from typing import Unpack

from memwrite.adapters.anthropic.client import ClientOptions, StructuredClient
from memwrite.adapters.model_ports import DEDUPE_MAX_OUTPUT_TOKENS, ModelDedupeJudge
from memwrite.config.settings import ExtractConfig
from memwrite.prompts.dedupe import DedupeVerdict

__all__ = ["DEDUPE_MAX_OUTPUT_TOKENS", "AnthropicDedupeJudge"]


class AnthropicDedupeJudge(ModelDedupeJudge):
    """`DedupeJudge` over the Messages API with structured output (`output_config.format`).

    The model, provider, region, timeout, retries and prices are `config`'s.
    """

    def __init__(self, config: ExtractConfig, **options: Unpack[ClientOptions]) -> None:
        super().__init__(
            StructuredClient(config, DedupeVerdict, max_tokens=DEDUPE_MAX_OUTPUT_TOKENS, **options)
        )
