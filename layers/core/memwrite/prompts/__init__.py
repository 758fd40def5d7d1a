"""Prompts: one module per prompt, each with its response model and a `VERSION`.

Inputs reach every prompt through `to_prompt_json`, so the wire format of context (entities,
memories, turns) is the same everywhere and a change to it shows up in every snapshot.
"""

from __future__ import annotations

import json
from typing import Literal, NamedTuple, TypedDict

from pydantic_core import to_jsonable_python

__all__ = ["PromptMessage", "RenderedPrompt", "SystemPrompt", "to_prompt_json"]


class PromptMessage(TypedDict):
    """One chat message as the Messages API takes it (text content only)."""

    role: Literal["user", "assistant"]
    content: str


class SystemPrompt(str):
    """A system prompt in parts: the `prefix` every tenant shares (role, rules, schema notes,
    examples), which the model client marks for prompt caching, then this request's `task`
    (what its inputs are) and the `tenant`'s steering, each a block of its own after the cache
    breakpoint, so neither splits the shared cache.

    It is the string its parts make (joined by blank lines), so whatever hashes, records or
    shows the prompt treats it as the text the model reads."""

    prefix: str
    task: str
    tenant: str

    def __new__(cls, prefix: str, task: str = "", tenant: str = "") -> SystemPrompt:
        prompt = super().__new__(cls, "\n\n".join(part for part in (prefix, task, tenant) if part))
        prompt.prefix, prompt.task, prompt.tenant = prefix, task, tenant
        return prompt

    def __getnewargs__(self) -> tuple[str, str, str]:  # type: ignore[override]
        # Copied or pickled, it keeps its parts.
        return self.prefix, self.task, self.tenant


class RenderedPrompt(NamedTuple):
    system: str
    messages: list[PromptMessage]


def to_prompt_json(value: object) -> str:
    """One value as compact JSON on one line; unset fields are left out to save tokens."""
    return json.dumps(
        to_jsonable_python(value, exclude_none=True), ensure_ascii=False, separators=(", ", ": ")
    )
