"""The candidate schema refuses inconsistent candidates and keys them stably."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from memwrite.claims.candidate import Candidate, MemoryType, SourceSpan, memory_key


def _fields(**overrides: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "text": "The user lives in Berlin.",
        "type": MemoryType.FACT,
        "topic": "location",
        "entity": "user",
        "attribute": "lives_in",
        "value": "Berlin",
        "predicate_is_stateful": True,
        "importance": 0.8,
        "confidence": 0.9,
        "grounded": True,
        "quality": {"verdict": "keep", "reason": "explicit statement"},
        "search_questions": [
            "Where does the user live?",
            "Which city is the user based in?",
            "Has the user moved recently?",
        ],
    }
    fields.update(overrides)
    return fields


def test_a_consistent_candidate_is_accepted() -> None:
    # Given the fields of a plain, consistent fact
    fields = _fields(source_turn_id="t1", source_span={"start": 0, "end": 16})
    # When it is validated
    candidate = Candidate.model_validate(fields)
    # Then every field survives, with the defaults for what was not given
    assert candidate.value == "Berlin"
    assert candidate.source_span == SourceSpan(start=0, end=16)
    assert candidate.negated is False
    assert candidate.valid_at is None


@pytest.mark.parametrize("field", ["confidence", "importance"])
@pytest.mark.parametrize("score", [-0.01, 1.01])
def test_scores_outside_zero_to_one_are_refused(field: str, score: float) -> None:
    # Given a score just outside [0, 1]
    fields = _fields(**{field: score})
    # When it is validated
    with pytest.raises(ValidationError) as error:
        Candidate.model_validate(fields)
    # Then the error names the field
    assert field in str(error.value)


def test_a_value_missing_from_the_text_is_refused() -> None:
    # Given a triple whose value the sentence never states
    fields = _fields(value="Munich")
    # When it is validated
    with pytest.raises(ValidationError) as error:
        Candidate.model_validate(fields)
    # Then the message says the value is not in the text
    assert "value 'Munich' does not appear in text" in str(error.value)


def test_the_value_is_matched_ignoring_case_and_whitespace() -> None:
    # Given a value that differs from the text only in case and spacing
    fields = _fields(text="The user lives in  New York   City.", value="new york\ncity")
    # When it is validated
    candidate = Candidate.model_validate(fields)
    # Then it is accepted as stated by the text
    assert candidate.value == "new york\ncity"


def test_a_named_entity_missing_from_the_text_is_refused() -> None:
    # Given a claim about Priya whose text never names her
    fields = _fields(entity="Priya", text="She lives in Berlin.")
    # When it is validated
    with pytest.raises(ValidationError) as error:
        Candidate.model_validate(fields)
    # Then the message names the missing entity
    assert "entity 'Priya' does not appear in text" in str(error.value)


def test_a_named_entity_in_the_text_is_accepted() -> None:
    # Given a claim about Priya that names her
    fields = _fields(entity="Priya", text="Priya lives in Berlin.")
    # When it is validated
    candidate = Candidate.model_validate(fields)
    # Then the entity is kept as written
    assert candidate.entity == "Priya"


def test_valid_at_on_a_non_event_is_refused() -> None:
    # Given a fact that carries an event timestamp
    fields = _fields(valid_at=datetime(2025, 5, 15, tzinfo=UTC))
    # When it is validated
    with pytest.raises(ValidationError) as error:
        Candidate.model_validate(fields)
    # Then the message says only events may have one
    assert "valid_at is only allowed on events" in str(error.value)


def test_valid_at_on_an_event_is_accepted() -> None:
    # Given an event with the time it happened
    when = datetime(2025, 5, 15, 9, 0, tzinfo=UTC)
    fields = _fields(
        type=MemoryType.EVENT,
        text="The user moved to Berlin on 15 May 2025.",
        valid_at=when,
    )
    # When it is validated
    candidate = Candidate.model_validate(fields)
    # Then the timestamp is kept
    assert candidate.valid_at == when


@pytest.mark.parametrize("count", [0, 2, 6])
def test_search_questions_must_number_three_to_five(count: int) -> None:
    # Given too few or too many search questions
    fields = _fields(search_questions=[f"Question {i}?" for i in range(count)])
    # When it is validated
    with pytest.raises(ValidationError) as error:
        Candidate.model_validate(fields)
    # Then the message gives the allowed range and the count received
    assert f"needs 3 to 5 questions, got {count}" in str(error.value)


def test_an_empty_search_question_is_refused() -> None:
    # Given three questions, one of them blank
    fields = _fields(search_questions=["Where?", "  ", "When?"])
    # When it is validated
    with pytest.raises(ValidationError) as error:
        Candidate.model_validate(fields)
    # Then the blank question is the reason
    assert "must not contain empty questions" in str(error.value)


@pytest.mark.parametrize(("start", "end"), [(5, 5), (9, 3)])
def test_a_source_span_must_end_after_it_starts(start: int, end: int) -> None:
    # Given a span that is empty or reversed
    fields = _fields(source_span={"start": start, "end": end})
    # When it is validated
    with pytest.raises(ValidationError) as error:
        Candidate.model_validate(fields)
    # Then the message gives both offsets
    assert f"end ({end}) must be greater than start ({start})" in str(error.value)


def test_a_negative_span_start_is_refused() -> None:
    # Given a span that starts before the text does
    fields = _fields(source_span={"start": -1, "end": 4})
    # When it is validated
    with pytest.raises(ValidationError) as error:
        Candidate.model_validate(fields)
    # Then the start is the field at fault
    assert "source_span.start" in str(error.value)


@pytest.mark.parametrize("text", ["", "   ", "x" * 501])
def test_text_must_be_non_empty_and_at_most_500_characters(text: str) -> None:
    # Given an empty, blank or over-long sentence
    fields = _fields(text=text)
    # When it is validated
    # Then it is refused
    with pytest.raises(ValidationError):
        Candidate.model_validate(fields)


def test_unknown_fields_and_bad_verdicts_are_refused() -> None:
    # Given a candidate with an unknown field, and one with a verdict outside keep/discard
    extra = _fields(mood="happy")
    verdict = _fields(quality={"verdict": "maybe", "reason": "unsure"})
    # When they are validated
    # Then both are refused
    with pytest.raises(ValidationError):
        Candidate.model_validate(extra)
    with pytest.raises(ValidationError):
        Candidate.model_validate(verdict)


def test_topic_and_attribute_are_normalised() -> None:
    # Given labels written the way an LLM might write them
    fields = _fields(topic=" Location ", attribute="Lives In")
    # When they are validated
    candidate = Candidate.model_validate(fields)
    # Then they become a lowercase topic and a snake_case predicate
    assert candidate.topic == "location"
    assert candidate.attribute == "lives_in"


def test_an_attribute_that_is_not_a_predicate_is_refused() -> None:
    # Given an attribute with punctuation no predicate has
    fields = _fields(attribute="lives.in?")
    # When it is validated
    with pytest.raises(ValidationError) as error:
        Candidate.model_validate(fields)
    # Then the message says it is not snake_case
    assert "is not a snake_case predicate" in str(error.value)


def test_a_candidate_is_frozen() -> None:
    # Given a validated candidate
    candidate = Candidate.model_validate(_fields())
    # When a field is assigned
    # Then the assignment is refused
    with pytest.raises(ValidationError):
        candidate.value = "Munich"  # type: ignore[misc]


def test_memory_key_is_normalised() -> None:
    # Given two candidates that differ only in case and whitespace
    first = Candidate.model_validate(
        _fields(text="The user lives in New York City.", value="New York City")
    )
    second = Candidate.model_validate(
        _fields(text="The user lives in new  york city.", value=" new  york\tcity ", entity="User")
    )
    # When their keys are computed
    keys = {memory_key(first), memory_key(second)}
    # Then both collapse to one lowercase, single-spaced key
    assert keys == {"fact|user|lives_in|new york city"}


def test_memory_key_separates_type_entity_attribute_and_value() -> None:
    # Given the same value under another entity and attribute
    fields = _fields(
        text="Priya works at Berlin Labs.",
        entity="Priya",
        attribute="works_at",
        value="Berlin Labs",
    )
    # When its key is computed
    key = memory_key(Candidate.model_validate(fields))
    # Then every part of the triple appears in order
    assert key == "fact|priya|works_at|berlin labs"
