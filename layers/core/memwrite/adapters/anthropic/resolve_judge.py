"""Anthropic adapter for the resolve-refs judge: one structured call, direct or via Bedrock.

The SDK call is `memwrite.adapters.anthropic.client`'s, the port's shape
`memwrite.adapters.model_ports`'. The answer is validated there as a `ResolveResult`; whether
its refs and options make sense is the caller's check (`memwrite.resolve_refs.references`).
"""

from __future__ import annotations

from typing import Unpack

from memwrite.adapters.anthropic.client import ClientOptions, StructuredClient
from memwrite.adapters.model_ports import JUDGE_MAX_OUTPUT_TOKENS, ModelResolveJudge
from memwrite.config.settings import ExtractConfig
from memwrite.prompts.resolve_refs import ResolveResult

__all__ = ["JUDGE_MAX_OUTPUT_TOKENS", "AnthropicResolveJudge"]


class AnthropicResolveJudge(ModelResolveJudge):
    """`ResolveJudge` over the Messages API with structured output (`output_config.format`).

    The provider, region, timeout, retries and prices are `config`'s.
    """

    def __init__(
        self,
        config: ExtractConfig,
        *,
        max_output_tokens: int = JUDGE_MAX_OUTPUT_TOKENS,
        **options: Unpack[ClientOptions],
    ) -> None:
        super().__init__(
            StructuredClient(config, ResolveResult, max_tokens=max_output_tokens, **options)
        )
