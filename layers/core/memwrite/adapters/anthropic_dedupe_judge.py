"""Anthropic adapter for the dedupe judge (tier 3): one structured call, direct or via Bedrock.

The SDK call, its lazy import (no cold start at import), the error translation into the errors
of `memwrite.llm_extractor` and the usage accounting are `memwrite.adapters.anthropic_client`'s.
`LlmUnavailable` propagates so that the state machine retries the candidate later. A malformed
answer is asked again once; if it is still malformed the pair is kept distinct, because a wrong
merge loses a fact while a missed merge only costs a duplicate.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

from memwrite.adapters.anthropic_client import StructuredClient
from memwrite.config import ExtractConfig
from memwrite.errors import MalformedLlmOutput
from memwrite.prompts.dedupe import DedupeVerdict, render
from memwrite.usage import LlmUsage

if TYPE_CHECKING:
    import httpx2

__all__ = ["DEDUPE_MAX_OUTPUT_TOKENS", "AnthropicDedupeJudge"]

logger = logging.getLogger(__name__)

# A verdict is a boolean and a few words: some 30 tokens; the rest is headroom.
DEDUPE_MAX_OUTPUT_TOKENS: Final = 256

_MALFORMED_ATTEMPTS: Final = 2  # the first answer plus one retry


class AnthropicDedupeJudge:
    """`DedupeJudge` over the Messages API with structured output (`output_config.format`).

    The model, provider, region, timeout, retries and prices are the extraction model's
    settings (`ExtractConfig`). `calls` (the usage of every call, malformed answers included)
    and `malformed` (malformed answers) accumulate over the judge's life; the caller reads them
    to emit costs and metrics, and clears them when it reports per invocation.
    """

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
            DedupeVerdict,
            api_key=api_key,
            aws_region=aws_region,
            base_url=base_url,
            http_client=http_client,
            max_retries=max_retries,
        )
        self._model = config.model
        self.calls: list[LlmUsage] = []
        self.malformed = 0

    def same_memory(self, candidate: str, existing: str) -> bool:
        """True when the model says both state the same memory; False when it stays malformed."""
        prompt = render(candidate, existing)
        for attempt in range(1, _MALFORMED_ATTEMPTS + 1):
            try:
                verdict, usage = self._client.call(
                    model=self._model,
                    system=prompt.system,
                    messages=prompt.messages,
                    max_tokens=DEDUPE_MAX_OUTPUT_TOKENS,
                )
            except MalformedLlmOutput as exc:
                self.calls.append(exc.usage)
                self.malformed += 1
                logger.warning("dedupe judge output malformed (attempt %d): %s", attempt, exc)
                continue
            self.calls.append(usage)
            return verdict.same
        logger.warning("dedupe judge output stayed malformed after a retry: kept distinct")
        return False
