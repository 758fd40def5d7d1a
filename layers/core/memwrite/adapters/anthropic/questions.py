"""Anthropic adapter for HyPE questions: one structured call per memory, direct or via Bedrock.

The SDK call is `memwrite.adapters.anthropic.client`'s; the port's shape (templates when the
answer is malformed) is `memwrite.adapters.model_ports`'.
"""

from __future__ import annotations

from typing import Unpack

from memwrite.adapters.anthropic.client import ClientOptions, StructuredClient
from memwrite.adapters.model_ports import QUESTIONS_MAX_OUTPUT_TOKENS, ModelQuestions
from memwrite.config.settings import ExtractConfig
from memwrite.prompts.hype import HypeQuestions

__all__ = ["QUESTIONS_MAX_OUTPUT_TOKENS", "AnthropicQuestions"]


class AnthropicQuestions(ModelQuestions):
    """`QuestionGenerator` over the Messages API."""

    def __init__(self, config: ExtractConfig, **options: Unpack[ClientOptions]) -> None:
        super().__init__(
            StructuredClient(
                config, HypeQuestions, max_tokens=QUESTIONS_MAX_OUTPUT_TOKENS, **options
            )
        )
