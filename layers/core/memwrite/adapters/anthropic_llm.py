"""Anthropic adapter for extraction: the `ExtractionLlm` port, direct or via Bedrock.

The SDK call, its lazy import (no cold start at import), the error translation and the usage
accounting are `memwrite.adapters.anthropic_client`'s; this adapter adds the answer's schema
(`ExtractionResult`) and the configured output limit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from memwrite.adapters.anthropic_client import StructuredClient
from memwrite.config import ExtractConfig
from memwrite.ports import LlmCall
from memwrite.prompts import PromptMessage
from memwrite.prompts.extract import ExtractionResult

if TYPE_CHECKING:
    import httpx2

__all__ = ["AnthropicExtractorClient"]


class AnthropicExtractorClient:
    """`ExtractionLlm` over the Messages API with structured output (`output_config.format`)."""

    def __init__(
        self,
        config: ExtractConfig,
        *,
        api_key: str | None = None,
        aws_region: str | None = None,
        base_url: str | None = None,
        http_client: httpx2.Client | None = None,
        max_retries: int | None = None,
    ) -> None:
        """Limits come from `config`; the keyword arguments are for endpoints and tests."""
        self._client = StructuredClient(
            config,
            ExtractionResult,
            api_key=api_key,
            aws_region=aws_region,
            base_url=base_url,
            http_client=http_client,
            max_retries=max_retries,
        )
        self._max_output_tokens = config.max_output_tokens

    def extract(self, system: str, messages: Sequence[PromptMessage], model: str) -> LlmCall:
        result, usage = self._client.call(
            model=model, system=system, messages=messages, max_tokens=self._max_output_tokens
        )
        return LlmCall(result=result, usage=usage)
