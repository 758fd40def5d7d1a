"""Anthropic adapter for the resolve-refs judge: one structured call, direct or via Bedrock.

The SDK call, its lazy import (no cold start at import), the error translation into the errors
of `memwrite.extract.llm` and the usage accounting are `memwrite.adapters.anthropic.client`'s.
The answer is validated there as a `ResolveResult`; whether its refs and options make sense is
the caller's check (`memwrite.resolve_refs.references`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Unpack

from memwrite.adapters.anthropic.client import ClientOptions, StructuredClient
from memwrite.config import ExtractConfig
from memwrite.prompts import PromptMessage
from memwrite.prompts.resolve_refs import ResolveResult
from memwrite.usage import LlmUsage

__all__ = ["JUDGE_MAX_OUTPUT_TOKENS", "AnthropicResolveJudge"]

# A decision is a ref, an answer and a few words: a batch's worth fits easily.
JUDGE_MAX_OUTPUT_TOKENS: Final = 2_048


class AnthropicResolveJudge:
    """`ResolveJudge` over the Messages API with structured output (`output_config.format`).

    The provider, region, timeout, retries and prices are the extraction model's settings
    (`ExtractConfig`): both calls go to the same model family through the same account.
    """

    def __init__(
        self,
        config: ExtractConfig,
        *,
        max_output_tokens: int = JUDGE_MAX_OUTPUT_TOKENS,
        **options: Unpack[ClientOptions],
    ) -> None:
        self._client = StructuredClient(
            config, ResolveResult, max_tokens=max_output_tokens, **options
        )

    def judge(
        self, system: str, messages: Sequence[PromptMessage], model: str
    ) -> tuple[ResolveResult, LlmUsage]:
        return self._client.call(system, messages, model=model)
