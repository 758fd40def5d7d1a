"""Anthropic adapter for the verifier: one structured call per candidate, direct or via Bedrock.

The SDK call is `memwrite.adapters.anthropic.client`'s, the port's shape
`memwrite.adapters.model_ports`'; the retry of a malformed answer is the orchestrator's
(`memwrite.extract.verifier`), so this adapter makes exactly one call per `verify`.
"""

from __future__ import annotations

from typing import Unpack

from memwrite.adapters.anthropic.client import ClientOptions, StructuredClient
from memwrite.adapters.model_ports import ModelVerifier
from memwrite.config.settings import ExtractConfig
from memwrite.prompts.verify import VerifierVerdict

__all__ = ["AnthropicVerifier"]


class AnthropicVerifier(ModelVerifier):
    """`CandidateVerifier` over the Messages API with structured output (`output_config.format`).

    The model, provider, region, timeout, retries and prices are `config`'s; the output limit
    is `config.verifier.max_output_tokens`.
    """

    def __init__(self, config: ExtractConfig, **options: Unpack[ClientOptions]) -> None:
        super().__init__(
            StructuredClient(
                config, VerifierVerdict, max_tokens=config.verifier.max_output_tokens, **options
            )
        )
