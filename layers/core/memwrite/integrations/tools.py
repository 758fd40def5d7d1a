"""The memory tools every agent integration offers, framework-free: `remember`, `recall` and
`forget` for one user, over `memwrite.client`, each answering in words the model can act on.

Whose memories these are is fixed when the tools are made, never a tool argument (a model
could be talked into naming another user); a memory id given to `forget` is checked to be that
user's first. The MCP server (`memwrite.mcp_server`) says what `remember` did with the same
`remembered` summary.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from memwrite.client import (
    IngestAck,
    MemwriteClient,
    NotFound,
    SearchHit,
    Trace,
    TraceNotFinished,
)

__all__ = ["WAIT_SECS", "MemoryTools", "Remembered", "remembered", "tool_functions"]

WAIT_SECS = 20.0
MAX_RECALL = 50


class Remembered(BaseModel):
    """What one `remember` did, in words (`summary`) and in counts."""

    summary: str = Field(
        description="What happened, in words: stored, already known, kept as an episode (and "
        "why), or not remembered (and why)"
    )
    trace_id: str
    status: str = Field(description="complete, failed, or in_progress if still running")
    stored: int = Field(description="new memories")
    merged: int = Field(description="memories already known, heard again (corroborated)")
    memory_ids: list[str]
    episodes: int = Field(
        description="turns kept as episodes: the user's own words, found by recall now, "
        "distilled into memories once a model is available"
    )
    duplicates: int = Field(description="turns sent before word for word: nothing new")


def _reason(reason: dict[str, Any]) -> str:
    """A span's typed reason in words: its type and its values."""
    values = ", ".join(f"{k}={v}" for k, v in reason.items() if k != "type")
    return f"{reason.get('type', 'unknown')}" + (f" ({values})" if values else "")


def _deferred(reason: dict[str, Any]) -> str:
    kind = reason.get("type", "")
    if kind == "DeferredNoLLM":
        return "no model is configured to distil it; the rules could not read it whole"
    if kind == "DeferredModelFailed":
        return f"the model failed ({reason.get('error', 'error')})"
    return _reason(reason)


def remembered(ack: IngestAck, trace: Trace) -> Remembered:
    """What a `remember` request's trace did, said so that the model can tell the user."""
    episodes = [
        s for s in trace.spans if s.reason and str(s.reason.get("type")).startswith("Deferred")
    ]
    dropped = [
        _reason(s.reason)
        for s in trace.spans
        if s.result == "reject"
        and s.reason
        and s not in episodes
        and s.reason.get("type") != "DuplicateTurn"
    ]
    outcome, parts = trace.outcome, []
    if outcome.stored:
        parts.append(f"stored {outcome.stored} new memor{'y' if outcome.stored == 1 else 'ies'}")
    if outcome.merged:
        parts.append(f"already known: merged into {outcome.merged} existing memories (heard again)")
    if ack.duplicates:
        parts.append(f"already known: {len(ack.duplicates)} turn(s) sent before word for word")
    for span in episodes:
        assert span.reason is not None
        parts.append(
            f"kept as an episode because {_deferred(span.reason)}: the user's words are "
            "searchable with recall now and become memories once a model is available"
        )
    parts.extend(f"not remembered: {why}" for why in dropped)
    if trace.status == "in_progress":
        parts.append("still in progress: recall may find more shortly")
    return Remembered(
        summary="; ".join(parts) or "nothing was remembered",
        trace_id=ack.trace_id,
        status=trace.status,
        stored=outcome.stored,
        merged=outcome.merged,
        memory_ids=outcome.memory_ids,
        episodes=len(episodes),
        duplicates=len(ack.duplicates),
    )


def recalled_line(hit: SearchHit) -> str:
    """One recall hit for the model: a memory with its id, or an episode marked as one."""
    if hit.kind == "episode":
        return f"- (episode: the user's own words, not distilled yet) {hit.text}"
    return f"- [{hit.memory_id}] {hit.text} ({hit.type}, confidence {hit.confidence or 0:.2f})"


@dataclass
class MemoryTools:
    """`remember`, `recall` and `forget` of one user on a memwrite API, answering in words."""

    client: MemwriteClient
    user_id: str
    session_id: str = field(default_factory=lambda: f"agent-{uuid.uuid4().hex[:12]}")

    def remember(self, statement: str) -> str:
        """Store what the user said (their words) and say what happened."""
        if not statement.strip():
            raise ValueError("give a statement: the user's words")
        turns = [{"role": "user", "content": statement}]
        ack = self.client.add(user_id=self.user_id, session_id=self.session_id, turns=turns)
        try:
            trace = self.client.wait(ack.trace_id, timeout=WAIT_SECS)
        except TraceNotFinished as late:
            trace = late.trace
        return remembered(ack, trace).summary

    def recall(self, query: str, k: int = 5) -> str:
        """What the user said before that best answers `query`, best first, one per line."""
        hits = self.client.search(user_id=self.user_id, query=query, k=max(1, min(k, MAX_RECALL)))
        if not hits:
            return "nothing remembered about that"
        return "\n".join(recalled_line(hit) for hit in hits)

    def forget(self, memory_id: str) -> str:
        """Delete one memory of the user; an older one it had superseded is current again."""
        try:
            memory = self.client.get_memory(memory_id)
        except NotFound:
            memory = None
        if memory is None or memory.user_id != self.user_id:
            raise ValueError(f"no memory {memory_id} (recall gives the ids of the memories)")
        record = self.client.delete_memory(memory_id)
        restored = f"; {len(record.restored)} older memory current again" if record.restored else ""
        return f"forgot {record.memory_id}{restored}"


def tool_functions(memory: MemoryTools) -> list[Callable[..., str]]:
    """`remember`, `recall` and `forget` as plain functions whose names, type hints and
    docstrings (Google style) every framework reads into the tool's schema: the one source of
    the tools' descriptions."""

    def remember(statement: str) -> str:
        """Store something the user said that will matter later (a fact about them, a
        preference, an instruction, a decision) and say what happened to it.

        Args:
            statement: What the user said, in their words (e.g. "I moved to Lisbon").
        """
        return memory.remember(statement)

    def recall(query: str, k: int = 5) -> str:
        """What the user said before that best answers the query: memories with their ids,
        and episodes (their own words, not distilled yet). Use it before answering anything
        that may depend on what they said.

        Args:
            query: A question or keywords about the user.
            k: How many results at most (1 to 50).
        """
        return memory.recall(query, k)

    def forget(memory_id: str) -> str:
        """Forget one memory of the user, by its id from recall; an older memory it had
        superseded is current again.

        Args:
            memory_id: The memory's id, as recall gives it (in brackets).
        """
        return memory.forget(memory_id)

    return [remember, recall, forget]
