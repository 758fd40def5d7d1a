"""One structured model call, whatever the provider: what every model adapter shares.

A provider's client (`memwrite.adapters.anthropic.client` over the Messages API,
`memwrite.adapters.aws.bedrock_converse` over Bedrock's Converse API) sends one request and
says what came back (`ModelAnswer`); this base owns the rest, so that every provider behaves the
same way:

- the model budget (`memwrite.budget`, when one is given): each request is charged its
  estimated input tokens and max_tokens before it is sent, and refunded to its real usage when
  it ends (to nothing when no answer came); no room is `BudgetExhausted`, no request sent;
- an answer cut off at max_tokens is asked again once with twice the room (bounded) when the
  adapter allows it (extraction); cut off again, it is `TruncatedLlmOutput`;
- a refusal, a content filter or a guardrail is `LlmRefused`, never read as an answer;
- the answer is validated as the adapter's pydantic model, else `MalformedLlmOutput`;
- every answered request is reported to the run's meter (`memwrite.costs.usage.report_usage`).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from memwrite.budget import Caller, Grant, ModelBudget, current_caller
from memwrite.costs.pricing import price_per_mtok
from memwrite.costs.usage import LlmUsage, report_usage
from memwrite.errors import BudgetExhausted, LlmRefused, MalformedLlmOutput, TruncatedLlmOutput
from memwrite.prompts import PromptMessage

__all__ = [
    "MAX_GROWN_OUTPUT_TOKENS",
    "ModelAnswer",
    "ResultT",
    "StructuredCalls",
    "combined_usage",
    "without_descriptions",
]

ResultT = TypeVar("ResultT", bound=BaseModel)

# A truncated answer is asked again once with twice its max_tokens, at most this many.
MAX_GROWN_OUTPUT_TOKENS = 16_384
# Characters per input token when estimating a request before it is sent (English prose and
# JSON run at about 4; fewer over-estimates, and the refund corrects it).
_CHARS_PER_TOKEN = 3.5
# Charged to calls made outside any request (a tenant-less caller: tools, tests).
_NO_TENANT = Caller("-")


@dataclass(frozen=True)
class ModelAnswer:
    """One provider answer, read: its JSON text, why it stopped, and what it cost."""

    text: str  # the answer's JSON (a text block, or a tool call's input)
    stop_reason: str  # as the provider named it, for the error messages
    usage: LlmUsage
    truncated: bool = False  # cut off at max_tokens: invalid JSON, paid for
    refused: bool = False  # a refusal, content filter or guardrail: no answer to read


class StructuredCalls(ABC, Generic[ResultT]):
    """Calls whose answer must be a valid `output_model`; subclasses send one request
    (`_send`) and say when the provider throttled (`_throttled`)."""

    def __init__(
        self,
        output_model: type[ResultT],
        *,
        provider: str,
        model: str,
        prices: dict[str, tuple[float, float]],
        max_tokens: int,
        grow_on_truncation: bool,
        budget: ModelBudget | None,
        request_chars: int,
    ) -> None:
        """`provider` and `model` name the budget's bucket; `request_chars` is what every
        request sends besides the prompt (the schema), counted in the input estimate."""
        # An unpriced model fails at start-up, not after a paid call.
        price_per_mtok(model, prices)
        self._output_model = output_model
        self._provider = provider
        self._model = model
        self._prices = prices
        self._max_tokens = max_tokens
        self._grow_on_truncation = grow_on_truncation
        self._budget = budget
        self._request_chars = request_chars

    @abstractmethod
    def _send(
        self, model: str, system: str, messages: Sequence[PromptMessage], max_tokens: int
    ) -> ModelAnswer:
        """One request. Raises `LlmUnavailable` (try later) or `LlmRequestRejected` (never),
        after calling `_throttled` when the provider said it was throttled."""

    def call(
        self, system: str, messages: Sequence[PromptMessage], *, model: str | None = None
    ) -> tuple[ResultT, LlmUsage]:
        """The validated answer of `model` (default: the configured one) and what it cost.

        Raises `LlmUnavailable` (try later), `LlmRequestRejected` (a retry cannot help), or
        `MalformedLlmOutput` (`TruncatedLlmOutput`, `LlmRefused`), which carries the usage
        because an unusable answer is still paid for.
        """
        model = model or self._model
        # `model` may differ from the configured one: an unpriced one must fail before the call.
        price_per_mtok(model, self._prices)
        chars = len(system) + sum(len(m["content"]) for m in messages) + self._request_chars
        estimate = math.ceil(chars / _CHARS_PER_TOKEN)
        max_tokens = self._max_tokens
        answer = self._ask(model, system, messages, estimate, max_tokens)
        earlier: LlmUsage | None = None  # a truncated first answer's, when asked again
        if answer.truncated and self._grow_on_truncation:
            # Cut off: invalid JSON, and paid for. Asked once more with twice the room.
            earlier = replace(answer.usage, malformed=True)
            report_usage(earlier)
            max_tokens = min(2 * max_tokens, max(max_tokens, MAX_GROWN_OUTPUT_TOKENS))
            answer = self._ask(model, system, messages, estimate, max_tokens)
            if answer.truncated:
                truncated = replace(answer.usage, malformed=True)
                report_usage(truncated)
                raise TruncatedLlmOutput(
                    f"stop_reason={answer.stop_reason} twice, the second time at {max_tokens}",
                    combined_usage(earlier, truncated),
                )
        try:
            result = self.validated(answer)
        except MalformedLlmOutput as exc:
            report_usage(exc.usage)
            if earlier is not None:
                exc.usage = combined_usage(earlier, exc.usage)
            raise
        report_usage(answer.usage)
        return result, answer.usage if earlier is None else combined_usage(earlier, answer.usage)

    def validated(self, answer: ModelAnswer) -> ResultT:
        """The answer as `output_model`; else `LlmRefused` or `MalformedLlmOutput`, carrying
        the answer's usage marked malformed."""
        usage = replace(answer.usage, malformed=True)
        if answer.refused:
            raise LlmRefused(f"stop_reason={answer.stop_reason}: the model gave no answer", usage)
        try:
            return self._output_model.model_validate_json(answer.text)
        except ValidationError as exc:
            # Places and kinds only, never the input: the answer may quote the user's turns.
            errors = exc.errors(include_input=False, include_url=False, include_context=False)
            where = ".".join(str(part) for part in errors[0]["loc"]) or "<root>"
            raise MalformedLlmOutput(
                f"stop_reason={answer.stop_reason}: {len(errors)} validation error(s), "
                f"first at {where}: {errors[0]['type']}",
                usage,
            ) from exc

    def _ask(
        self,
        model: str,
        system: str,
        messages: Sequence[PromptMessage],
        estimate: int,
        max_tokens: int,
    ) -> ModelAnswer:
        """One request, charged to the budget first and refunded to its usage after."""
        grant = self._admit(model, estimate, max_tokens)
        try:
            answer = self._send(model, system, messages, max_tokens)
        except BaseException:
            self._settle(grant, 0, 0)  # no answer: nothing was generated
            raise
        usage = answer.usage
        # What counts against the input-tokens-per-minute limit: cache reads do not
        # (https://platform.claude.com/docs/en/api/rate-limits#cache-aware-itpm).
        self._settle(
            grant, usage.input_tokens + usage.cache_creation_input_tokens, usage.output_tokens
        )
        return answer

    def _throttled(self, model: str, retry_after_s: float, *, overloaded: bool = False) -> None:
        """The provider throttled `model` (or was `overloaded`: a 529): the budget's limits
        drop (AIMD) and it admits nothing for `retry_after_s`."""
        if self._budget is not None:
            self._budget.throttled(self._provider, model, retry_after_s, overloaded=overloaded)

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

    def budget_wait_s(
        self, prompt_chars: int, model: str | None = None, within_s: float | None = None
    ) -> float:
        """How long until the budget expects room for one call sending `prompt_chars`
        characters of prompt (0: room now, or no budget); nothing is charged. With
        `within_s`, a caller that must wait takes a place in its tenant's line
        (`ModelBudget.acquire`'s `line_within_s`)."""
        if self._budget is None:
            return 0.0
        estimate = math.ceil((prompt_chars + self._request_chars) / _CHARS_PER_TOKEN)
        caller = current_caller() or _NO_TENANT
        model = model or self._model
        admission = self._budget.acquire(
            self._provider,
            model,
            estimate,
            self._max_tokens,
            caller,
            peek=True,
            line_within_s=within_s,
        )
        return admission.wait_s

    def _settle(self, grant: Grant | None, input_tokens: int, output_tokens: int) -> None:
        if grant is not None and self._budget is not None:
            self._budget.settle(grant, input_tokens, output_tokens)


def combined_usage(first: LlmUsage, second: LlmUsage) -> LlmUsage:
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


def without_descriptions(schema: Any) -> Any:
    """A JSON schema without its descriptions and titles: the same structure, the same grammar
    (property names are kept, whatever they are called). For a prompt whose cached prefix
    already describes every field, they would only be uncached input on every call."""
    if isinstance(schema, list):
        return [without_descriptions(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    bare = {}
    for key, value in schema.items():
        if key in ("description", "title"):
            continue
        if key in ("properties", "$defs"):  # names -> schemas
            bare[key] = {name: without_descriptions(sub) for name, sub in value.items()}
        else:
            bare[key] = without_descriptions(value)
    return bare
