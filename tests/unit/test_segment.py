"""Sentence segmentation: split on . ? ! + capital, keep abbreviations and blocks whole."""

from __future__ import annotations

from memwrite.segment import SegmentKind, reassemble, split_segments


def texts(value: str) -> list[str]:
    return [segment.text for segment in split_segments(value)]


def test_splits_on_terminal_punctuation_before_a_capital() -> None:
    assert texts("Hey Mel! Good to see you! How have you been?") == [
        "Hey Mel!",
        "Good to see you!",
        "How have you been?",
    ]


def test_does_not_split_before_lowercase() -> None:
    assert texts("thanks! i moved to berlin") == ["thanks! i moved to berlin"]


def test_abbreviations_and_initials_do_not_end_sentences() -> None:
    assert texts("I met Dr. Patel and J. K. Rowling at 3 p.m. Today was great.") == [
        "I met Dr. Patel and J. K. Rowling at 3 p.m. Today was great."
    ]
    assert texts("We use tools e.g. Jira. It works.") == ["We use tools e.g. Jira.", "It works."]


def test_line_breaks_separate_segments() -> None:
    assert texts("first line\nsecond line") == ["first line", "second line"]


def test_code_and_tool_blocks_are_atomic() -> None:
    value = "Look at this. ```py\nx = 1. Y = 2\n``` And <tool_call>A. B.</tool_call> done."
    segments = split_segments(value)
    kinds = [segment.kind for segment in segments]
    assert kinds == [
        SegmentKind.PROSE,
        SegmentKind.CODE,
        SegmentKind.PROSE,
        SegmentKind.TOOL_CALL,
        SegmentKind.PROSE,
    ]
    assert segments[1].text == "```py\nx = 1. Y = 2\n```"


def test_offsets_point_into_the_original_text() -> None:
    value = "  Hello there.  I live in Lisbon.  "
    for segment in split_segments(value):
        assert value[segment.start : segment.end] == segment.text


def test_reassemble_joins_sentences_with_spaces_and_blocks_with_newlines() -> None:
    assert reassemble(["A b.", "C d."]) == "A b. C d."
    assert reassemble(["A b.", "```\ncode\n```", "C d."]) == "A b.\n```\ncode\n```\nC d."
