"""Regex building shared by the pre-filter's rules and firewall."""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["by_first_char"]


def by_first_char(words: Iterable[str]) -> str:
    """An alternation grouped by first character ("a(?:kia|sia)|s(?:k-|sn)"): the regex engine
    then tries one group per position instead of every word, several times faster. Longer words
    come first within a group."""
    groups: dict[str, list[str]] = {}
    for word in sorted(words, key=len, reverse=True):
        groups.setdefault(word[0], []).append(re.escape(word[1:]))
    return "|".join(f"{re.escape(first)}(?:{'|'.join(rest)})" for first, rest in groups.items())
