"""The model ports over any provider's structured calls (`memwrite.adapters.structured`).

Each class adds only its port's shape to one `StructuredCalls` client: the answer's schema is
the client's, and so are the model, the budget and the error translation. The providers'
adapters (`memwrite.adapters.anthropic.*`, `memwrite.adapters.aws.bedrock_converse`) build the
client and hand it here. The prompts are provider-neutral (`memwrite.prompts`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Final

from memwrite.adapters.structured import StructuredCalls
from memwrite.adapters.template_questions import TemplateQuestions
from memwrite.claims.candidate import Candidate
from memwrite.costs.usage import LlmUsage
from memwrite.errors import MalformedLlmOutput
from memwrite.model_ports import DedupeJudgement, GeneratedQuestions, LlmCall, VerifierCall
from memwrite.prompts import PromptMessage
from memwrite.prompts import dedupe as dedupe_prompt
from memwrite.prompts import hype as hype_prompt
from memwrite.prompts import verify as verify_prompt
from memwrite.prompts.dedupe import DedupeVerdict
from memwrite.prompts.extract import BatchTurn, ExtractionResult
from memwrite.prompts.hype import HypeQuestions
from memwrite.prompts.resolve_refs import ResolveResult
from memwrite.prompts.verify import VerifierVerdict
from memwrite.records.memory import MemoryUnit

__all__ = [
    "DEDUPE_MAX_OUTPUT_TOKENS",
    "JUDGE_MAX_OUTPUT_TOKENS",
    "QUESTIONS_MAX_OUTPUT_TOKENS",
    "ModelDedupeJudge",
    "ModelExtractor",
    "ModelQuestions",
    "ModelResolveJudge",
    "ModelVerifier",
]

logger = logging.getLogger(__name__)

# A verdict is a boolean and a few words: some 30 tokens; the rest is headroom.
DEDUPE_MAX_OUTPUT_TOKENS: Final = 256
# A decision is a ref, an answer and a few words: a batch's worth fits easily.
JUDGE_MAX_OUTPUT_TOKENS: Final = 2_048
QUESTIONS_MAX_OUTPUT_TOKENS: Final = 512  # three short questions are about 60 tokens

_MALFORMED_ATTEMPTS: Final = 2  # the dedupe judge's first answer plus one retry


class ModelExtractor:
    """`ExtractionLlm`: one structured call per pass; a cut-off answer is asked again with
    more room by the client (built with `grow_on_truncation`), a malformed one by the caller
    (`memwrite.extract.llm`)."""

    def __init__(self, client: StructuredCalls[ExtractionResult]) -> None:
        self._client = client

    def extract(self, system: str, messages: Sequence[PromptMessage], model: str) -> LlmCall:
        result, usage = self._client.call(system, messages, model=model)
        return LlmCall(result=result, usage=usage)

    def budget_wait_s(self, prompt_chars: int, model: str, within_s: float | None = None) -> float:
        return self._client.budget_wait_s(prompt_chars, model, within_s)


class ModelVerifier:
    """`CandidateVerifier`: exactly one call per `verify`; the retry of a malformed answer is
    the orchestrator's (`memwrite.extract.verifier`)."""

    def __init__(self, client: StructuredCalls[VerifierVerdict]) -> None:
        self._client = client

    def verify(self, candidate: Candidate, turns: Sequence[BatchTurn]) -> VerifierCall:
        verdict, usage = self._client.call(*verify_prompt.render(candidate, turns))
        return VerifierCall(verdict, usage)


class ModelResolveJudge:
    """`ResolveJudge`: the answer is validated as a `ResolveResult` by the client; whether its
    refs and options make sense is the caller's check (`memwrite.resolve_refs.references`)."""

    def __init__(self, client: StructuredCalls[ResolveResult]) -> None:
        self._client = client

    def judge(
        self, system: str, messages: Sequence[PromptMessage], model: str
    ) -> tuple[ResolveResult, LlmUsage]:
        return self._client.call(system, messages, model=model)


class ModelDedupeJudge:
    """`DedupeJudge` (tier 3). `LlmUnavailable` propagates so that the state machine retries
    the candidate later. A malformed answer is asked again once; if it is still malformed the
    pair is kept distinct, because a wrong merge loses a fact while a missed merge only costs
    a duplicate."""

    def __init__(self, client: StructuredCalls[DedupeVerdict]) -> None:
        self._client = client

    def same_memory(self, candidate: str, existing: str) -> DedupeJudgement:
        """The model's verdict (distinct when it stays malformed) and every call it took."""
        prompt = dedupe_prompt.render(candidate, existing)
        calls: list[LlmUsage] = []
        for attempt in range(1, _MALFORMED_ATTEMPTS + 1):
            try:
                verdict, usage = self._client.call(*prompt)
            except MalformedLlmOutput as exc:
                calls.append(exc.usage)
                logger.warning("dedupe judge output malformed (attempt %d): %s", attempt, exc)
                continue
            calls.append(usage)
            return DedupeJudgement(verdict.same, tuple(calls), malformed=attempt - 1)
        logger.warning("dedupe judge output stayed malformed after a retry: kept distinct")
        return DedupeJudgement(False, tuple(calls), malformed=_MALFORMED_ATTEMPTS)


class ModelQuestions:
    """`QuestionGenerator` (HyPE). A malformed answer falls back to the template questions
    (`memwrite.adapters.template_questions`): the memory is still indexed, with worse
    questions, rather than stuck in the outbox; the malformed answer's usage is still
    reported, as it was paid for."""

    def __init__(self, client: StructuredCalls[HypeQuestions]) -> None:
        self._client = client
        self._fallback = TemplateQuestions()

    def questions_for(self, memory: MemoryUnit, count: int) -> GeneratedQuestions:
        try:
            answer, usage = self._client.call(*hype_prompt.render(memory, count))
        except MalformedLlmOutput as exc:
            logger.warning("HyPE questions malformed, using templates: %s", exc)
            fallback = self._fallback.questions_for(memory, count)
            return GeneratedQuestions(fallback.questions, (exc.usage,))
        questions = [question.strip() for question in answer.questions if question.strip()]
        return GeneratedQuestions(questions[:count], (usage,))
