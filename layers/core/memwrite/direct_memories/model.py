"""The direct memory as the API takes it (`memwrite.extract.direct_candidate` makes it a
candidate)."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationInfo, field_validator

from memwrite.claims.candidate import USER_ENTITY, MemoryType

__all__ = [
    "DIRECT_SESSION",
    "MAX_DIRECT_MEMORIES",
    "DirectMemoriesRequest",
    "DirectMemory",
    "DirectWriteAccepted",
]

MAX_DIRECT_MEMORIES = 100
MAX_ATTRIBUTE_CHARS = 64
MAX_VALUE_CHARS = 500
MAX_TEXT_CHARS = 1000
# The session of direct writes: "#" is no caller's session id (`Identifier`), so a direct
# batch never shares a queue batch (one per session) with inferred turns.
DIRECT_SESSION = "#direct"
_ATTRIBUTE_RE = re.compile(r"^[a-z][a-z0-9_]*$")
_SEPARATORS_RE = re.compile(r"[\s\-]+")


def _utc(value: datetime | None) -> datetime | None:
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


class DirectMemory(BaseModel):
    """One memory written as is: its triple, and optionally its sentence, time, pin, expiry."""

    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)

    type: MemoryType = Field(description="The memory type; it drives the lifecycle.")
    attribute: str = Field(
        min_length=1,
        max_length=MAX_ATTRIBUTE_CHARS,
        description="The predicate, snake_case (`lives_in`, `occupation`); spaces and hyphens "
        "become underscores.",
    )
    value: str = Field(min_length=1, max_length=MAX_VALUE_CHARS, description="Its value.")
    entity: str = Field(
        default=USER_ENTITY,
        min_length=1,
        max_length=128,
        description="Who or what it is about; `user` (default) is the user.",
    )
    text: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_TEXT_CHARS,
        description="The memory as a sentence; it must contain the value (and the entity, "
        "unless `user`). Default: built from the triple.",
    )
    observed_at: datetime | None = Field(
        default=None, description="When it became true (naive: UTC). Default: now."
    )
    pinned: StrictBool = Field(default=False, description="Store it pinned (see PATCH).")
    expires_at: datetime | None = Field(
        default=None, description="After it, out of search and the memory list (naive: UTC)."
    )

    @field_validator("attribute")
    @classmethod
    def _snake_case(cls, attribute: str) -> str:
        snake = _SEPARATORS_RE.sub("_", attribute.lower())
        if not _ATTRIBUTE_RE.match(snake):
            raise ValueError("must be a snake_case predicate (letters, digits, underscores)")
        return snake

    @field_validator("text")
    @classmethod
    def _holds_the_triple(cls, text: str | None, info: ValidationInfo) -> str | None:
        if text is None:
            return None
        said = " ".join(text.lower().split())
        value = info.data.get("value")
        if value is not None and " ".join(value.lower().split()) not in said:
            raise ValueError("must contain the value")
        entity = info.data.get("entity") or USER_ENTITY
        if entity.lower() != USER_ENTITY and " ".join(entity.lower().split()) not in said:
            raise ValueError("must contain the entity")
        return text

    @field_validator("observed_at", "expires_at")
    @classmethod
    def _as_utc(cls, value: datetime | None) -> datetime | None:
        return _utc(value)

    @property
    def sentence(self) -> str:
        """The memory's text: as given, else built from the triple ("The user lives in X.")."""
        if self.text is not None:
            return self.text
        subject = "The user" if self.entity.lower() == USER_ENTITY else self.entity
        return f"{subject} {self.attribute.replace('_', ' ')} {self.value}."


class DirectMemoriesRequest(BaseModel):
    """Body of `POST /v1/users/{user_id}/memories`."""

    model_config = ConfigDict(extra="forbid")

    memories: list[DirectMemory] = Field(min_length=1, max_length=MAX_DIRECT_MEMORIES)


class DirectWriteAccepted(BaseModel):
    """202 of `POST /v1/users/{user_id}/memories`: the trace to follow."""

    trace_id: str
