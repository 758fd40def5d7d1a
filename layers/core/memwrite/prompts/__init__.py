"""Prompts: one module per prompt, each with its response model and a `VERSION`.

Inputs reach every prompt through `to_prompt_json`, so the wire format of context (entities,
memories, turns) is the same everywhere and a change to it shows up in every snapshot.
"""

from __future__ import annotations

import json
from typing import Literal, NamedTuple, TypedDict

from pydantic_core import to_jsonable_python

__all__ = ["PromptMessage", "RenderedPrompt", "to_prompt_json"]


class PromptMessage(TypedDict):
    """One chat message as the Messages API takes it (text content only)."""

    role: Literal["user", "assistant"]
    content: str


class RenderedPrompt(NamedTuple):
    system: str
    messages: list[PromptMessage]


def to_prompt_json(value: object) -> str:
    """One value as compact JSON on one line; unset fields are left out to save tokens."""
    return json.dumps(
        to_jsonable_python(value, exclude_none=True), ensure_ascii=False, separators=(", ", ": ")
    )
