"""Sentence-level segmentation of a turn (docs/design.md §1, the pre-filter's sentence rules).

A light rule, not a parser: split prose on `.?!` followed by whitespace and a capital (or a
digit, quote or bracket), except after known abbreviations and single initials; split on line
breaks too. Fenced code blocks and tool-call blocks are kept whole as segments of their own,
because the skip rules judge them as units.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Segment", "SegmentKind", "reassemble", "sentences_of", "split_segments"]


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
# capital, digit, quote, bracket or symbol); it never changes what the candidate spans. The
# pattern opens with one character class (the two cases told apart by a look-behind) so the
# regex engine skips to the next candidate character in C instead of trying every position.
_BOUNDARY = re.compile(
    r"[.?!…\n](?:(?<=\n)\n*"
    r"|(?<=[.?!…])[.?!…]*[\"')\]]*\s+(?:(?=[A-Z0-9\"'(\[¿¡]|[^\w\s])(?P<starts>))?)"
)
_STARTS = _BOUNDARY.groupindex["starts"]
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


def _ends_with_abbreviation(prefix: str) -> bool:
    words = prefix.rsplit(None, 1)
    if not words:
        return False
    token = words[-1].rstrip(_CLOSERS).lower()
    single_initial = len(token) == 1 and token.isalpha()
    return token in _ABBREVIATIONS or single_initial


def _sentence_ends(text: str) -> Iterator[int]:
    """Where each sentence of `text` but the last ends (with the whitespace after it)."""
    start = 0
    for match in _BOUNDARY.finditer(text):
        end = match.end()
        if match.start(_STARTS) < 0:
            if text[match.start()] != "\n":
                continue  # what follows cannot start a sentence
        elif text[match.start()] == "." and _ends_with_abbreviation(text[start:end]):
            continue
        yield end
        start = end


def _prose_spans(text: str) -> list[tuple[int, int]]:
    """The (start, end) of each sentence of `text`, without its surrounding whitespace."""
    spans: list[tuple[int, int]] = []
    start = 0
    for end in _sentence_ends(text):
        _append_stripped(spans, text, start, end)
        start = end
    _append_stripped(spans, text, start, len(text))
    return spans


def _append_stripped(spans: list[tuple[int, int]], text: str, start: int, end: int) -> None:
    piece = text[start:end]
    stripped = piece.strip()
    if stripped:
        begin = start + len(piece) - len(piece.lstrip())
        spans.append((begin, begin + len(stripped)))


def _split_prose(text: str, offset: int) -> list[Segment]:
    return [Segment(text[s:e], offset + s, offset + e) for s, e in _prose_spans(text)]


def _may_hold_block(text: str) -> bool:
    """Without a fence or a tag's "<", `_BLOCK` cannot match."""
    return "```" in text or "~~~" in text or "<" in text


def sentences_of(text: str) -> list[str] | None:
    """The sentences of a turn without code or tool blocks (the common case), as strings; None
    when the turn may hold a block (then `split_segments` is the way)."""
    if _may_hold_block(text):
        return None
    sentences = []
    start = 0
    for end in _sentence_ends(text):
        sentence = text[start:end].strip()
        if sentence:
            sentences.append(sentence)
        start = end
    last = text[start:].strip()
    if last:
        sentences.append(last)
    return sentences


def split_segments(text: str) -> list[Segment]:
    """Split a turn into sentences and atomic code / tool-call blocks, in order."""
    if not _may_hold_block(text):
        return _split_prose(text, 0)  # no block to keep whole
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
    joined = " ".join(texts)
    if "\n" not in joined:
        return joined  # the common case: no block, no line inside a sentence
    out = ""
    previous = ""
    for piece in texts:
        if out:
            out += "\n" if ("\n" in piece or "\n" in previous) else " "
        out += piece
        previous = piece
    return out
