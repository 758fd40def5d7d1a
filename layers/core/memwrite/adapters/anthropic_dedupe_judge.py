"""Anthropic adapter for the dedupe judge (tier 3): one structured call, direct or via Bedrock.

Same contract as `memwrite.adapters.anthropic_judge`: `anthropic` is imported only inside
functions (about 3 s of cold start), the SDK retries 408, 409, 429, 5xx and connection errors
itself, and what is left is translated into the errors of `memwrite.llm_extractor`, with the SDK
error kept as the cause. `LlmUnavailable` propagates so that the state machine retries the
candidate later. A malformed answer is asked again once; if it is still malformed the pair is
kept distinct, because a wrong merge loses a fact while a missed merge only costs a duplicate.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

from pydantic import ValidationError

from memwrite.config import ExtractConfig
from memwrite.llm_extractor import (
    LlmRequestRejected,
    LlmUnavailable,
    LlmUsage,
    MalformedLlmOutput,
    cost_usd,
    price_per_mtok,
)
from memwrite.prompts import PromptMessage, RenderedPrompt
from memwrite.prompts.dedupe import DedupeVerdict, render

if TYPE_CHECKING:
    import httpx2
    from anthropic import Anthropic, AnthropicBedrock
    from anthropic.types import (
        AssistantMessageParam,
        Message,
        MessageParam,
        OutputConfigParam,
        UserMessageParam,
    )

__all__ = ["DEDUPE_MAX_OUTPUT_TOKENS", "AnthropicDedupeJudge"]

logger = logging.getLogger(__name__)

# A verdict is a boolean and a few words: some 30 tokens; the rest is headroom.
DEDUPE_MAX_OUTPUT_TOKENS: Final = 256

_MALFORMED_ATTEMPTS: Final = 2  # the first answer plus one retry

# The statuses the SDK itself retries: still failing after its retries means "try later".
_TRANSIENT_STATUSES = frozenset({408, 409, 429})


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
        # An unpriced model fails at start-up, not after a paid call.
        price_per_mtok(config.model, config.prices_per_mtok)
        import anthropic

        retries = config.max_retries if max_retries is None else max_retries
        self._client: Anthropic | AnthropicBedrock
        if config.provider == "anthropic":
            self._client = anthropic.Anthropic(
                api_key=api_key,
                base_url=base_url,
                http_client=http_client,
                max_retries=retries,
                timeout=config.timeout_secs,
            )
        else:
            # IAM credentials from the default AWS chain: no API key to manage on AWS.
            self._client = anthropic.AnthropicBedrock(
                aws_region=aws_region or config.aws_region,
                base_url=base_url,
                http_client=http_client,
                max_retries=retries,
                timeout=config.timeout_secs,
            )
        # `create` plus our own validation rather than `parse`: `parse` raises before the usage
        # of a malformed answer (tokens paid for) can be read.
        self._output_config: OutputConfigParam = {
            "format": {"type": "json_schema", "schema": anthropic.transform_schema(DedupeVerdict)}
        }
        self._model = config.model
        self._prices = config.prices_per_mtok
        self.calls: list[LlmUsage] = []
        self.malformed = 0

    def same_memory(self, candidate: str, existing: str) -> bool:
        """True when the model says both state the same memory; False when it stays malformed."""
        prompt = render(candidate, existing)
        for attempt in range(1, _MALFORMED_ATTEMPTS + 1):
            try:
                verdict, usage = self._ask(prompt)
            except MalformedLlmOutput as exc:
                self.calls.append(exc.usage)
                self.malformed += 1
                logger.warning("dedupe judge output malformed (attempt %d): %s", attempt, exc)
                continue
            self.calls.append(usage)
            return verdict.same
        logger.warning("dedupe judge output stayed malformed after a retry: kept distinct")
        return False

    def _ask(self, prompt: RenderedPrompt) -> tuple[DedupeVerdict, LlmUsage]:
        import anthropic

        try:
            response = self._client.messages.create(
                model=self._model,
                max_tokens=DEDUPE_MAX_OUTPUT_TOKENS,
                system=prompt.system,
                messages=[_message_param(message) for message in prompt.messages],
                output_config=self._output_config,
            )
        except anthropic.APIStatusError as exc:
            if exc.status_code in _TRANSIENT_STATUSES or exc.status_code >= 500:
                raise LlmUnavailable(f"model API returned {exc.status_code}") from exc
            raise LlmRequestRejected(
                f"model API rejected the request with {exc.status_code}", exc.status_code
            ) from exc
        except anthropic.APIConnectionError as exc:  # timeouts included
            raise LlmUnavailable(f"model API unreachable: {type(exc).__name__}") from exc
        except anthropic.AnthropicError as exc:  # client-side: credentials, configuration
            raise LlmRequestRejected(f"model call not made: {type(exc).__name__}") from exc
        usage = LlmUsage(
            model=response.model,
            input_tokens=response.usage.input_tokens,
            output_tokens=response.usage.output_tokens,
            cost_usd=cost_usd(
                self._model,
                response.usage.input_tokens,
                response.usage.output_tokens,
                self._prices,
            ),
        )
        return _parse(response, usage), usage


def _message_param(message: PromptMessage) -> MessageParam:
    if message["role"] == "user":
        user: UserMessageParam = {"role": "user", "content": message["content"]}
        return user
    assistant: AssistantMessageParam = {"role": "assistant", "content": message["content"]}
    return assistant


def _parse(response: Message, usage: LlmUsage) -> DedupeVerdict:
    text = "".join(block.text for block in response.content if block.type == "text")
    try:
        return DedupeVerdict.model_validate_json(text)
    except ValidationError as exc:
        # Places and kinds only: the answer may quote the user's memories.
        errors = exc.errors(include_input=False, include_url=False, include_context=False)
        where = ".".join(str(part) for part in errors[0]["loc"]) or "<root>"
        raise MalformedLlmOutput(
            f"stop_reason={response.stop_reason}: {len(errors)} validation error(s), first at "
            f"{where}: {errors[0]['type']}",
            usage,
        ) from exc
