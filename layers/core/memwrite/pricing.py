"""Model prices: USD per million tokens from the configured table, by model family."""

from __future__ import annotations

import re
from collections.abc import Mapping

from memwrite.errors import ConfigError

__all__ = ["cost_usd", "model_family", "price_per_mtok"]

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
    model: str, input_tokens: int, output_tokens: int, prices: Mapping[str, tuple[float, float]]
) -> float:
    input_price, output_price = price_per_mtok(model, prices)
    return (input_tokens * input_price + output_tokens * output_price) / 1_000_000
