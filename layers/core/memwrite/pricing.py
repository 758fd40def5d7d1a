"""Model prices: USD per million tokens from the configured table, by model family.

Prompt caching is priced from the input price, as both the Anthropic API and Bedrock bill it
(https://platform.claude.com/docs/en/build-with-claude/prompt-caching#pricing): a cache write
(5-minute lifetime) costs 1.25 times the input price, a cache read 0.1 times.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from memwrite.errors import ConfigError

__all__ = [
    "CACHE_READ_PRICE_FACTOR",
    "CACHE_WRITE_PRICE_FACTOR",
    "cost_usd",
    "model_family",
    "price_per_mtok",
]

CACHE_WRITE_PRICE_FACTOR = 1.25  # of the input price, per token written to the 5-minute cache
CACHE_READ_PRICE_FACTOR = 0.1  # of the input price, per token read from the cache

# Bedrock ids wrap the model name: "us.anthropic.claude-haiku-4-5-20251001-v1:0".
_BEDROCK_PREFIX_RE = re.compile(r"^(?:[a-z]{2,6}\.)?anthropic\.")
_VERSION_SUFFIX_RE = re.compile(r"(?:-\d{8})?(?:-v\d+(?::\d+)?)?$")


def model_family(model: str) -> str:
    """The price table's key for a model id: "claude-haiku-4-5" for the API's dated id and
    for Bedrock's regional one alike."""
    return _VERSION_SUFFIX_RE.sub("", _BEDROCK_PREFIX_RE.sub("", model))


def price_per_mtok(model: str, prices: Mapping[str, tuple[float, float]]) -> tuple[float, float]:
    """(input, output) USD per million tokens; a model without a price is a config error."""
    try:
        return prices[model_family(model)]
    except KeyError:
        known = ", ".join(sorted(prices))
        raise ConfigError(
            f"no price for model {model!r}: add it to extract.prices_per_mtok (known: {known})"
        ) from None


def cost_usd(
    model: str,
    input_tokens: int,
    output_tokens: int,
    prices: Mapping[str, tuple[float, float]],
    *,
    cache_creation_input_tokens: int = 0,
    cache_read_input_tokens: int = 0,
) -> float:
    """USD at list price; `input_tokens` is the uncached input (the API's `usage.input_tokens`),
    the cache's writes and reads are priced apart."""
    input_price, output_price = price_per_mtok(model, prices)
    input_equivalent = (
        input_tokens
        + cache_creation_input_tokens * CACHE_WRITE_PRICE_FACTOR
        + cache_read_input_tokens * CACHE_READ_PRICE_FACTOR
    )
    return (input_equivalent * input_price + output_tokens * output_price) / 1_000_000
