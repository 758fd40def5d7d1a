"""One structured call to the Anthropic Messages API, direct or via Bedrock, for every adapter.

The only module that touches `anthropic`, and only inside functions: importing the SDK costs
about 3 s of cold start, which the pre_filter Lambda must never pay. The SDK retries 408, 409, 429,
5xx and connection errors itself with backoff (`max_retries`, one by default: the queue does the
waiting); what is left after that is translated here into the errors of `memwrite.errors`, with
the SDK error kept as the cause.

Every call goes through the model budget first (`memwrite.budget`, when one is given): charged
its estimated input tokens and max_tokens, refunded to its real usage when the answer comes; no
room is `BudgetExhausted` (no request sent), and a 429/529 lowers the budget's limits and
honours the answer's `retry-after`. An extraction answer cut off at max_tokens is asked
again once with twice the room (bounded); cut off again, it is `TruncatedLlmOutput`.
The adapters (`anthropic_llm`, `anthropic_judge`, `anthropic_dedupe_judge`, `anthropic_verifier`,
`anthropic_questions`) each hold one `StructuredClient`, built from `ExtractConfig`, their
answer's schema and output limit and the caller's `ClientOptions`; they add only their port's
shape. With `record_dir`, every exchange is also written there (`recording`), for every adapter.

Prompt caching (docs/design.md §2): a `memwrite.prompts.SystemPrompt` goes as blocks, its
stable prefix (role, field notes, rules, examples) first and marked `cache_control: {"type":
"ephemeral"}`, then the pass's task and the tenant's steering, each in a block of its own, the
conversation last. Every tenant shares the prefix, so one tenant's instructions do not split
the cache. A prefix under the model's minimum cacheable length is silently not cached by the
API: the extractor warns at start-up (`warn_if_uncacheable`). The usage's cache writes and
reads are recorded and priced (`memwrite.pricing`); the direct API and Bedrock
(`AnthropicBedrock`, the same request body) take the same blocks. The budget is settled to what
the input limit counts: uncached and written tokens, not reads.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypedDict, TypeVar, Unpack

from pydantic import BaseModel, ValidationError

from memwrite.budget import Caller, Grant, ModelBudget, current_caller
from memwrite.config import ExtractConfig
from memwrite.errors import (
    BudgetExhausted,
    LlmRequestRejected,
    LlmUnavailable,
    MalformedLlmOutput,
    TruncatedLlmOutput,
)
from memwrite.pricing import cost_usd, model_family, price_per_mtok
from memwrite.prompts import PromptMessage, SystemPrompt
from memwrite.usage import LlmUsage, report_usage

if TYPE_CHECKING:
    import httpx2
    from anthropic import Anthropic, AnthropicBedrock, AnthropicError, APIStatusError
    from anthropic.types import (
        AssistantMessageParam,
        Message,
        MessageParam,
        OutputConfigParam,
        TextBlockParam,
        UserMessageParam,
    )
    from anthropic.types.message_create_params import MessageCreateParamsNonStreaming

__all__ = [
    "DEFAULT_MIN_CACHEABLE_TOKENS",
    "MAX_GROWN_OUTPUT_TOKENS",
    "ClientOptions",
    "StructuredClient",
    "api_error",
    "system_blocks",
    "warn_if_uncacheable",
]

logger = logging.getLogger(__name__)

_ResultT = TypeVar("_ResultT", bound=BaseModel)

# The statuses the SDK itself retries: still failing after its retries means "try later".
_TRANSIENT_STATUSES = frozenset({408, 409, 429})
# Rate limited (429) and overloaded (529): the budget's limits drop (AIMD).
_THROTTLE_STATUSES = frozenset({429, 529})
# Without a `retry-after`, a throttled model admits nothing for this long.
_DEFAULT_RETRY_AFTER_S = 5.0
# A truncated answer is asked again once with twice its max_tokens, at most this many.
MAX_GROWN_OUTPUT_TOKENS = 16_384
# Characters per input token when estimating a request before it is sent (English prose and
# JSON run at about 4; fewer over-estimates, and the refund corrects it).
_CHARS_PER_TOKEN = 3.5
# Characters per token when asking whether a prefix reaches the model's minimum cacheable
# length: more than the estimate above, so a prefix is counted short rather than long (a
# prefix that passes has margin; one that fails is worth a look, not a guess).
_PREFIX_CHARS_PER_TOKEN = 4.0
# The minimum cacheable length of a model family `ExtractConfig.min_cacheable_tokens` does not
# list: the largest the Anthropic docs give (Claude Haiku 4.5, Opus 4.5).
DEFAULT_MIN_CACHEABLE_TOKENS = 4_096
# Prefixes already warned about in this process: the warning is logged once per cold start.
_warned: set[tuple[str, str]] = set()
# Charged to calls made outside any request (a tenant-less caller: tools, tests).
_NO_TENANT = Caller("-")


class ClientOptions(TypedDict, total=False):
    """Where and how to reach the API, for endpoints and tests; the limits are `ExtractConfig`'s."""

    api_key: str | None  # the direct API's key (None: the SDK reads ANTHROPIC_API_KEY)
    aws_region: str | None  # Bedrock's region (None: `ExtractConfig.aws_region`)
    base_url: str | None
    http_client: httpx2.Client | None
    max_retries: int | None  # None: `ExtractConfig.max_retries`
    # Every exchange written there (`MEMWRITE_LLM_RECORD`, `recording.record_exchanges`).
    record_dir: Path | None
    # The shared model budget every call is charged to (None: not budgeted).
    budget: ModelBudget | None


class StructuredClient(Generic[_ResultT]):
    """Messages API calls whose answer must be a valid `output_model` (`output_config.format`).

    The provider, region, timeout, retries and prices are `ExtractConfig`'s: every model call
    goes to the same model family through the same account.
    """

    def __init__(
        self,
        config: ExtractConfig,
        output_model: type[_ResultT],
        *,
        max_tokens: int,
        grow_on_truncation: bool = False,
        bare_schema: bool = False,
        **options: Unpack[ClientOptions],
    ) -> None:
        """Limits come from `config`, the output limit is the adapter's, `options` say where.
        With `grow_on_truncation`, an answer cut off at `max_tokens` is asked again once with
        twice the room (extraction, whose answers vary most in size). With `bare_schema`, the
        output schema goes without its descriptions and titles: for a prompt whose cached prefix
        already describes every field (extraction's `<output_schema>`), they would only be
        uncached input on every call (about 760 of extraction's 1,160 schema tokens)."""
        # An unpriced model fails at start-up, not after a paid call.
        price_per_mtok(config.model, config.prices_per_mtok)
        import anthropic

        max_retries = options.get("max_retries")
        retries = config.max_retries if max_retries is None else max_retries
        base_url, http_client = options.get("base_url"), options.get("http_client")
        if (record_dir := options.get("record_dir")) is not None:
            from memwrite.adapters.anthropic.recording import record_exchanges

            # The SDK's own default client, which it builds itself when given none.
            http_client = record_exchanges(
                http_client or anthropic.DefaultHttpxClient(), record_dir
            )
        self._client: Anthropic | AnthropicBedrock
        if config.provider == "anthropic":
            self._client = anthropic.Anthropic(
                api_key=options.get("api_key"),
                base_url=base_url,
                http_client=http_client,
                max_retries=retries,
                timeout=config.timeout_secs,
            )
        else:
            # IAM credentials from the default AWS chain: no API key to manage on AWS.
            self._client = anthropic.AnthropicBedrock(
                aws_region=options.get("aws_region") or config.aws_region,
                base_url=base_url,
                http_client=http_client,
                max_retries=retries,
                timeout=config.timeout_secs,
            )
        # What `messages.parse(output_format=output_model)` sends; we call `create` and validate
        # ourselves because `parse` raises before the usage of a malformed answer (tokens paid
        # for) can be read.
        schema = anthropic.transform_schema(output_model)
        self._output_config: OutputConfigParam = {
            "format": {"type": "json_schema", "schema": _bare(schema) if bare_schema else schema}
        }
        self._output_model = output_model
        self._prices = config.prices_per_mtok
        self._model = config.model
        self._provider = config.provider
        self._max_tokens = max_tokens
        self._grow_on_truncation = grow_on_truncation
        self._budget = options.get("budget")
        # The schema is sent with every request: its size counts in the input estimate.
        self._schema_chars = len(str(self._output_config))

    def call(
        self, system: str, messages: Sequence[PromptMessage], *, model: str | None = None
    ) -> tuple[_ResultT, LlmUsage]:
        """The validated answer of `model` (default: the configured one) and what it cost.

        Raises `LlmUnavailable` (try later), `LlmRequestRejected` (a retry cannot help) or
        `MalformedLlmOutput`, which carries the usage because an invalid answer is still paid.
        Every answered call is also reported to the run's meter (`memwrite.usage.metered`).
        """
        model = model or self._model
        # `model` may differ from the configured one: an unpriced one must fail before the call.
        price_per_mtok(model, self._prices)
        params = [_message_param(message) for message in messages]
        chars = len(system) + sum(len(m["content"]) for m in messages) + self._schema_chars
        estimate = math.ceil(chars / _CHARS_PER_TOKEN)
        max_tokens = self._max_tokens
        response, usage = self._create(model, system, params, estimate, max_tokens)
        earlier: LlmUsage | None = None  # a truncated first answer's, when asked again
        if response.stop_reason == "max_tokens" and self._grow_on_truncation:
            # Cut off: invalid JSON, and paid for. Asked once more with twice the room.
            earlier = replace(usage, malformed=True)
            report_usage(earlier)
            max_tokens = min(2 * max_tokens, max(max_tokens, MAX_GROWN_OUTPUT_TOKENS))
            response, usage = self._create(model, system, params, estimate, max_tokens)
            if response.stop_reason == "max_tokens":
                truncated = replace(usage, malformed=True)
                report_usage(truncated)
                raise TruncatedLlmOutput(
                    f"stop_reason=max_tokens twice, the second time at {max_tokens}",
                    _combined(earlier, truncated),
                )
        try:
            result = self._parse(response, usage)
        except MalformedLlmOutput as exc:
            report_usage(exc.usage)
            if earlier is not None:
                exc.usage = _combined(earlier, exc.usage)
            raise
        report_usage(usage)
        return result, usage if earlier is None else _combined(earlier, usage)

    def _create(
        self,
        model: str,
        system: str,
        params: list[MessageParam],
        estimate: int,
        max_tokens: int,
    ) -> tuple[Message, LlmUsage]:
        """One request, charged to the budget first and refunded to its usage after."""
        import anthropic

        grant = self._admit(model, estimate, max_tokens)
        try:
            response = self._client.messages.create(
                **self._params(model, system, params, max_tokens)
            )
        except anthropic.AnthropicError as exc:
            self._settle(grant, 0, 0)
            throttled = isinstance(exc, anthropic.APIStatusError) and (
                exc.status_code in _THROTTLE_STATUSES
            )
            if throttled and self._budget is not None:
                assert isinstance(exc, anthropic.APIStatusError)
                self._budget.throttled(self._provider, model, _retry_after(exc))
            raise api_error(exc) from exc
        usage = self._usage(response, model, 1.0)
        # What counts against the input-tokens-per-minute limit: cache reads do not
        # (https://platform.claude.com/docs/en/api/rate-limits#cache-aware-itpm).
        limited = usage.input_tokens + usage.cache_creation_input_tokens
        self._settle(grant, limited, usage.output_tokens)
        return response, usage

    def _params(
        self, model: str, system: str, params: list[MessageParam], max_tokens: int
    ) -> MessageCreateParamsNonStreaming:
        return {
            "model": model,
            "max_tokens": max_tokens,
            "system": system_blocks(system),
            "messages": params,
            "output_config": self._output_config,
        }

    def _usage(self, response: Message, model: str, price_factor: float) -> LlmUsage:
        usage = response.usage
        tokens_in, tokens_out = usage.input_tokens, usage.output_tokens
        # None from a model or gateway that reports no cache (as 0: nothing cached).
        written = usage.cache_creation_input_tokens or 0
        read = usage.cache_read_input_tokens or 0
        cost = cost_usd(
            model,
            tokens_in,
            tokens_out,
            self._prices,
            cache_creation_input_tokens=written,
            cache_read_input_tokens=read,
        )
        return LlmUsage(
            model=response.model,
            input_tokens=tokens_in,
            output_tokens=tokens_out,
            cost_usd=cost * price_factor,
            cache_creation_input_tokens=written,
            cache_read_input_tokens=read,
        )

    @property
    def sdk(self) -> Anthropic | AnthropicBedrock:
        """The SDK client itself (the batch lane's Message Batches calls go through it)."""
        return self._client

    def request(
        self, system: str, messages: Sequence[PromptMessage], *, model: str | None = None
    ) -> MessageCreateParamsNonStreaming:
        """The Messages API request `call` sends first: a batched request is the same
        (`memwrite.adapters.anthropic.batches`, `memwrite.adapters.aws.bedrock_batches`)."""
        model = model or self._model
        # `model` may differ from the configured one: an unpriced one must fail before the call.
        price_per_mtok(model, self._prices)
        params = [_message_param(message) for message in messages]
        return self._params(model, system, params, self._max_tokens)

    def answer(
        self, response: Message, *, model: str, price_factor: float = 1.0
    ) -> tuple[_ResultT, LlmUsage]:
        """A Messages API answer to a request for `model`, validated, with what it cost
        (`price_factor` of the list price: a batched call's discount). Raises
        `MalformedLlmOutput` (with the usage); a truncated answer is malformed too (the batch
        lane asks no second time)."""
        usage = self._usage(response, model, price_factor)
        return self._parse(response, usage), usage

    def _admit(self, model: str, estimate: int, max_tokens: int) -> Grant | None:
        if self._budget is None:
            return None
        caller = current_caller() or _NO_TENANT
        admission = self._budget.acquire(self._provider, model, estimate, max_tokens, caller)
        if admission.grant is None:
            raise BudgetExhausted(
                f"model budget for {self._provider}/{model} has no room "
                f"(lane {caller.lane.value}): retry in {admission.wait_s:.1f} s",
                admission.wait_s,
            )
        return admission.grant

    def _settle(self, grant: Grant | None, input_tokens: int, output_tokens: int) -> None:
        if grant is not None and self._budget is not None:
            self._budget.settle(grant, input_tokens, output_tokens)

    def _parse(self, response: Message, usage: LlmUsage) -> _ResultT:
        """The validated answer; else `MalformedLlmOutput` with `usage` marked malformed."""
        text = "".join(block.text for block in response.content if block.type == "text")
        try:
            return self._output_model.model_validate_json(text)
        except ValidationError as exc:
            # Places and kinds only, never the input: the answer may quote the user's turns.
            errors = exc.errors(include_input=False, include_url=False, include_context=False)
            where = ".".join(str(part) for part in errors[0]["loc"]) or "<root>"
            raise MalformedLlmOutput(
                f"stop_reason={response.stop_reason}: {len(errors)} validation error(s), "
                f"first at {where}: {errors[0]['type']}",
                replace(usage, malformed=True),
            ) from exc


def api_error(exc: AnthropicError) -> LlmUnavailable | LlmRequestRejected:
    """What an SDK error means once the SDK's own retries are spent: try later, or never."""
    import anthropic

    if isinstance(exc, anthropic.APIStatusError):
        if exc.status_code in _TRANSIENT_STATUSES or exc.status_code >= 500:
            return LlmUnavailable(f"model API returned {exc.status_code}")
        return LlmRequestRejected(
            f"model API rejected the request with {exc.status_code}", exc.status_code
        )
    if isinstance(exc, anthropic.APIConnectionError):  # timeouts included
        return LlmUnavailable(f"model API unreachable: {type(exc).__name__}")
    # Client-side: credentials, configuration.
    return LlmRequestRejected(f"model call not made: {type(exc).__name__}")


def _combined(first: LlmUsage, second: LlmUsage) -> LlmUsage:
    """A call asked twice as one usage: both requests' tokens and cost, the second's verdict."""
    return replace(
        second,
        input_tokens=first.input_tokens + second.input_tokens,
        output_tokens=first.output_tokens + second.output_tokens,
        cost_usd=first.cost_usd + second.cost_usd,
        cache_creation_input_tokens=first.cache_creation_input_tokens
        + second.cache_creation_input_tokens,
        cache_read_input_tokens=first.cache_read_input_tokens + second.cache_read_input_tokens,
    )


def _bare(schema: Any) -> Any:
    """A JSON schema without its descriptions and titles: the same structure, the same grammar
    (property names are kept, whatever they are called)."""
    if isinstance(schema, list):
        return [_bare(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    bare = {}
    for key, value in schema.items():
        if key in ("description", "title"):
            continue
        if key in ("properties", "$defs"):  # names -> schemas
            bare[key] = {name: _bare(sub) for name, sub in value.items()}
        else:
            bare[key] = _bare(value)
    return bare


def system_blocks(system: str) -> str | list[TextBlockParam]:
    """The request's system prompt: a `SystemPrompt` as blocks, its shared prefix marked for the
    cache, then its task and tenant steering (when set), each in its own block after the
    breakpoint, never cached with it. A plain string goes as it is: the prompts that are plain
    strings (verifier, judges, questions) are far under any model's minimum cacheable length."""
    if not isinstance(system, SystemPrompt):
        return system
    blocks: list[TextBlockParam] = [
        {"type": "text", "text": system.prefix, "cache_control": {"type": "ephemeral"}}
    ]
    blocks += [{"type": "text", "text": part} for part in (system.task, system.tenant) if part]
    return blocks


def prefix_tokens(prefix: str) -> int:
    """A low estimate of a prefix's tokens (`_PREFIX_CHARS_PER_TOKEN`)."""
    return math.floor(len(prefix) / _PREFIX_CHARS_PER_TOKEN)


def warn_if_uncacheable(name: str, prefix: str, config: ExtractConfig) -> int | None:
    """Log once a warning when `prefix` is likely under the configured model's minimum
    cacheable length (`ExtractConfig.min_cacheable_tokens`, else the largest documented): the
    API then caches nothing and says nothing. Returns the minimum it missed (None: long enough)."""
    family = model_family(config.model)
    minimum = config.min_cacheable_tokens.get(family, DEFAULT_MIN_CACHEABLE_TOKENS)
    estimate = prefix_tokens(prefix)
    if estimate >= minimum:
        return None
    if (name, family) not in _warned:
        _warned.add((name, family))
        logger.warning(
            "the %s prompt's cached prefix is about %d tokens, under the %d %s needs to cache "
            "it: every call pays its full input price (extract.min_cacheable_tokens)",
            name,
            estimate,
            minimum,
            family,
        )
    return minimum


def _retry_after(exc: APIStatusError) -> float:
    """The answer's `retry-after-ms` or `retry-after` (seconds), else a default."""
    headers = exc.response.headers
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            return max(0.0, float(headers.get(name, "")) * scale)
        except ValueError:
            continue
    return _DEFAULT_RETRY_AFTER_S


def _message_param(message: PromptMessage) -> MessageParam:
    if message["role"] == "user":
        user: UserMessageParam = {"role": "user", "content": message["content"]}
        return user
    assistant: AssistantMessageParam = {"role": "assistant", "content": message["content"]}
    return assistant
