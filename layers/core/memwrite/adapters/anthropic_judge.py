"""Anthropic adapter for the resolve-refs judge: one structured call, direct or via Bedrock.

Same contract as `memwrite.adapters.anthropic_llm`: `anthropic` is imported only inside
functions (about 3 s of cold start), the SDK retries 408, 409, 429, 5xx and connection errors
itself, and what is left is translated into the errors of `memwrite.llm_extractor`, with the SDK
error kept as the cause. The answer is validated here as a `ResolveResult`; whether its refs and
options make sense is the caller's check (`memwrite.resolve`).
"""

from __future__ import annotations

from collections.abc import Sequence
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
from memwrite.prompts import PromptMessage
from memwrite.prompts.resolve import ResolveResult

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

__all__ = ["JUDGE_MAX_OUTPUT_TOKENS", "AnthropicResolveJudge"]

# A decision is a ref, an answer and a few words: a batch's worth fits easily.
JUDGE_MAX_OUTPUT_TOKENS: Final = 2_048

# The statuses the SDK itself retries: still failing after its retries means "try later".
_TRANSIENT_STATUSES = frozenset({408, 409, 429})


class AnthropicResolveJudge:
    """`ResolveJudge` over the Messages API with structured output (`output_config.format`).

    The provider, region, timeout, retries and prices are the extraction model's settings
    (`ExtractConfig`): both calls go to the same model family through the same account.
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
        max_output_tokens: int = JUDGE_MAX_OUTPUT_TOKENS,
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
            "format": {"type": "json_schema", "schema": anthropic.transform_schema(ResolveResult)}
        }
        self._max_output_tokens = max_output_tokens
        self._prices = config.prices_per_mtok

    def judge(
        self, system: str, messages: Sequence[PromptMessage], model: str
    ) -> tuple[ResolveResult, LlmUsage]:
        import anthropic

        price_per_mtok(model, self._prices)
        try:
            response = self._client.messages.create(
                model=model,
                max_tokens=self._max_output_tokens,
                system=system,
                messages=[_message_param(message) for message in messages],
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
                model, response.usage.input_tokens, response.usage.output_tokens, self._prices
            ),
        )
        return _parse(response, usage), usage


def _message_param(message: PromptMessage) -> MessageParam:
    if message["role"] == "user":
        user: UserMessageParam = {"role": "user", "content": message["content"]}
        return user
    assistant: AssistantMessageParam = {"role": "assistant", "content": message["content"]}
    return assistant


def _parse(response: Message, usage: LlmUsage) -> ResolveResult:
    text = "".join(block.text for block in response.content if block.type == "text")
    try:
        return ResolveResult.model_validate_json(text)
    except ValidationError as exc:
        # Places and kinds only: the answer may quote the user's turns.
        errors = exc.errors(include_input=False, include_url=False, include_context=False)
        where = ".".join(str(part) for part in errors[0]["loc"]) or "<root>"
        raise MalformedLlmOutput(
            f"stop_reason={response.stop_reason}: {len(errors)} validation error(s), first at "
            f"{where}: {errors[0]['type']}",
            usage,
        ) from exc
