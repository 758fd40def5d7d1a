"""Anthropic adapter for extraction: the `ExtractionLlm` port, direct or via Bedrock.

The SDK call is `memwrite.adapters.anthropic.client`'s, the port's shape
`memwrite.adapters.model_ports`'; this adapter adds the answer's schema (`ExtractionResult`)
and the configured output limit, which a cut-off answer doubles once. Built, it warns (once)
when the extraction prompt's cached prefix is under the model's minimum cacheable length:
below it the API caches nothing and says nothing.
"""

from __future__ import annotations

from typing import Unpack

from memwrite.adapters.anthropic.client import (
    ClientOptions,
    StructuredClient,
    warn_if_uncacheable,
)
from memwrite.adapters.model_ports import ModelExtractor
from memwrite.config.settings import ExtractConfig
from memwrite.prompts.extract import CACHED_PREFIX, ExtractionResult

__all__ = ["AnthropicExtractorClient"]


class AnthropicExtractorClient(ModelExtractor):
    """`ExtractionLlm` over the Messages API with structured output (`output_config.format`)."""

    def __init__(self, config: ExtractConfig, **options: Unpack[ClientOptions]) -> None:
        super().__init__(
            StructuredClient(
                config,
                ExtractionResult,
                max_tokens=config.max_output_tokens,
                grow_on_truncation=True,  # a cut-off answer is asked again with more room
                bare_schema=True,  # the prompt's cached prefix describes every field
                **options,
            )
        )
        warn_if_uncacheable("extraction", CACHED_PREFIX, config)
