"""One structured call to the Anthropic Messages API, direct or via Bedrock, for every adapter.

The only module that touches `anthropic`, and only inside functions: importing the SDK costs
about 3 s of cold start, which the pre_filter Lambda must never pay. The SDK retries 408, 409, 429,
5xx and connection errors itself with backoff (`max_retries`, one by default: the queue does the
waiting); what is left after that is translated here into the errors of `memwrite.errors`, with
the SDK error kept as the cause.

What every provider shares (the model budget, the one retry of a truncated answer, refusals,
validation, usage reporting) is `memwrite.adapters.structured.StructuredCalls`'s; this client
sends the request, reads the answer and says when the API throttled (429/529, with the
answer's `retry-after`). A Messages API `refusal` is `LlmRefused`.
The adapters (`extractor`, `resolve_judge`, `dedupe_judge`, `verifier`, `questions`) each hold
one `StructuredClient`, built from `ExtractConfig`, their answer's schema and output limit and
the caller's `ClientOptions`; their port's shape is `memwrite.adapters.model_ports`'. With
`record_dir`, every exchange is also written there (`recording`), for every adapter.

Prompt caching (docs/design.md §2): a `memwrite.prompts.SystemPrompt` goes as blocks, its
stable prefix (role, field notes, rules, examples) first and marked `cache_control: {"type":
"ephemeral"}`, then the pass's task and the tenant's steering, each in a block of its own, the
conversation last. Every tenant shares the prefix, so one tenant's instructions do not split
the cache. A prefix under the model's minimum cacheable length is silently not cached by the
API: the extractor warns at start-up (`warn_if_uncacheable`). The usage's cache writes and
reads are recorded and priced (`memwrite.costs.pricing`); the direct API and Bedrock
(`AnthropicBedrock`, the same request body) take the same blocks. The budget is settled to what
the input limit counts: uncached and written tokens, not reads.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, Unpack

from memwrite.adapters.structured import (
    ModelAnswer,
    ResultT,
    StructuredCalls,
    without_descriptions,
)
from memwrite.budget import ModelBudget
from memwrite.config.settings import ExtractConfig
from memwrite.costs.pricing import cost_usd, model_family, price_per_mtok
from memwrite.costs.usage import LlmUsage
from memwrite.errors import LlmRequestRejected, LlmUnavailable
from memwrite.prompts import PromptMessage, SystemPrompt

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
    "ClientOptions",
    "StructuredClient",
    "api_error",
    "system_blocks",
    "warn_if_uncacheable",
]

logger = logging.getLogger(__name__)

# The statuses the SDK itself retries: still failing after its retries means "try later".
_TRANSIENT_STATUSES = frozenset({408, 409, 429})
# Rate limited (429) and overloaded (529): the budget's limits drop (AIMD).
_THROTTLE_STATUSES = frozenset({429, 529})
# Without a `retry-after`, a throttled model admits nothing for this long.
_DEFAULT_RETRY_AFTER_S = 5.0
# Characters per token when asking whether a prefix reaches the model's minimum cacheable
# length: more than the estimate of a request (`memwrite.adapters.structured`), so a prefix is
# counted short rather than long (a prefix that passes has margin; one that fails is worth a
# look, not a guess).
_PREFIX_CHARS_PER_TOKEN = 4.0
# The minimum cacheable length of a model family `ExtractConfig.min_cacheable_tokens` does not
# list: the largest the Anthropic docs give (Claude Haiku 4.5, Opus 4.5).
DEFAULT_MIN_CACHEABLE_TOKENS = 4_096
# Prefixes already warned about in this process: the warning is logged once per cold start.
_warned: set[tuple[str, str]] = set()


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


@cache
def _shared_http_client() -> httpx2.Client:
    """The SDK's default HTTP client, one per process for every adapter's SDK client: each
    built its own, loading the CA bundle into a TLS context again (about 45 ms of cold start
    apiece). Timeouts and retries stay each SDK client's, set per request."""
    import anthropic

    return anthropic.DefaultHttpxClient()


class StructuredClient(StructuredCalls[ResultT]):
    """Messages API calls whose answer must be a valid `output_model` (`output_config.format`).

    The provider, region, timeout, retries and prices are `ExtractConfig`'s: every model call
    goes to the same model family through the same account.
    """

    def __init__(
        self,
        config: ExtractConfig,
        output_model: type[ResultT],
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
        http_client = http_client or _shared_http_client()
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
            "format": {
                "type": "json_schema",
                "schema": without_descriptions(schema) if bare_schema else schema,
            }
        }
        super().__init__(
            output_model,
            provider=config.provider,
            model=config.model,
            prices=config.prices_per_mtok,
            max_tokens=max_tokens,
            grow_on_truncation=grow_on_truncation,
            budget=options.get("budget"),
            # The schema is sent with every request: its size counts in the input estimate.
            request_chars=len(str(self._output_config)),
        )

    def _send(
        self, model: str, system: str, messages: Sequence[PromptMessage], max_tokens: int
    ) -> ModelAnswer:
        import anthropic

        params = [_message_param(message) for message in messages]
        try:
            response = self._client.messages.create(
                **self._params(model, system, params, max_tokens)
            )
        except anthropic.AnthropicError as exc:
            if isinstance(exc, anthropic.APIStatusError) and (
                exc.status_code in _THROTTLE_STATUSES
            ):
                self._throttled(model, _retry_after(exc), overloaded=exc.status_code == 529)
            raise api_error(exc) from exc
        return _read(response, self._usage(response, model, 1.0))

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
    ) -> tuple[ResultT, LlmUsage]:
        """A Messages API answer to a request for `model`, validated, with what it cost
        (`price_factor` of the list price: a batched call's discount). Raises
        `MalformedLlmOutput` (with the usage); a truncated answer is malformed too (the batch
        lane asks no second time)."""
        usage = self._usage(response, model, price_factor)
        return self.validated(_read(response, usage)), usage


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


def _read(response: Message, usage: LlmUsage) -> ModelAnswer:
    """What the base needs of a Messages API answer: its text blocks and why it stopped."""
    text = "".join(block.text for block in response.content if block.type == "text")
    stop = response.stop_reason or ""
    return ModelAnswer(text, stop, usage, truncated=stop == "max_tokens", refused=stop == "refusal")
