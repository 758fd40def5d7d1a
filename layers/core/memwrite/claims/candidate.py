"""The extraction candidate: one typed, scored claim about a user, before resolution and dedupe.

Both extractors (the rule fast-path and the LLM) produce this schema, so its validation is the
contract every later stage relies on: a candidate whose triple disagrees with its own text is
refused here rather than stored.
"""

from __future__ import annotations

import re
from datetime import datetime
from enum import StrEnum
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "MAX_SEARCH_QUESTIONS",
    "MAX_TEXT_CHARS",
    "MIN_SEARCH_QUESTIONS",
    "USER_ENTITY",
    "Candidate",
    "MemoryType",
    "Quality",
    "SourceSpan",
    "Tier",
    "memory_key",
]

USER_ENTITY = "user"
MAX_TEXT_CHARS = 500
MIN_SEARCH_QUESTIONS = 3
MAX_SEARCH_QUESTIONS = 5

_WHITESPACE_RE = re.compile(r"\s+")
_ATTRIBUTE_RE = re.compile(r"^[a-z][a-z0-9_]*$")
_ATTRIBUTE_SEPARATORS_RE = re.compile(r"[\s\-]+")


def _normalise(text: str) -> str:
    """Lowercase and collapse runs of whitespace, so comparisons ignore layout and case."""
    return _WHITESPACE_RE.sub(" ", text).strip().lower()


class MemoryType(StrEnum):
    """What kind of memory a candidate is; the type decides its lifecycle downstream."""

    FACT = "fact"
    PREFERENCE = "preference"
    INSTRUCTION = "instruction"
    EVENT = "event"
    DECISION = "decision"
    TASK = "task"


# Where a memory's confidence routes it (`memwrite.claims.scoring.tier_for`): what search shows
# and what is injected (a comment: a docstring would change the OpenAPI document).
class Tier(StrEnum):
    QUARANTINE = "quarantine"  # hidden
    CANDIDATE = "candidate"  # searchable, not injected
    WORKING = "working"
    FACT = "fact"
    CHALLENGED = "challenged"  # in conflict, any confidence


class Quality(BaseModel):
    """The extractor's own keep/discard verdict, with the reason in a few words."""

    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=True)

    verdict: Literal["keep", "discard"] = Field(
        description="keep if the memory is durable and useful later; discard otherwise."
    )
    reason: str = Field(
        min_length=1,
        description="A few words saying why, e.g. 'explicit statement' or 'hypothetical'.",
    )


class SourceSpan(BaseModel):
    """Character offsets, [start, end), of the evidence inside the turn text."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    start: int = Field(ge=0, description="Offset of the first character of the evidence.")
    end: int = Field(description="Offset just past the last character of the evidence.")

    @model_validator(mode="after")
    def _end_after_start(self) -> Self:
        if self.end <= self.start:
            raise ValueError(
                f"source_span end ({self.end}) must be greater than start ({self.start})"
            )
        return self


class Candidate(BaseModel):
    """One memory candidate: a self-contained sentence plus the triple it states."""

    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=True)

    text: str = Field(
        min_length=1,
        max_length=MAX_TEXT_CHARS,
        description=(
            "One or two self-contained sentences in the third person about 'the user' or the "
            "named entity, e.g. 'The user lives in Berlin.' It must contain the value."
        ),
    )
    type: MemoryType = Field(description="The memory type; it drives the lifecycle.")
    topic: str = Field(
        min_length=1,
        description="A short lowercase label such as location, work, food or family.",
    )
    entity: str = Field(
        min_length=1,
        description="'user' for the speaker, else the entity's name exactly as written.",
    )
    attribute: str = Field(
        min_length=1,
        description="The predicate in snake_case, e.g. lives_in, works_at, likes, sister.",
    )
    value: str = Field(min_length=1, description="The object of the claim, as written.")
    predicate_is_stateful: bool = Field(
        description=(
            "True when a newer value replaces the old one (lives_in, works_at, name, diet); "
            "False when values accumulate (likes, uses, allergic_to)."
        )
    )
    importance: float = Field(ge=0.0, le=1.0, description="0 = trivia, 1 = must remember.")
    confidence: float = Field(
        ge=0.0,
        le=1.0,
        description="0 = guess, 1 = stated plainly. Hypotheticals and sarcasm get <= 0.3.",
    )
    grounded: bool = Field(description="True when this turn itself holds direct evidence.")
    quality: Quality
    valid_at: datetime | None = Field(
        default=None, description="When an event happened; only events may set it."
    )
    search_questions: list[str] = Field(
        description="3 to 5 questions a user would ask to retrieve this memory."
    )
    source_turn_id: str | None = None
    source_span: SourceSpan | None = None
    negated: bool = Field(
        default=False,
        description="True when the claim is a retraction, e.g. 'I don't live in Berlin anymore'.",
    )
    correction: bool = Field(
        default=False,
        description=(
            "True only when the user explicitly says an earlier statement was wrong or is no "
            "longer true and gives this value instead ('Correction: ...', 'I misspoke, ...', "
            "'I meant ...'); False for news of a change ('we moved to Denver') and a plain "
            "statement."
        ),
    )

    @field_validator("topic")
    @classmethod
    def _lowercase_topic(cls, topic: str) -> str:
        # LLMs capitalise labels at random; one spelling keeps topic filters exact.
        return _normalise(topic)

    @field_validator("attribute")
    @classmethod
    def _snake_case_attribute(cls, attribute: str) -> str:
        snake = _ATTRIBUTE_SEPARATORS_RE.sub("_", attribute.strip().lower())
        if not _ATTRIBUTE_RE.match(snake):
            raise ValueError(f"attribute {attribute!r} is not a snake_case predicate")
        return snake

    @field_validator("search_questions")
    @classmethod
    def _three_to_five_questions(cls, questions: list[str]) -> list[str]:
        cleaned = [q.strip() for q in questions]
        if not MIN_SEARCH_QUESTIONS <= len(cleaned) <= MAX_SEARCH_QUESTIONS:
            raise ValueError(
                f"search_questions needs {MIN_SEARCH_QUESTIONS} to {MAX_SEARCH_QUESTIONS} "
                f"questions, got {len(cleaned)}"
            )
        if any(not q for q in cleaned):
            raise ValueError("search_questions must not contain empty questions")
        return cleaned

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        text = _normalise(self.text)
        if _normalise(self.value) not in text:
            raise ValueError(f"value {self.value!r} does not appear in text {self.text!r}")
        if self.entity.lower() != USER_ENTITY and _normalise(self.entity) not in text:
            raise ValueError(f"entity {self.entity!r} does not appear in text {self.text!r}")
        if self.valid_at is not None and self.type is not MemoryType.EVENT:
            raise ValueError(f"valid_at is only allowed on events, not on a {self.type.value}")
        return self


def memory_key(c: Candidate) -> str:
    """The normalised 'type|entity|attribute|value' key that dedupe hashes."""
    return "|".join(_normalise(part) for part in (c.type.value, c.entity, c.attribute, c.value))
