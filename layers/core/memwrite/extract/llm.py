"""LLM extraction of a conversation batch: full pass, detail pass, retry, post-checks, cost.

The unit is a batch: the new turns of one session that arrive together. One full-pass call reads
them all (with earlier session turns as context); a long conversation adds one detail-pass call
per window that holds a batch turn. The model attributes each candidate to a turn by its prompt
ref, which is mapped back to the turn id here.

Pure orchestration against the `ExtractionLlm` port; the anthropic SDK lives only in
`memwrite.adapters.anthropic.client`, so importing this module costs no SDK cold start. The errors
the port raises (`MalformedLlmOutput`, `LlmUnavailable`, ...) are in `memwrite.errors`, shared by
the orchestrator and every adapter.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextvars import copy_context
from dataclasses import dataclass, replace
from typing import TypeVar

from memwrite.claims.candidate import Candidate, memory_key
from memwrite.claims.scoring import wording_confidence, wording_cues
from memwrite.config.settings import ExtractConfig
from memwrite.costs.usage import LlmUsage
from memwrite.errors import ExtractionFailed, LlmRefused, MalformedLlmOutput, TruncatedLlmOutput
from memwrite.model_ports import ExtractionLlm
from memwrite.prompts import RenderedPrompt
from memwrite.prompts.extract import (
    BatchTurn,
    ExtractPromptInput,
    SessionTurn,
    context_turns,
    render,
    render_detail,
    turn_refs,
)
from memwrite.segment import split_segments

__all__ = [
    "LlmExtraction",
    "cap_by_wording",
    "cap_hypotheticals",
    "count_llm_calls",
    "detail_windows",
    "extract_with_llm",
    "extraction_prompts",
    "merge_candidates",
]

logger = logging.getLogger(__name__)


_MALFORMED_ATTEMPTS = 2  # the first answer plus one retry

_HYPOTHETICAL_RE = re.compile(
    r"\bif i\b|\bimagine\b|\bsuppos(?:e|ing)\b|\bpretend(?:ing)?\b|\bwhat if\b|\bi wish\b"
    r"|\bhypothetically\b|\brole[- ]?play|\bi(?:['’]m| am) basically an?\b",
    re.IGNORECASE,
)
# Sarcasm colours the whole turn, not one sentence of it.
_SARCASM_RE = re.compile(r"\byeah,? right\b|(?:^|\s)/s(?=$|[\s.!?])", re.IGNORECASE)


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
    candidates: tuple[Candidate, ...] | None  # None: still malformed after the retry
    calls: tuple[LlmUsage, ...]
    malformed: int
    error: MalformedLlmOutput | None = None


_Turn = TypeVar("_Turn", bound=SessionTurn | BatchTurn)


def detail_windows(
    turns: Sequence[_Turn], chunk_chars: int, overlap: int
) -> list[tuple[_Turn, ...]]:
    """Consecutive windows of about `chunk_chars` characters, each repeating the last
    `overlap` turns of the previous one; a window always holds at least one turn."""
    windows: list[tuple[_Turn, ...]] = []
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
    """One candidate per memory key, the most confident; first-seen order, ties keep the first.
    A claim that one pass read as an explicit correction stays one when another pass found it
    in the same turn without the cue (the detail pass looks for values, not for corrections)."""
    merged: dict[str, Candidate] = {}
    for batch in batches:
        for candidate in batch:
            key = memory_key(candidate)
            kept = merged.get(key)
            if kept is None:
                merged[key] = candidate
                continue
            best = candidate if candidate.confidence > kept.confidence else kept
            same_turn = candidate.source_turn_id == kept.source_turn_id
            if same_turn and (candidate.correction or kept.correction) and not best.correction:
                best = best.model_copy(update={"correction": True})
            merged[key] = best
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


def cap_by_wording(candidates: Sequence[Candidate], turn_text: str) -> list[Candidate]:
    """Cap confidence by the wording of the sentence that states each claim: a hedge, a
    question, reported speech, a plan or a wish (`memwrite.claims.scoring.wording_cues`).

    The model is told to lower confidence itself; this holds when it does not. A claim stated in
    several sentences takes the plainest of them; one whose value is in no sentence (the model
    reworded it) keeps the model's confidence.
    """
    sentences = [segment.text for segment in split_segments(turn_text)]
    capped: list[Candidate] = []
    for candidate in candidates:
        value = _squash(candidate.value)
        ceilings = [
            wording_confidence(candidate.confidence, wording_cues(sentence))
            for sentence in sentences
            if value in _squash(sentence)
        ]
        ceiling = max(ceilings, default=candidate.confidence)
        capped.append(
            candidate.model_copy(update={"confidence": ceiling})
            if ceiling < candidate.confidence
            else candidate
        )
    return capped


def _pays(turn: SessionTurn | BatchTurn, config: ExtractConfig) -> bool:
    """Whether a window holding this turn gives the detail pass something the full pass did
    not have: with `detail_pass` "cut_turns", a batch turn the full pass showed cut at
    `max_turn_chars` (the window shows it whole); with "long_conversations", any batch turn."""
    if not isinstance(turn, BatchTurn):
        return False  # context only: nothing new to extract from it
    return config.detail_pass == "long_conversations" or len(turn.text) > config.max_turn_chars


def _conversation_windows(
    inp: ExtractPromptInput, config: ExtractConfig
) -> list[tuple[SessionTurn | BatchTurn, ...]]:
    """The detail pass's windows: none for a short conversation; for a long one, the windows of
    the shown context plus the batch where it pays (`_pays`): by default only those that hold a
    batch turn the full pass saw cut, since otherwise a window rereads the full pass's text."""
    if len(inp.session_turns) + len(inp.turns) < config.detail_pass_min_messages:
        return []
    if not any(_pays(turn, config) for turn in inp.turns):
        return []
    conversation: tuple[SessionTurn | BatchTurn, ...] = (*context_turns(inp, config), *inp.turns)
    windows = detail_windows(
        conversation, config.detail_chunk_chars, config.detail_overlap_messages
    )
    return [w for w in windows if any(_pays(turn, config) for turn in w)]


def count_llm_calls(inp: ExtractPromptInput, config: ExtractConfig) -> int:
    """How many calls `extract_with_llm` makes when every answer is valid: the full pass plus
    one per detail window (retries of malformed answers come on top)."""
    return 1 + len(_conversation_windows(inp, config))


def extraction_prompts(inp: ExtractPromptInput, config: ExtractConfig) -> list[RenderedPrompt]:
    """The prompts `extract_with_llm` sends for a batch, the full pass first: what the batch
    lane submits (`memwrite.backfill.batch`) is exactly what a live extraction asks."""
    windows = _conversation_windows(inp, config)
    return [render(inp, config), *(render_detail(inp, window, config) for window in windows)]


def _answer(
    llm: ExtractionLlm,
    model: str,
    prompt: RenderedPrompt,
    refs: Mapping[str, BatchTurn],
    cap: float,
) -> tuple[list[Candidate], LlmUsage]:
    """One call: its candidates attributed to their turns (ref -> turn id) and capped against
    their own turn's wording. A missing or unknown ref makes the answer malformed."""
    call = llm.extract(prompt.system, prompt.messages, model)
    candidates: list[Candidate] = []
    for position, candidate in enumerate(call.result.candidates, start=1):
        ref = candidate.source_turn_id
        turn = refs.get(ref) if ref is not None else None
        if turn is None:
            # The ref itself is not quoted: the model may have put turn text there.
            problem = "no source_turn_id" if ref is None else "an unknown source_turn_id"
            raise MalformedLlmOutput(
                f"candidate {position} has {problem} (refs: {', '.join(refs)})",
                replace(call.usage, malformed=True),
            )
        attributed = candidate.model_copy(update={"source_turn_id": turn.turn_id})
        candidates.extend(
            cap_by_wording(cap_hypotheticals([attributed], turn.text, cap), turn.text)
        )
    return candidates, call.usage


def _run_pass(
    llm: ExtractionLlm,
    model: str,
    prompt: RenderedPrompt,
    refs: Mapping[str, BatchTurn],
    cap: float,
) -> _PassOutcome:
    calls: list[LlmUsage] = []
    error: MalformedLlmOutput | None = None
    for attempt in range(1, _MALFORMED_ATTEMPTS + 1):
        try:
            candidates, usage = _answer(llm, model, prompt, refs, cap)
        except (TruncatedLlmOutput, LlmRefused):
            # Truncated: already asked again with more room (the client). Refused (a refusal,
            # content filter or guardrail): asking again cannot help either.
            raise
        except MalformedLlmOutput as exc:
            logger.warning("extraction output malformed (attempt %d): %s", attempt, exc)
            calls.append(exc.usage)
            error = exc
            continue
        calls.append(usage)
        return _PassOutcome(tuple(candidates), tuple(calls), malformed=attempt - 1)
    return _PassOutcome(None, tuple(calls), malformed=_MALFORMED_ATTEMPTS, error=error)


def _run_passes(
    llm: ExtractionLlm,
    prompts: Sequence[RenderedPrompt],
    refs: Mapping[str, BatchTurn],
    config: ExtractConfig,
) -> list[_PassOutcome]:
    """Every pass, the first (the full pass) in this thread while a pool runs the others."""

    def run(prompt: RenderedPrompt) -> _PassOutcome:
        return _run_pass(llm, config.model, prompt, refs, config.hypothetical_confidence_cap)

    full, *details = prompts
    if not details:
        return [run(full)]
    with ThreadPoolExecutor(
        max_workers=config.detail_max_concurrency, thread_name_prefix="detail-pass"
    ) as pool:
        # Each window in a copy of this context: its calls reach the run's usage meter.
        futures = [pool.submit(copy_context().run, run, prompt) for prompt in details]
        try:
            first = run(full)
            return [first, *(future.result() for future in futures)]
        except BaseException:
            for future in futures:
                future.cancel()  # windows not started yet would be paid for nothing
            raise


def _batch_label(inp: ExtractPromptInput) -> str:
    """How errors name the batch: by its first turn, and by its size when it has several."""
    first = inp.turns[0].turn_id
    if len(inp.turns) == 1:
        return f"turn {first}"
    return f"batch of {len(inp.turns)} turns starting {first}"


def extract_with_llm(
    inp: ExtractPromptInput,
    config: ExtractConfig,
    llm: ExtractionLlm,
    *,
    on_json_fail: Callable[[], None],
) -> LlmExtraction:
    """Candidates of one batch: the full pass over its turns, plus the detail pass when the
    conversation (the session's earlier turns and the batch) has at least
    `detail_pass_min_messages` messages and a window of it pays (`detail_pass`).
    `count_llm_calls` says how many calls that is.

    Every candidate's `source_turn_id` is the id of one of `inp.turns`, and its confidence is
    capped when its own turn frames it as hypothetical. Same memory key from several passes:
    the most confident wins. `on_json_fail` is called once per malformed answer, in this
    thread (the caller emits the `extraction_json_fail` metric). A pass that stays malformed
    after one retry raises `ExtractionFailed`; `LlmUnavailable` and `LlmRequestRejected`
    propagate as raised.
    """
    outcomes = _run_passes(llm, extraction_prompts(inp, config), turn_refs(inp), config)
    malformed = sum(outcome.malformed for outcome in outcomes)
    for _ in range(malformed):
        on_json_fail()
    calls = tuple(call for outcome in outcomes for call in outcome.calls)
    failed = [outcome.error for outcome in outcomes if outcome.candidates is None]
    if failed:
        raise ExtractionFailed(_batch_label(inp), malformed, calls) from failed[0]
    merged = merge_candidates(
        outcome.candidates for outcome in outcomes if outcome.candidates is not None
    )
    return LlmExtraction(candidates=tuple(merged), calls=calls)
