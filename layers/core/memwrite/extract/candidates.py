"""What one batch of turns yields, as a pure decision: the rules on every turn, one model call
for the turns they cannot fully handle, the verifier, then the tenant's topic filter, quality
and grounding (used by the extract stage and by `memwrite extract`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from functools import lru_cache

from memwrite.claims.candidate import Candidate
from memwrite.config.settings import ExtractConfig
from memwrite.costs.usage import LlmUsage
from memwrite.errors import (
    BudgetExhausted,
    ExtractionFailed,
    LlmRefused,
    LlmRequestRejected,
    LlmUnavailable,
    TruncatedLlmOutput,
)
from memwrite.extract.extraction import BatchExtraction, TurnExtraction
from memwrite.extract.llm import extract_with_llm, extraction_prompts, merge_candidates
from memwrite.extract.rules import RuleExtraction, extract_with_rules
from memwrite.extract.verifier import verify_extraction
from memwrite.model_ports import CandidateVerifier, ExtractionLlm
from memwrite.payloads import Extractor
from memwrite.prompts import RenderedPrompt
from memwrite.prompts.extract import BatchTurn, ExtractPromptInput, SessionTurn
from memwrite.reasons import ExcludedTopic, QualityDiscard, Reason, Ungrounded
from memwrite.topics.matcher import marked_topic

__all__ = [
    "BUDGET_ERROR",
    "TRUNCATED_ERROR",
    "excluded_by_vocabulary",
    "excluded_topic",
    "extract_candidates",
    "model_prompts",
]

# `BatchExtraction.model_error` of a batch deferred for want of budget, and of one whose
# answer stayed cut off at max_tokens (DeferredModelFailed{error="max_tokens"}).
BUDGET_ERROR = BudgetExhausted.__name__
TRUNCATED_ERROR = "max_tokens"
# Rule readings kept for turns read again (`_rule_reading`).
_KEPT_RULE_READINGS = 4_096


def excluded_topic(candidate: Candidate, config: ExtractConfig) -> ExcludedTopic | None:
    """The tenant's topic filter (`extraction.include_topics`, `exclude_topics`): applied to
    the candidates of the rules and of the model alike."""
    if candidate.topic in config.exclude_topics or (
        config.include_topics is not None and candidate.topic not in config.include_topics
    ):
        return ExcludedTopic(topic=candidate.topic)
    return None


def excluded_by_vocabulary(text: str, config: ExtractConfig) -> ExcludedTopic | None:
    """The excluded topic whose vocabulary marks a turn no model read (docs/design.md §2):
    the turn is dropped whole, never kept as an episode."""
    if not config.exclude_topics:
        return None
    topic = marked_topic(text, config.exclude_topics, config.topic_terms)
    return None if topic is None else ExcludedTopic(topic=topic)


def _triage(
    turn_id: str,
    extractor: Extractor,
    candidates: Sequence[Candidate],
    config: ExtractConfig,
    vocabulary: ExcludedTopic | None = None,
) -> TurnExtraction:
    """`vocabulary`: the turn's excluded topic by its words (no model read it): every
    candidate goes with it."""
    kept: list[Candidate] = []
    rejected: list[tuple[Candidate, Reason]] = []
    excluded_turn = vocabulary
    for candidate in candidates:
        if vocabulary is not None:
            rejected.append((candidate, vocabulary))
        elif excluded := excluded_topic(candidate, config):
            rejected.append((candidate, excluded))
            if candidate.topic in config.exclude_topics:
                # The model (or a rule) put part of the turn under an excluded topic: its
                # words are kept nowhere; its candidates of other topics go on.
                excluded_turn = excluded_turn or excluded
        elif candidate.quality.verdict == "discard":
            rejected.append((candidate, QualityDiscard(reason=candidate.quality.reason)))
        elif not candidate.grounded:
            rejected.append((candidate, Ungrounded()))
        else:
            kept.append(candidate)
    return TurnExtraction(turn_id, extractor, tuple(kept), tuple(rejected), excluded_turn)


def _rule_reading(turn: BatchTurn) -> RuleExtraction:
    return _read_with_rules(turn.text, turn.role.value, turn.timestamp, turn.turn_id)


@lru_cache(maxsize=_KEPT_RULE_READINGS)
def _read_with_rules(text: str, role: str, observed_at: datetime, turn_id: str) -> RuleExtraction:
    # Kept: a turn the model is needed for is read again when its batch waits for the budget
    # and retries, and, kept as an episode, when the batch lane submits it and applies its
    # answer. The rules are pure and what they return is frozen: a kept reading is the reading.
    return extract_with_rules(text, role=role, observed_at=observed_at, source_turn_id=turn_id)


def model_prompts(
    turns: Sequence[BatchTurn], context: Sequence[SessionTurn], config: ExtractConfig
) -> list[RenderedPrompt]:
    """The model requests `extract_candidates` makes for this batch when the model answers
    (none when the rules handle every turn): the batch lane submits these."""
    # The first turn beyond the rules settles it: the batch lane asks this of every pending
    # episode (each one deferred for a turn the rules could not read) at each round.
    if all(_rule_reading(turn).fully_covered for turn in turns):
        return []
    inp = ExtractPromptInput(turns=tuple(turns), session_turns=tuple(context))
    return extraction_prompts(inp, config)


def extract_candidates(
    turns: Sequence[BatchTurn],
    context: Sequence[SessionTurn],
    config: ExtractConfig,
    llm: ExtractionLlm | None,
    *,
    on_json_fail: Callable[[], None],
    verifier: CandidateVerifier | None = None,
    defer_on_model_failure: bool = False,
    defer_on_budget: bool = False,
) -> BatchExtraction:
    """Rules on every turn; one LLM batch when some turn is beyond them and an LLM is set;
    then the verifier, when `config.verifier` has it on and one is wired.

    With `defer_on_model_failure` (episodes kept), a model that fails after its retries
    defers the turns it was needed for (`model_error`) instead of raising, and a deferred
    turn's rule candidates are dropped: the turn is kept whole, as an episode. An empty model
    budget (`BudgetExhausted`) propagates, for the batch to wait in the queue, unless
    `defer_on_budget` (it waited long enough): then it defers like a failure (`BUDGET_ERROR`)."""
    rules = {turn.turn_id: _rule_reading(turn) for turn in turns}
    needs_llm = any(not found.fully_covered for found in rules.values())
    llm_candidates: dict[str, list[Candidate]] = {}
    calls: tuple[LlmUsage, ...] = ()
    model_error: str | None = None
    if needs_llm and llm is not None:
        # The whole batch goes in, in order, so the model reads the conversation as it went;
        # turns the rules covered cost no extra call and their candidates are merged below.
        try:
            result = extract_with_llm(
                ExtractPromptInput(turns=tuple(turns), session_turns=tuple(context)),
                config,
                llm,
                on_json_fail=on_json_fail,
            )
        except (
            LlmUnavailable,
            LlmRequestRejected,
            ExtractionFailed,
            TruncatedLlmOutput,
            LlmRefused,
        ) as exc:
            waits = isinstance(exc, BudgetExhausted) and not defer_on_budget
            if not defer_on_model_failure or waits:
                raise
            # The SDK's own retries (and the malformed-answer retry) are spent: the turns wait
            # as episodes for a backfill, rather than the batch for a manual DLQ redrive.
            model_error = (
                TRUNCATED_ERROR if isinstance(exc, TruncatedLlmOutput) else type(exc).__name__
            )
            calls = exc.calls if isinstance(exc, ExtractionFailed) else ()
        else:
            calls = result.calls
            for candidate in result.candidates:
                llm_candidates.setdefault(candidate.source_turn_id or "", []).append(candidate)
    extractions = []
    for turn in turns:
        found = rules[turn.turn_id]
        if found.fully_covered:
            extractor = Extractor.RULES
        elif llm is None or model_error is not None:
            extractor = Extractor.DEFERRED
        else:
            extractor = Extractor.LLM
        # No model read the turn: the excluded topics' vocabularies decide for it.
        vocabulary = (
            None
            if extractor is Extractor.LLM
            # The question a short answer answered is kept with it: it counts too.
            else excluded_by_vocabulary(f"{turn.in_reply_to or ''}\n{turn.text}", config)
        )
        if extractor is Extractor.DEFERRED and defer_on_model_failure:
            # Kept whole as an episode (unless excluded): a partial reading is never stored.
            extractions.append(TurnExtraction(turn.turn_id, extractor, (), excluded=vocabulary))
            continue
        # The rules' candidates are exact; the LLM fills in the rest (same key: higher confidence).
        merged = merge_candidates([found.candidates, llm_candidates.get(turn.turn_id, [])])
        extractions.append(_triage(turn.turn_id, extractor, merged, config, vocabulary))
    return verify_extraction(
        BatchExtraction(tuple(extractions), calls, model_error), turns, config.verifier, verifier
    )
