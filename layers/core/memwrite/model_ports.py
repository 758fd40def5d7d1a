"""Model ports: what the library needs from the models it calls (extraction, the reference
and dedupe judges, the verifier, HyPE's questions) and from the embedder.

The model ports carry a prompt the library rendered and return the answer validated against
the library's own schema: prompts, retries and post-checks are library logic, the adapter is
only the wire (`memwrite.adapters`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from memwrite.claims.candidate import Candidate
from memwrite.costs.usage import LlmUsage
from memwrite.prompts import PromptMessage
from memwrite.prompts.extract import BatchTurn, ExtractionResult
from memwrite.prompts.resolve_refs import ResolveResult
from memwrite.prompts.verify import VerifierVerdict
from memwrite.records.memory import MemoryUnit

__all__ = [
    "CandidateVerifier",
    "DedupeJudge",
    "DedupeJudgement",
    "Embedder",
    "ExtractionLlm",
    "GeneratedQuestions",
    "LlmCall",
    "QuestionGenerator",
    "ResolveJudge",
    "VerifierCall",
]


@dataclass(frozen=True)
class LlmCall:
    """One successful extraction call: the validated answer and its usage."""

    result: ExtractionResult
    usage: LlmUsage


class ExtractionLlm(Protocol):
    def extract(self, system: str, messages: Sequence[PromptMessage], model: str) -> LlmCall:
        """One structured extraction call.

        Raises `MalformedLlmOutput` when the answer is not a valid `ExtractionResult`,
        `LlmUnavailable` when the API stays unavailable, `LlmRequestRejected` when it refuses.
        """

    def budget_wait_s(self, prompt_chars: int, model: str, within_s: float | None = None) -> float:
        """How long until the model budget expects room for one call of `model` sending at
        least `prompt_chars` characters of prompt (0: room now, or no budget); charges
        nothing. A batch the budget cannot pay waits before any work is done for it, in its
        tenant's line with `within_s` (it comes back within that many seconds at most)."""


class ResolveJudge(Protocol):
    def judge(
        self, system: str, messages: Sequence[PromptMessage], model: str
    ) -> tuple[ResolveResult, LlmUsage]:
        """One structured judge call.

        Raises `MalformedLlmOutput` when the answer is not a valid `ResolveResult`,
        `LlmUnavailable` when the API stays unavailable, `LlmRequestRejected` when it refuses.
        """


class Embedder(Protocol):
    """Turns texts into unit vectors whose dot product is their cosine similarity."""

    @property
    def dimension(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Shape (len(texts), dimension), float32, each row L2-normalised (zero for no words)."""


@dataclass(frozen=True)
class DedupeJudgement:
    """The judge's verdict on one pair and what it cost: every call, malformed answers included
    (they are paid for too), and how many answers were malformed."""

    same: bool
    calls: tuple[LlmUsage, ...] = ()
    malformed: int = 0


class DedupeJudge(Protocol):
    def same_memory(self, candidate: str, existing: str) -> DedupeJudgement:
        """Whether both sentences state the same memory (`same`)."""


@dataclass(frozen=True)
class VerifierCall:
    """One verifier answer and what it cost."""

    verdict: VerifierVerdict
    usage: LlmUsage


class CandidateVerifier(Protocol):
    def verify(self, candidate: Candidate, turns: Sequence[BatchTurn]) -> VerifierCall:
        """Check one candidate against the turns of its batch.

        Raises `MalformedLlmOutput` when the answer is not a valid `VerifierVerdict`, and the
        `LlmUnavailable` / `LlmRequestRejected` of `memwrite.extract.llm`.
        """


@dataclass(frozen=True)
class GeneratedQuestions:
    """HyPE questions for one memory and the model calls they cost (none for templates)."""

    questions: list[str]
    calls: tuple[LlmUsage, ...] = ()


class QuestionGenerator(Protocol):
    """HyPE: the questions a user would ask to find a memory (docs/design.md §7)."""

    def questions_for(self, memory: MemoryUnit, count: int) -> GeneratedQuestions:
        """`count` short questions that `memory` answers, without its value where possible;
        raises `LlmUnavailable` / `LlmRequestRejected` (model adapters) for the caller to retry."""
