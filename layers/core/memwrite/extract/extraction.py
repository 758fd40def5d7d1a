"""What extraction found in a batch, per turn: the extractor used, the kept candidates and the
rejected ones with their reasons (the extract stage's result, before it becomes a payload)."""

from __future__ import annotations

from dataclasses import dataclass

from memwrite.claims.candidate import Candidate
from memwrite.costs.usage import LlmUsage
from memwrite.payloads import Extractor
from memwrite.reasons import ExcludedTopic, Reason

__all__ = ["BatchExtraction", "TurnExtraction"]


@dataclass(frozen=True)
class TurnExtraction:
    """One turn's share of a batch: which extractor handled it, what it kept and rejected.
    `excluded`: the turn is of an excluded topic, so its words are kept nowhere (no episode,
    no session-log entry); its candidates of other topics, if any, go on."""

    turn_id: str
    extractor: Extractor
    candidates: tuple[Candidate, ...]
    rejected: tuple[tuple[Candidate, Reason], ...] = ()
    excluded: ExcludedTopic | None = None


@dataclass(frozen=True)
class BatchExtraction:
    turns: tuple[TurnExtraction, ...]
    llm_calls: tuple[LlmUsage, ...] = ()
    model_error: str | None = None  # the model failed after its retries (an error type name)

    @property
    def candidates(self) -> list[Candidate]:
        return [candidate for turn in self.turns for candidate in turn.candidates]
