"""Anthropic adapter for the dedupe judge (tier 3): one structured call, direct or via Bedrock.

The SDK call, its lazy import (no cold start at import), the error translation into the errors
of `memwrite.extract.llm` and the usage accounting are `memwrite.adapters.anthropic.client`'s.
`LlmUnavailable` propagates so that the state machine retries the candidate later. A malformed
answer is asked again once; if it is still malformed the pair is kept distinct, because a wrong
merge loses a fact while a missed merge only costs a duplicate.
"""

from __future__ import annotations

import logging
from typing import Final, Unpack

from memwrite.adapters.anthropic.client import ClientOptions, StructuredClient
from memwrite.config import ExtractConfig
from memwrite.errors import MalformedLlmOutput
from memwrite.ports import DedupeJudgement
from memwrite.prompts.dedupe import DedupeVerdict, render
from memwrite.usage import LlmUsage

__all__ = ["DEDUPE_MAX_OUTPUT_TOKENS", "AnthropicDedupeJudge"]

logger = logging.getLogger(__name__)

# A verdict is a boolean and a few words: some 30 tokens; the rest is headroom.
DEDUPE_MAX_OUTPUT_TOKENS: Final = 256

_MALFORMED_ATTEMPTS: Final = 2  # the first answer plus one retry


class AnthropicDedupeJudge:
    """`DedupeJudge` over the Messages API with structured output (`output_config.format`).

    The model, provider, region, timeout, retries and prices are the extraction model's
    settings (`ExtractConfig`).
    """

    def __init__(self, config: ExtractConfig, **options: Unpack[ClientOptions]) -> None:
        self._client = StructuredClient(
            config, DedupeVerdict, max_tokens=DEDUPE_MAX_OUTPUT_TOKENS, **options
        )

    def same_memory(self, candidate: str, existing: str) -> DedupeJudgement:
        """The model's verdict (distinct when it stays malformed) and every call it took."""
        prompt = render(candidate, existing)
        calls: list[LlmUsage] = []
        for attempt in range(1, _MALFORMED_ATTEMPTS + 1):
            try:
                verdict, usage = self._client.call(*prompt)
            except MalformedLlmOutput as exc:
                calls.append(exc.usage)
                logger.warning("dedupe judge output malformed (attempt %d): %s", attempt, exc)
                continue
            calls.append(usage)
            return DedupeJudgement(verdict.same, tuple(calls), malformed=attempt - 1)
        logger.warning("dedupe judge output stayed malformed after a retry: kept distinct")
        return DedupeJudgement(False, tuple(calls), malformed=_MALFORMED_ATTEMPTS)
