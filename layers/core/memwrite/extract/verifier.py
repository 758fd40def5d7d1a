"""The verifier: an optional second reading of each candidate against its source turns.

After extraction (rules and LLM), each kept candidate of at least `min_importance` is sent with
the turns of its batch to a model that runs eight explicit checks (`memwrite.prompts.verify`)
and passes it, corrects it, or drops it with `Unverified{check}`. Off by default; a deployment
or a tenant turns it on (`ExtractConfig.verifier`, `TenantOverrides.verifier_enabled`). Its
calls join the batch's LLM usage, so their cost reaches the trace.

Pure orchestration against the `CandidateVerifier` port; the SDK lives in
`memwrite.adapters.anthropic.verifier`. A malformed answer (including a correction the
`Candidate` schema refuses) is asked again once, then the batch fails visibly with
`VerificationFailed`, never a silent pass or drop.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Final

from pydantic import ValidationError

from memwrite.claims.candidate import Candidate
from memwrite.config.settings import VerifierConfig
from memwrite.costs.usage import LlmUsage
from memwrite.errors import MalformedLlmOutput, VerificationFailed
from memwrite.extract.extraction import BatchExtraction, TurnExtraction
from memwrite.model_ports import CandidateVerifier
from memwrite.prompts.extract import BatchTurn
from memwrite.prompts.verify import VerifierVerdict
from memwrite.reasons import Reason, Unverified

__all__ = ["verify_extraction"]

logger = logging.getLogger(__name__)

_MALFORMED_ATTEMPTS: Final = 2  # the first answer plus one retry


def _corrected(candidate: Candidate, verdict: VerifierVerdict) -> Candidate:
    """The candidate with the verifier's wording and value, validated like any candidate."""
    fields = candidate.model_dump() | {
        "text": verdict.corrected_text,
        "value": verdict.corrected_value,
    }
    return Candidate.model_validate(fields)


def _check(
    candidate: Candidate,
    turns: Sequence[BatchTurn],
    verifier: CandidateVerifier,
    calls: list[LlmUsage],
) -> tuple[Candidate | None, Reason | None]:
    """(kept candidate or None, the drop reason) for one candidate; usage goes to `calls`."""
    for attempt in range(1, _MALFORMED_ATTEMPTS + 1):
        try:
            call = verifier.verify(candidate, turns)
        except MalformedLlmOutput as exc:
            calls.append(exc.usage)
            logger.warning("verifier output malformed (attempt %d): %s", attempt, exc)
            continue
        calls.append(call.usage)
        verdict = call.verdict
        if verdict.outcome == "pass":
            return candidate, None
        if verdict.outcome == "drop" and verdict.failed_check is not None:
            return None, Unverified(check=verdict.failed_check)
        try:
            return _corrected(candidate, verdict), None
        except ValidationError as exc:
            # Places and kinds only: the correction may quote the user's turns.
            where = exc.errors(include_input=False)[0]["type"]
            logger.warning("verifier correction refused (attempt %d): %s", attempt, where)
    raise VerificationFailed(candidate.source_turn_id, _MALFORMED_ATTEMPTS, tuple(calls))


def _wanted(candidate: Candidate, rule_made: bool, config: VerifierConfig) -> bool:
    if rule_made and not config.include_rule_candidates:
        return False
    return candidate.importance >= config.min_importance


def verify_extraction(
    extraction: BatchExtraction,
    turns: Sequence[BatchTurn],
    config: VerifierConfig,
    verifier: CandidateVerifier | None,
) -> BatchExtraction:
    """The extraction with every wanted candidate passed, corrected or dropped (Unverified).

    Unchanged when the verifier is off for this config or none is wired. A turn the rules
    handled alone holds rule-made candidates only; those are checked when
    `include_rule_candidates` is set.
    """
    if not config.enabled or verifier is None:
        return extraction
    calls: list[LlmUsage] = []
    checked: list[TurnExtraction] = []
    for turn in extraction.turns:
        # Extractor is a StrEnum of memwrite.extract.stage, which imports this module.
        rule_made = turn.extractor != "llm"
        kept: list[Candidate] = []
        rejected = list(turn.rejected)
        for candidate in turn.candidates:
            if not _wanted(candidate, rule_made, config):
                kept.append(candidate)
                continue
            outcome, reason = _check(candidate, turns, verifier, calls)
            if outcome is not None:
                kept.append(outcome)
            elif reason is not None:
                rejected.append((candidate, reason))
        checked.append(replace(turn, candidates=tuple(kept), rejected=tuple(rejected)))
    return replace(extraction, turns=tuple(checked), llm_calls=(*extraction.llm_calls, *calls))
