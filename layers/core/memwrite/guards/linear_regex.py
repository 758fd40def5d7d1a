"""Tenant-supplied regular expressions run on RE2 (google-re2, the official binding): matching
takes time linear in the text whatever the pattern, so no pattern a tenant stores can stall
ingest (Python's `re` backtracks: `(a+)+$` doubles its time with each character). RE2 has no
backreferences or lookaround; a pattern that needs them is refused when the settings are
stored (docs/design.md §1)."""

from __future__ import annotations

from collections.abc import Callable

import re2

__all__ = ["SentencePattern", "compile_linear"]


# A compiled pattern as the pre-filter uses it: its `fullmatch` (a match, or None).
SentencePattern = Callable[[str], object | None]


def _options() -> re2.Options:
    options = re2.Options()
    options.case_sensitive = False  # a sentence matches in any case
    options.log_errors = False  # a refused pattern is the caller's ValueError, not a log line
    return options


def compile_linear(pattern: str) -> SentencePattern:
    """`pattern` compiled on RE2, case-insensitive, as its `fullmatch`; `ValueError` when RE2
    refuses it."""
    try:
        compiled = re2.compile(pattern, _options())
    except re2.error as exc:
        detail = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
        raise ValueError(f"not a pattern the linear-time engine (RE2) takes: {detail}") from exc
    fullmatch: SentencePattern = compiled.fullmatch
    return fullmatch
