"""Anthropic adapter for HyPE questions: one structured call per memory, direct or via Bedrock.

The SDK call, its lazy import and the error translation are `anthropic_client`'s. A malformed
answer falls back to the template questions (`memwrite.adapters.template_questions`): the
memory is still indexed, with worse questions, rather than stuck in the outbox; the malformed
answer's usage is still reported, as it was paid for.
"""

from __future__ import annotations

import logging
from typing import Final, Unpack

from memwrite.adapters.anthropic.client import ClientOptions, StructuredClient
from memwrite.adapters.template_questions import TemplateQuestions
from memwrite.config import ExtractConfig
from memwrite.errors import MalformedLlmOutput
from memwrite.memory import MemoryUnit
from memwrite.ports import GeneratedQuestions
from memwrite.prompts.hype import HypeQuestions, render

__all__ = ["QUESTIONS_MAX_OUTPUT_TOKENS", "AnthropicQuestions"]

logger = logging.getLogger(__name__)

QUESTIONS_MAX_OUTPUT_TOKENS: Final = 512  # three short questions are about 60 tokens


class AnthropicQuestions:
    """`QuestionGenerator` over the Messages API."""

    def __init__(self, config: ExtractConfig, **options: Unpack[ClientOptions]) -> None:
        self._client = StructuredClient(
            config, HypeQuestions, max_tokens=QUESTIONS_MAX_OUTPUT_TOKENS, **options
        )
        self._fallback = TemplateQuestions()

    def questions_for(self, memory: MemoryUnit, count: int) -> GeneratedQuestions:
        try:
            answer, usage = self._client.call(*render(memory, count))
        except MalformedLlmOutput as exc:
            logger.warning("HyPE questions malformed, using templates: %s", exc)
            fallback = self._fallback.questions_for(memory, count)
            return GeneratedQuestions(fallback.questions, (exc.usage,))
        questions = [question.strip() for question in answer.questions if question.strip()]
        return GeneratedQuestions(questions[:count], (usage,))
