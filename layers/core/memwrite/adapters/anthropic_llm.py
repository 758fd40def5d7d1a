"""Anthropic adapter: the extraction call through the `anthropic` SDK, direct or via Bedrock.

The only module that touches `anthropic`, and only inside functions: importing the SDK costs
about 3 s of cold start, which the ingest Lambda must never pay. The SDK retries 408, 409, 429,
5xx and connection errors itself with backoff (`max_retries`); what is left after that is
translated here into memwrite errors, with the SDK error kept as the cause.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import ValidationError

from memwrite.config import ExtractConfig
from memwrite.llm_extractor import (
    LlmCall,
    LlmRequestRejected,
    LlmUnavailable,
    LlmUsage,
    MalformedLlmOutput,
    cost_usd,
    price_per_mtok,
)
from memwrite.prompts import PromptMessage
from memwrite.prompts.extract import ExtractionResult

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

__all__ = ["AnthropicExtractorClient"]

# The statuses the SDK itself retries: still failing after its retries means "try later".
_TRANSIENT_STATUSES = frozenset({408, 409, 429})


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
        # An unpriced model fails at start-up, not after a paid call.
        price_per_mtok(config.model, config.prices_per_mtok)
        import anthropic

        retries = config.max_retries if max_retries is None else max_retries
        timeout_secs = config.timeout_secs

        self._client: Anthropic | AnthropicBedrock
        if config.provider == "anthropic":
            self._client = anthropic.Anthropic(
                api_key=api_key,
                base_url=base_url,
                http_client=http_client,
                max_retries=retries,
                timeout=timeout_secs,
            )
        else:
            # IAM credentials from the default AWS chain: no API key to manage on AWS.
            self._client = anthropic.AnthropicBedrock(
                aws_region=aws_region or config.aws_region,
                base_url=base_url,
                http_client=http_client,
                max_retries=retries,
                timeout=timeout_secs,
            )
        # What `messages.parse(output_format=ExtractionResult)` sends; we call `create` and
        # validate ourselves because `parse` raises before the usage of a malformed answer
        # (tokens paid for) can be read.
        self._output_config: OutputConfigParam = {
            "format": {
                "type": "json_schema",
                "schema": anthropic.transform_schema(ExtractionResult),
            }
        }
        self._max_output_tokens = config.max_output_tokens
        self._prices = config.prices_per_mtok

    def extract(self, system: str, messages: Sequence[PromptMessage], model: str) -> LlmCall:
        import anthropic

        price_per_mtok(model, self._prices)
        params = [_message_param(message) for message in messages]
        try:
            response = self._client.messages.create(
                model=model,
                max_tokens=self._max_output_tokens,
                system=system,
                messages=params,
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
        return LlmCall(result=_parse(response, usage), usage=usage)


def _message_param(message: PromptMessage) -> MessageParam:
    if message["role"] == "user":
        user: UserMessageParam = {"role": "user", "content": message["content"]}
        return user
    assistant: AssistantMessageParam = {"role": "assistant", "content": message["content"]}
    return assistant


def _parse(response: Message, usage: LlmUsage) -> ExtractionResult:
    text = "".join(block.text for block in response.content if block.type == "text")
    try:
        return ExtractionResult.model_validate_json(text)
    except ValidationError as exc:
        raise MalformedLlmOutput(
            f"stop_reason={response.stop_reason}: {_describe(exc)}", usage
        ) from exc


def _describe(exc: ValidationError) -> str:
    """The errors' places and kinds without their input: the answer may quote the turn."""
    errors = exc.errors(include_input=False, include_url=False, include_context=False)
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"]) or "<root>"
    return f"{len(errors)} validation error(s), first at {where}: {first['type']}"
