"""Any Bedrock model through the Converse API (provider `bedrock-converse`): Claude, Amazon
Nova, Meta Llama, ... with one request shape and IAM credentials.

The answer's schema is a tool (`toolConfig`) whose input is the adapter's pydantic model: the
model answers by calling it. Claude and Nova are told to (`toolChoice: tool`); the others
(Llama) do not take a forced tool choice (API_runtime_ToolChoice), so they get `auto` and the
instruction in the system prompt, and an answer given as text is read as JSON all the same.
What every provider shares (the model budget, the one retry of a truncated answer,
validation, usage reporting) is `memwrite.adapters.structured.StructuredCalls`'s; the ports'
shapes are `memwrite.adapters.model_ports`'.

Stop reasons: `max_tokens` (and `model_context_window_exceeded`) is a cut-off answer;
`content_filtered` and `guardrail_intervened` are `LlmRefused`; `malformed_tool_use` and
`malformed_model_output` have no valid answer (`MalformedLlmOutput`, asked again by the
caller). botocore retries throttling and 5xx itself (standard mode, `ExtractConfig.max_retries`
retries); what is left is translated here: `ThrottlingException` and
`ServiceUnavailableException` lower the model budget's limits and are `LlmUnavailable`, as are
the model's own transient faults; a request Bedrock refuses (validation, access, an unknown
model) is `LlmRequestRejected`. The budget is charged as provider `bedrock` (the account's
Bedrock quotas). Prompt caching: a `SystemPrompt`'s shared prefix is followed by a
`cachePoint` block for the models Bedrock caches for (Claude 3.5 Haiku, 3.7 Sonnet and 4.x,
Nova); `cacheReadInputTokens` / `cacheWriteInputTokens` are read with the usage and priced
(`memwrite.costs.pricing`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Final, TypedDict, Unpack

from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    NoCredentialsError,
    NoRegionError,
    ParamValidationError,
)

from memwrite.adapters.model_ports import (
    DEDUPE_MAX_OUTPUT_TOKENS,
    JUDGE_MAX_OUTPUT_TOKENS,
    QUESTIONS_MAX_OUTPUT_TOKENS,
    ModelDedupeJudge,
    ModelExtractor,
    ModelQuestions,
    ModelResolveJudge,
    ModelVerifier,
)
from memwrite.adapters.structured import (
    ModelAnswer,
    ResultT,
    StructuredCalls,
    without_descriptions,
)
from memwrite.budget import ModelBudget
from memwrite.config.model_limits import budget_provider
from memwrite.config.settings import ExtractConfig
from memwrite.costs.pricing import cost_usd
from memwrite.costs.usage import LlmUsage
from memwrite.errors import LlmRequestRejected, LlmUnavailable
from memwrite.prompts import PromptMessage, SystemPrompt
from memwrite.prompts.dedupe import DedupeVerdict
from memwrite.prompts.extract import ExtractionResult
from memwrite.prompts.hype import HypeQuestions
from memwrite.prompts.resolve_refs import ResolveResult
from memwrite.prompts.verify import VerifierVerdict

__all__ = [
    "TOOL_NAME",
    "ConverseClient",
    "ConverseDedupeJudge",
    "ConverseExtractor",
    "ConverseOptions",
    "ConverseQuestions",
    "ConverseResolveJudge",
    "ConverseVerifier",
    "converse_runtime_client",
]

# The one tool every request offers: its input is the answer.
TOOL_NAME: Final = "record_answer"
# Model id parts of the families that take `toolChoice: tool` (Claude 3 and later, Nova).
_FORCED_TOOL_FAMILIES: Final = ("anthropic.claude", "amazon.nova")
_THROTTLE_CODES: Final = frozenset({"ThrottlingException", "ServiceUnavailableException"})
_TRANSIENT_CODES: Final = _THROTTLE_CODES | {
    "InternalServerException",
    "ModelErrorException",
    "ModelNotReadyException",
    "ModelTimeoutException",
}
# The families Bedrock caches a prompt prefix for (a `cachePoint` block); a cache point under
# the model's minimum cacheable length is accepted and caches nothing.
_CACHING_FAMILIES: Final = re.compile(
    r"anthropic\.claude-(?:3-5-haiku|3-7-sonnet|(?:haiku|sonnet|opus)-4)|amazon\.nova"
)
_TRUNCATED: Final = frozenset({"max_tokens", "model_context_window_exceeded"})
_REFUSED: Final = frozenset({"content_filtered", "guardrail_intervened"})
# Bedrock sends no retry-after: a throttled model admits nothing for this long.
_THROTTLED_FOR_S: Final = 5.0
_CONNECT_TIMEOUT_S: Final = 5.0


class ConverseOptions(TypedDict, total=False):
    """Where to reach Bedrock, for endpoints and tests; the limits are `ExtractConfig`'s."""

    client: Any  # a `bedrock-runtime` client (None: `converse_runtime_client`)
    aws_region: str | None  # None: `ExtractConfig.aws_region`, else the default chain's
    endpoint_url: str | None
    # The shared model budget every call is charged to (None: not budgeted).
    budget: ModelBudget | None


def converse_runtime_client(config: ExtractConfig, **options: Unpack[ConverseOptions]) -> Any:
    """A `bedrock-runtime` client with `config`'s timeout and retries (botocore's standard
    mode retries throttling and 5xx with backoff)."""
    import boto3

    # The first attempt and `max_retries` retries (botocore's `max_attempts` counts retries).
    retries = {"total_max_attempts": config.max_retries + 1, "mode": "standard"}
    return boto3.client(
        "bedrock-runtime",
        region_name=options.get("aws_region") or config.aws_region,
        endpoint_url=options.get("endpoint_url"),
        config=Config(
            retries=retries,  # type: ignore[arg-type]
            connect_timeout=_CONNECT_TIMEOUT_S,
            read_timeout=config.timeout_secs,
        ),
    )


class ConverseClient(StructuredCalls[ResultT]):
    """Converse calls whose answer must be a valid `output_model` (the tool's input)."""

    def __init__(
        self,
        config: ExtractConfig,
        output_model: type[ResultT],
        *,
        max_tokens: int,
        grow_on_truncation: bool = False,
        bare_schema: bool = False,
        **options: Unpack[ConverseOptions],
    ) -> None:
        """With `bare_schema`, the tool's schema goes without descriptions and titles (the
        prompt's cached prefix describes every field: they would be uncached input)."""
        schema = output_model.model_json_schema()
        description = (output_model.__doc__ or output_model.__name__).strip()
        self._tool = {
            "toolSpec": {
                "name": TOOL_NAME,
                "description": f"Record your answer: {description}",
                "inputSchema": {
                    "json": _inlined(without_descriptions(schema) if bare_schema else schema)
                },
            }
        }
        super().__init__(
            output_model,
            provider=budget_provider(config.provider),
            model=config.model,
            prices=config.prices_per_mtok,
            max_tokens=max_tokens,
            grow_on_truncation=grow_on_truncation,
            budget=options.get("budget"),
            # The tool's schema is sent with every request: it counts in the input estimate.
            request_chars=len(json.dumps(self._tool)),
        )
        self._client = options.get("client") or converse_runtime_client(config, **options)

    def request(
        self, model: str, system: str, messages: Sequence[PromptMessage], max_tokens: int
    ) -> dict[str, Any]:
        """The Converse request for one call of `model`."""
        tool_config: dict[str, Any] = {"tools": [self._tool]}
        if any(family in model for family in _FORCED_TOOL_FAMILIES):
            tool_config["toolChoice"] = {"tool": {"name": TOOL_NAME}}
        else:
            system = f"{system}\n\nAnswer only by calling the tool {TOOL_NAME}."
        return {
            "modelId": model,
            "system": _system_blocks(system, model),
            "messages": [
                {"role": message["role"], "content": [{"text": message["content"]}]}
                for message in messages
            ],
            "inferenceConfig": {"maxTokens": max_tokens},
            "toolConfig": tool_config,
        }

    def _send(
        self, model: str, system: str, messages: Sequence[PromptMessage], max_tokens: int
    ) -> ModelAnswer:
        try:
            response = self._client.converse(**self.request(model, system, messages, max_tokens))
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code in _THROTTLE_CODES:
                # ServiceUnavailable is Bedrock's 529: the service's capacity, not the limits.
                overloaded = code == "ServiceUnavailableException"
                self._throttled(model, _THROTTLED_FOR_S, overloaded=overloaded)
            raise converse_error(exc) from exc
        except BotoCoreError as exc:
            raise converse_error(exc) from exc
        return self._read(response, model)

    def _read(self, response: dict[str, Any], model: str) -> ModelAnswer:
        stop = str(response.get("stopReason", ""))
        content = response.get("output", {}).get("message", {}).get("content", [])
        calls = [
            block["toolUse"]["input"]
            for block in content
            if block.get("toolUse", {}).get("name") == TOOL_NAME
        ]
        # The tool's input; a model that answered in text (Llama under `auto`) is read as is.
        text = json.dumps(calls[0]) if calls else "".join(b.get("text", "") for b in content)
        return ModelAnswer(
            text,
            stop,
            self._usage(response.get("usage", {}), model),
            truncated=stop in _TRUNCATED,
            refused=stop in _REFUSED,
        )

    def _usage(self, usage: dict[str, Any], model: str) -> LlmUsage:
        # `inputTokens` is the uncached input (cache reads and writes are counted apart, in
        # `cacheReadInputTokens` / `cacheWriteInputTokens`), as the Anthropic API's is.
        tokens_in, tokens_out = int(usage.get("inputTokens", 0)), int(usage.get("outputTokens", 0))
        written = int(usage.get("cacheWriteInputTokens", 0))
        read = int(usage.get("cacheReadInputTokens", 0))
        return LlmUsage(
            model=model,
            input_tokens=tokens_in,
            output_tokens=tokens_out,
            cost_usd=cost_usd(
                model,
                tokens_in,
                tokens_out,
                self._prices,
                cache_creation_input_tokens=written,
                cache_read_input_tokens=read,
            ),
            cache_creation_input_tokens=written,
            cache_read_input_tokens=read,
        )


def converse_error(exc: ClientError | BotoCoreError) -> LlmUnavailable | LlmRequestRejected:
    """What a botocore error means once its own retries are spent: try later, or never."""
    if isinstance(exc, ClientError):
        code = exc.response.get("Error", {}).get("Code", "")
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if code in _TRANSIENT_CODES or (status or 0) >= 500:
            return LlmUnavailable(f"Bedrock Converse returned {code or status}")
        return LlmRequestRejected(f"Bedrock Converse rejected the request: {code}", status)
    if isinstance(exc, NoCredentialsError | NoRegionError | ParamValidationError):
        return LlmRequestRejected(f"Bedrock Converse call not made: {type(exc).__name__}")
    # Timeouts and connection errors.
    return LlmUnavailable(f"Bedrock unreachable: {type(exc).__name__}")


def _system_blocks(system: str, model: str) -> list[dict[str, Any]]:
    """The system prompt as Converse blocks: a `SystemPrompt`'s shared prefix, then a cache
    point, then its task and tenant steering, for the models Bedrock caches a prefix for;
    otherwise (a plain prompt, or a model without prompt caching) one text block."""
    if not isinstance(system, SystemPrompt) or not _CACHING_FAMILIES.search(model):
        return [{"text": system}]
    blocks: list[dict[str, Any]] = [{"text": system.prefix}, {"cachePoint": {"type": "default"}}]
    return blocks + [{"text": part} for part in (system.task, system.tenant) if part]


def _inlined(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with its `$defs` references replaced by the definitions themselves: not every
    model on Bedrock follows `$ref` (pydantic's models hold no cycles)."""
    definitions = schema.get("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                rest = {key: value for key, value in node.items() if key != "$ref"}
                return resolve({**definitions[ref.removeprefix("#/$defs/")], **rest})
            return {key: resolve(value) for key, value in node.items() if key != "$defs"}
        if isinstance(node, list):
            return [resolve(item) for item in node]
        return node

    inlined: dict[str, Any] = resolve(schema)
    return inlined


class ConverseExtractor(ModelExtractor):
    """`ExtractionLlm` over Converse; a cut-off answer is asked again with twice the room."""

    def __init__(self, config: ExtractConfig, **options: Unpack[ConverseOptions]) -> None:
        super().__init__(
            ConverseClient(
                config,
                ExtractionResult,
                max_tokens=config.max_output_tokens,
                grow_on_truncation=True,
                bare_schema=True,  # the prompt's cached prefix describes every field
                **options,
            )
        )


class ConverseVerifier(ModelVerifier):
    """`CandidateVerifier` over Converse (output limit `config.verifier.max_output_tokens`)."""

    def __init__(self, config: ExtractConfig, **options: Unpack[ConverseOptions]) -> None:
        super().__init__(
            ConverseClient(
                config, VerifierVerdict, max_tokens=config.verifier.max_output_tokens, **options
            )
        )


class ConverseResolveJudge(ModelResolveJudge):
    """`ResolveJudge` over Converse."""

    def __init__(self, config: ExtractConfig, **options: Unpack[ConverseOptions]) -> None:
        super().__init__(
            ConverseClient(config, ResolveResult, max_tokens=JUDGE_MAX_OUTPUT_TOKENS, **options)
        )


class ConverseDedupeJudge(ModelDedupeJudge):
    """`DedupeJudge` over Converse."""

    def __init__(self, config: ExtractConfig, **options: Unpack[ConverseOptions]) -> None:
        super().__init__(
            ConverseClient(config, DedupeVerdict, max_tokens=DEDUPE_MAX_OUTPUT_TOKENS, **options)
        )


class ConverseQuestions(ModelQuestions):
    """`QuestionGenerator` over Converse."""

    def __init__(self, config: ExtractConfig, **options: Unpack[ConverseOptions]) -> None:
        super().__init__(
            ConverseClient(config, HypeQuestions, max_tokens=QUESTIONS_MAX_OUTPUT_TOKENS, **options)
        )
