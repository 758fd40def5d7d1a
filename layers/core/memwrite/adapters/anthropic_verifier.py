"""Anthropic adapter for the verifier: one structured call per candidate, direct or via Bedrock.

The SDK call, its lazy import, the error translation and the usage accounting are
`memwrite.adapters.anthropic_client`'s; the retry of a malformed answer is the orchestrator's
(`memwrite.verifier`), so this adapter makes exactly one call per `verify`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from memwrite.adapters.anthropic_client import StructuredClient
from memwrite.candidate import Candidate
from memwrite.config import ExtractConfig
from memwrite.ports import VerifierCall
from memwrite.prompts.extract import BatchTurn
from memwrite.prompts.verify import VerifierVerdict, render

if TYPE_CHECKING:
    import httpx2

__all__ = ["AnthropicVerifier"]


class AnthropicVerifier:
    """`CandidateVerifier` over the Messages API with structured output (`output_config.format`).

    The model, provider, region, timeout, retries and prices are the extraction model's
    settings; the output limit is `config.verifier.max_output_tokens`.
    """

    def __init__(
        self,
        config: ExtractConfig,
        *,
        api_key: str | None = None,
        aws_region: str | None = None,
        base_url: str | None = None,
        http_client: httpx2.Client | None = None,
        max_retries: int | None = None,
    ) -> None:
        """Limits come from `config`; the keyword arguments are for endpoints and tests."""
        self._client = StructuredClient(
            config,
            VerifierVerdict,
            api_key=api_key,
            aws_region=aws_region,
            base_url=base_url,
            http_client=http_client,
            max_retries=max_retries,
        )
        self._model = config.model
        self._max_tokens = config.verifier.max_output_tokens

    def verify(self, candidate: Candidate, turns: Sequence[BatchTurn]) -> VerifierCall:
        prompt = render(candidate, turns)
        verdict, usage = self._client.call(
            model=self._model,
            system=prompt.system,
            messages=prompt.messages,
            max_tokens=self._max_tokens,
        )
        return VerifierCall(verdict, usage)
