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
    "LIST_PRICES_PER_MTOK",
    "cost_usd",
    "model_family",
    "price_per_mtok",
]

CACHE_WRITE_PRICE_FACTOR = 1.25  # of the input price, per token written to the 5-minute cache
CACHE_READ_PRICE_FACTOR = 0.1  # of the input price, per token read from the cache

# The default `extract.prices_per_mtok`: USD per million (input, output) tokens by model family.
LIST_PRICES_PER_MTOK: dict[str, tuple[float, float]] = {
    # Claude: the Anthropic API's list prices, the same on Bedrock.
    "claude-haiku-4-5": (1.00, 5.00),
    "claude-sonnet-4-5": (3.00, 15.00),
    "claude-opus-4-5": (5.00, 25.00),
    "claude-3-5-haiku": (0.80, 4.00),
    "claude-3-haiku": (0.25, 1.25),
    # Amazon Nova and Meta Llama on Bedrock: on-demand list prices in US East
    # (https://aws.amazon.com/bedrock/pricing/); other regions differ, set yours.
    "nova-micro": (0.035, 0.14),
    "nova-lite": (0.06, 0.24),
    "nova-pro": (0.80, 3.20),
    "nova-premier": (2.50, 12.50),
    "llama3-1-8b-instruct": (0.22, 0.22),
    "llama3-1-70b-instruct": (0.72, 0.72),
    "llama3-2-3b-instruct": (0.15, 0.15),
    "llama3-3-70b-instruct": (0.72, 0.72),
}

# Bedrock ids wrap the model name in an optional inference profile's geography and the
# provider: "us.anthropic.claude-haiku-4-5-20251001-v1:0", "us.amazon.nova-lite-v1:0",
# "meta.llama3-3-70b-instruct-v1:0".
_BEDROCK_PREFIX_RE = re.compile(r"^(?:[a-z]{2,6}\.)?(?:anthropic|amazon|meta)\.")
_VERSION_SUFFIX_RE = re.compile(r"(?:-\d{8})?(?:-v\d+(?::\d+)?)?$")


def model_family(model: str) -> str:
    """The price table's key for a model id: "claude-haiku-4-5" for the API's dated id and
    for Bedrock's regional one alike, "nova-lite" for "us.amazon.nova-lite-v1:0"."""
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
