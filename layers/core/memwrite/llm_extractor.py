"""LLM extraction, orchestrated: full pass, detail pass, retry, post-checks and cost accounting.

Pure orchestration against the `ExtractionLlm` port; the anthropic SDK lives only in
`memwrite.adapters.anthropic_llm`, so importing this module costs no SDK cold start. The errors
of the port are defined here, next to it, so the orchestrator and every adapter share them.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

from memwrite.candidate import Candidate, memory_key
from memwrite.config import ExtractConfig
from memwrite.errors import ConfigError, PermanentError, TransientError
from memwrite.prompts import PromptMessage, RenderedPrompt
from memwrite.prompts.extract import (
    ExtractionResult,
    ExtractPromptInput,
    SessionTurn,
    render,
    render_detail,
)
from memwrite.segment import split_segments

__all__ = [
    "PRICES_PER_MTOK",
    "ExtractionFailed",
    "ExtractionLlm",
    "LlmCall",
    "LlmExtraction",
    "LlmRequestRejected",
    "LlmUnavailable",
    "LlmUsage",
    "MalformedLlmOutput",
    "cap_hypotheticals",
    "cost_usd",
    "detail_windows",
    "extract_with_llm",
    "merge_candidates",
    "price_per_mtok",
]

logger = logging.getLogger(__name__)

PRICES_PER_MTOK: dict[str, tuple[float, float]] = {
    # USD per million (input, output) tokens, list prices; keyed by the undated model name.
    "claude-haiku-4-5": (1.00, 5.00),
    "claude-sonnet-4-5": (3.00, 15.00),
    "claude-opus-4-5": (5.00, 25.00),
}

# Bedrock ids wrap the model name: "us.anthropic.claude-haiku-4-5-20251001-v1:0".
_BEDROCK_PREFIX_RE = re.compile(r"^(?:[a-z]{2,6}\.)?anthropic\.")
_VERSION_SUFFIX_RE = re.compile(r"(?:-\d{8})?(?:-v\d+(?::\d+)?)?$")

_MALFORMED_ATTEMPTS = 2  # the first answer plus one retry

_HYPOTHETICAL_RE = re.compile(
    r"\bif i\b|\bimagine\b|\bsuppos(?:e|ing)\b|\bpretend(?:ing)?\b|\bwhat if\b|\bi wish\b"
    r"|\bhypothetically\b|\brole[- ]?play|\bi(?:['’]m| am) basically an?\b",
    re.IGNORECASE,
)
# Sarcasm colours the whole turn, not one sentence of it.
_SARCASM_RE = re.compile(r"\byeah,? right\b|(?:^|\s)/s(?=$|[\s.!?])", re.IGNORECASE)


def _model_family(model: str) -> str:
    return _VERSION_SUFFIX_RE.sub("", _BEDROCK_PREFIX_RE.sub("", model))


def price_per_mtok(model: str) -> tuple[float, float]:
    """(input, output) USD per million tokens; a model without a price is a config error."""
    try:
        return PRICES_PER_MTOK[_model_family(model)]
    except KeyError:
        known = ", ".join(sorted(PRICES_PER_MTOK))
        raise ConfigError(
            f"no price for model {model!r}: add it to PRICES_PER_MTOK (known: {known})"
        ) from None


def cost_usd(model: str, input_tokens: int, output_tokens: int) -> float:
    input_price, output_price = price_per_mtok(model)
    return (input_tokens * input_price + output_tokens * output_price) / 1_000_000


@dataclass(frozen=True)
class LlmUsage:
    """What one model call cost, whether or not its answer was usable."""

    model: str
    input_tokens: int
    output_tokens: int
    cost_usd: float


@dataclass(frozen=True)
class LlmCall:
    """One successful extraction call: the validated answer and its usage."""

    result: ExtractionResult
    usage: LlmUsage


class LlmUnavailable(TransientError):
    """The model API throttled, failed or timed out after the SDK's own retries."""


class LlmRequestRejected(PermanentError):
    """The model API refused the request itself (bad request, auth); a retry cannot help."""

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class MalformedLlmOutput(PermanentError):
    """The model answered, but not with a valid `ExtractionResult`; `usage` is what it cost."""

    def __init__(self, message: str, usage: LlmUsage) -> None:
        super().__init__(message)
        self.usage = usage


class ExtractionFailed(PermanentError):
    """A pass stayed malformed after its retry: the turn fails visibly, never as []."""

    def __init__(self, turn_id: str, malformed: int, calls: tuple[LlmUsage, ...]) -> None:
        super().__init__(
            f"turn {turn_id}: extraction output malformed {malformed} times; "
            f"{len(calls)} calls, giving up"
        )
        self.turn_id = turn_id
        self.malformed = malformed
        self.calls = calls


class ExtractionLlm(Protocol):
    def extract(self, system: str, messages: Sequence[PromptMessage], model: str) -> LlmCall:
        """One structured extraction call.

        Raises `MalformedLlmOutput` when the answer is not a valid `ExtractionResult`,
        `LlmUnavailable` when the API stays unavailable, `LlmRequestRejected` when it refuses.
        """


@dataclass(frozen=True)
class LlmExtraction:
    candidates: tuple[Candidate, ...]
    calls: tuple[LlmUsage, ...]

    @property
    def input_tokens(self) -> int:
        return sum(call.input_tokens for call in self.calls)

    @property
    def output_tokens(self) -> int:
        return sum(call.output_tokens for call in self.calls)

    @property
    def cost_usd(self) -> float:
        return sum(call.cost_usd for call in self.calls)


@dataclass(frozen=True)
class _PassOutcome:
    result: ExtractionResult | None  # None: still malformed after the retry
    calls: tuple[LlmUsage, ...]
    malformed: int
    error: MalformedLlmOutput | None = None


def detail_windows(
    turns: Sequence[SessionTurn], chunk_chars: int, overlap: int
) -> list[tuple[SessionTurn, ...]]:
    """Consecutive windows of about `chunk_chars` characters, each repeating the last
    `overlap` turns of the previous one; a window always holds at least one turn."""
    windows: list[tuple[SessionTurn, ...]] = []
    start = 0
    while start < len(turns):
        end, size = start, 0
        while end < len(turns) and (end == start or size + len(turns[end].text) <= chunk_chars):
            size += len(turns[end].text)
            end += 1
        windows.append(tuple(turns[start:end]))
        if end == len(turns):
            break
        start = max(end - overlap, start + 1)  # always move forward
    return windows


def merge_candidates(batches: Iterable[Sequence[Candidate]]) -> list[Candidate]:
    """One candidate per memory key, the most confident; first-seen order, ties keep the first."""
    merged: dict[str, Candidate] = {}
    for batch in batches:
        for candidate in batch:
            key = memory_key(candidate)
            kept = merged.get(key)
            if kept is None or candidate.confidence > kept.confidence:
                merged[key] = candidate
    return list(merged.values())


def _squash(text: str) -> str:
    return " ".join(text.lower().split())


def cap_hypotheticals(
    candidates: Sequence[Candidate], turn_text: str, cap: float
) -> list[Candidate]:
    """Cap confidence of claims the turn frames as hypothetical, role-play or sarcasm.

    The model is told to do this itself; the check on the turn's wording holds even when it
    does not. A claim stays uncapped only when its value appears in a plainly stated sentence,
    so "I live in Berlin. What if I moved to Paris?" keeps Berlin and caps Paris.
    """
    if _SARCASM_RE.search(turn_text):
        plain: list[str] = []
    else:
        sentences = [segment.text for segment in split_segments(turn_text)]
        plain = [_squash(s) for s in sentences if not _HYPOTHETICAL_RE.search(s)]
        if len(plain) == len(sentences):
            return list(candidates)
    return [
        candidate
        if candidate.confidence <= cap or any(_squash(candidate.value) in s for s in plain)
        else candidate.model_copy(update={"confidence": cap})
        for candidate in candidates
    ]


def _run_pass(llm: ExtractionLlm, model: str, prompt: RenderedPrompt) -> _PassOutcome:
    calls: list[LlmUsage] = []
    error: MalformedLlmOutput | None = None
    for attempt in range(1, _MALFORMED_ATTEMPTS + 1):
        try:
            call = llm.extract(prompt.system, prompt.messages, model)
        except MalformedLlmOutput as exc:
            logger.warning("extraction output malformed (attempt %d): %s", attempt, exc)
            calls.append(exc.usage)
            error = exc
            continue
        calls.append(call.usage)
        return _PassOutcome(call.result, tuple(calls), malformed=attempt - 1)
    return _PassOutcome(None, tuple(calls), malformed=_MALFORMED_ATTEMPTS, error=error)


def _run_passes(
    llm: ExtractionLlm,
    model: str,
    full: RenderedPrompt,
    details: Sequence[RenderedPrompt],
    workers: int,
) -> list[_PassOutcome]:
    if not details:
        return [_run_pass(llm, model, full)]
    # The full pass runs in this thread while the pool works through the windows.
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="detail-pass") as pool:
        futures = [pool.submit(_run_pass, llm, model, prompt) for prompt in details]
        try:
            first = _run_pass(llm, model, full)
            return [first, *(future.result() for future in futures)]
        except BaseException:
            for future in futures:
                future.cancel()  # windows not started yet would be paid for nothing
            raise


def extract_with_llm(
    inp: ExtractPromptInput,
    config: ExtractConfig,
    llm: ExtractionLlm,
    *,
    on_json_fail: Callable[[], None],
) -> LlmExtraction:
    """Candidates of one turn: the full pass, plus the detail pass when the conversation (the
    session's earlier turns and this one) has at least `detail_pass_min_messages` messages.

    `on_json_fail` is called once per malformed answer, in this thread (the caller emits the
    `extraction_json_fail` metric). A pass that stays malformed after one retry raises
    `ExtractionFailed`; `LlmUnavailable` and `LlmRequestRejected` propagate as raised.
    """
    windows: list[tuple[SessionTurn, ...]] = []
    if len(inp.session_turns) + 1 >= config.detail_pass_min_messages:
        windows = detail_windows(
            inp.session_turns, config.detail_chunk_chars, config.detail_overlap_messages
        )
    outcomes = _run_passes(
        llm,
        config.model,
        render(inp, config),
        [render_detail(inp, window, config) for window in windows],
        config.detail_max_concurrency,
    )
    malformed = sum(outcome.malformed for outcome in outcomes)
    for _ in range(malformed):
        on_json_fail()
    calls = tuple(call for outcome in outcomes for call in outcome.calls)
    results = [outcome.result for outcome in outcomes if outcome.result is not None]
    failed = [outcome.error for outcome in outcomes if outcome.result is None]
    if failed:
        raise ExtractionFailed(inp.turn_id, malformed, calls) from failed[0]
    merged = merge_candidates(result.candidates for result in results)
    capped = cap_hypotheticals(merged, inp.turn_text, config.hypothetical_confidence_cap)
    return LlmExtraction(
        candidates=tuple(c.model_copy(update={"source_turn_id": inp.turn_id}) for c in capped),
        calls=calls,
    )
