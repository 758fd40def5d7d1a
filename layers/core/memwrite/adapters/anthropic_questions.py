"""Anthropic adapter for HyPE questions: one structured call per memory, direct or via Bedrock.

The SDK call, its lazy import and the error translation are `anthropic_client`'s. A malformed
answer falls back to the template questions (`memwrite.questions`): the memory is still
indexed, with worse questions, rather than stuck in the outbox.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

from memwrite.adapters.anthropic_client import StructuredClient
from memwrite.config import ExtractConfig
from memwrite.errors import MalformedLlmOutput
from memwrite.memory import MemoryUnit
from memwrite.prompts.hype import HypeQuestions, render
from memwrite.questions import TemplateQuestions
from memwrite.usage import LlmUsage

if TYPE_CHECKING:
    import httpx2

__all__ = ["QUESTIONS_MAX_OUTPUT_TOKENS", "AnthropicQuestions"]

logger = logging.getLogger(__name__)

QUESTIONS_MAX_OUTPUT_TOKENS: Final = 512  # three short questions are about 60 tokens


class AnthropicQuestions:
    """`QuestionGenerator` over the Messages API; `calls` keeps the usage of every call."""

    def __init__(
        self,
        config: ExtractConfig,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        http_client: httpx2.Client | None = None,
        max_retries: int | None = None,
    ) -> None:
        self._client = StructuredClient(
            config,
            HypeQuestions,
            api_key=api_key,
            base_url=base_url,
            http_client=http_client,
            max_retries=max_retries,
        )
        self._model = config.model
        self._fallback = TemplateQuestions()
        self.calls: list[LlmUsage] = []

    def questions_for(self, memory: MemoryUnit, count: int) -> list[str]:
        prompt = render(memory, count)
        try:
            answer, usage = self._client.call(
                model=self._model,
                system=prompt.system,
                messages=prompt.messages,
                max_tokens=QUESTIONS_MAX_OUTPUT_TOKENS,
            )
        except MalformedLlmOutput as exc:
            self.calls.append(exc.usage)
            logger.warning("HyPE questions malformed, using templates: %s", exc)
            return self._fallback.questions_for(memory, count)
        self.calls.append(usage)
        return [question.strip() for question in answer.questions if question.strip()][:count]
