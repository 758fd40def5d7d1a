"""Sentence-level segmentation of a turn (DESIGN.md section 2, pre-filter).

A light rule, not a parser: split prose on `.?!` followed by whitespace and a capital (or a
digit, quote or bracket), except after known abbreviations and single initials; split on line
breaks too. Fenced code blocks and tool-call blocks are kept whole as segments of their own,
because the skip rules judge them as units.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Segment", "SegmentKind", "reassemble", "split_segments"]


class SegmentKind(StrEnum):
    PROSE = "prose"
    CODE = "code"
    TOOL_CALL = "tool_call"


@dataclass(frozen=True, slots=True)
class Segment:
    """A sentence or an atomic block, with its character offsets in the turn."""

    text: str
    start: int
    end: int
    kind: SegmentKind = SegmentKind.PROSE


_BLOCK = re.compile(
    r"(?P<code>(?P<fence>```|~~~)[^\n]*\n.*?(?P=fence))"
    r"|(?P<tool><(?P<tag>tool_call|tool_use|tool_result|function_call|function_calls"
    r"|function_results)\b[^>]*>.*?</(?P=tag)>)",
    re.DOTALL | re.IGNORECASE,
)
# A boundary candidate: terminal punctuation (with closing quotes/brackets) then whitespace,
# or line breaks. The empty group `starts` is set when what follows may start a sentence (a
# capital, digit, quote, bracket or symbol); it never changes what the candidate spans.
_BOUNDARY = re.compile(r"[.?!…]+[\"')\]]*\s+(?:(?=[A-Z0-9\"'(\[¿¡]|[^\w\s])(?P<starts>))?|\n+")
_ABBREVIATIONS = frozenset(
    [
        "mr",
        "mrs",
        "ms",
        "dr",
        "prof",
        "sr",
        "jr",
        "st",
        "vs",
        "etc",
        "e.g",
        "i.e",
        "inc",
        "ltd",
        "co",
        "corp",
        "no",
        "approx",
        "dept",
        "est",
        "fig",
        "jan",
        "feb",
        "mar",
        "apr",
        "jun",
        "jul",
        "aug",
        "sep",
        "sept",
        "oct",
        "nov",
        "dec",
        "mt",
        "ft",
        "a.m",
        "p.m",
        "u.s",
        "u.k",
    ]
)
_CLOSERS = ".?!…\"')]"
_BLOCK_MARKERS = ("```", "~~~", "<")


def _ends_with_abbreviation(prefix: str) -> bool:
    words = prefix.rsplit(None, 1)
    if not words:
        return False
    token = words[-1].rstrip(_CLOSERS).lower()
    single_initial = len(token) == 1 and token.isalpha()
    return token in _ABBREVIATIONS or single_initial


def _split_prose(text: str, offset: int) -> list[Segment]:
    segments: list[Segment] = []
    start = 0
    for match in _BOUNDARY.finditer(text):
        end = match.end()
        first = text[match.start()]
        if first != "\n":
            if match.start("starts") < 0:
                continue
            if first == "." and _ends_with_abbreviation(text[start:end]):
                continue
        _append_stripped(segments, text, start, end, offset)
        start = end
    _append_stripped(segments, text, start, len(text), offset)
    return segments


def _append_stripped(segments: list[Segment], text: str, start: int, end: int, offset: int) -> None:
    piece = text[start:end]
    stripped = piece.strip()
    if stripped:
        lead = len(piece) - len(piece.lstrip())
        begin = offset + start + lead
        segments.append(Segment(stripped, begin, begin + len(stripped)))


def split_segments(text: str) -> list[Segment]:
    """Split a turn into sentences and atomic code / tool-call blocks, in order."""
    if not any(marker in text for marker in _BLOCK_MARKERS):
        return _split_prose(text, 0)  # the common case: no block to keep whole
    segments: list[Segment] = []
    cursor = 0
    for block in _BLOCK.finditer(text):
        segments.extend(_split_prose(text[cursor : block.start()], cursor))
        kind = SegmentKind.CODE if block.group("code") else SegmentKind.TOOL_CALL
        segments.append(Segment(block.group(), block.start(), block.end(), kind))
        cursor = block.end()
    segments.extend(_split_prose(text[cursor:], cursor))
    return segments


def reassemble(texts: list[str]) -> str:
    """Join kept segments: a space between sentences, a line break around blocks."""
    out = ""
    previous = ""
    for piece in texts:
        if out:
            out += "\n" if ("\n" in piece or "\n" in previous) else " "
        out += piece
        previous = piece
    return out
