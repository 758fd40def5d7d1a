"""Anthropic adapter for the verifier: one structured call per candidate, direct or via Bedrock.

The SDK call, its lazy import, the error translation and the usage accounting are
`memwrite.adapters.anthropic.client`'s; the retry of a malformed answer is the orchestrator's
(`memwrite.extract.verifier`), so this adapter makes exactly one call per `verify`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Unpack

from memwrite.adapters.anthropic.client import ClientOptions, StructuredClient
from memwrite.candidate import Candidate
from memwrite.config import ExtractConfig
from memwrite.ports import VerifierCall
from memwrite.prompts.extract import BatchTurn
from memwrite.prompts.verify import VerifierVerdict, render

__all__ = ["AnthropicVerifier"]


class AnthropicVerifier:
    """`CandidateVerifier` over the Messages API with structured output (`output_config.format`).

    The model, provider, region, timeout, retries and prices are the extraction model's
    settings; the output limit is `config.verifier.max_output_tokens`.
    """

    def __init__(self, config: ExtractConfig, **options: Unpack[ClientOptions]) -> None:
        self._client = StructuredClient(
            config, VerifierVerdict, max_tokens=config.verifier.max_output_tokens, **options
        )

    def verify(self, candidate: Candidate, turns: Sequence[BatchTurn]) -> VerifierCall:
        verdict, usage = self._client.call(*render(candidate, turns))
        return VerifierCall(verdict, usage)
