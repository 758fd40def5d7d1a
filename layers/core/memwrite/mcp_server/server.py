"""The MCP server: four tools over the memwrite API, for one user of one tenant.

Who the memories belong to is never a tool argument (a model could be talked into naming
another user): the user and the API key come from the server's settings (flags or
`MEMWRITE_URL`, `MEMWRITE_API_KEY`, `MEMWRITE_USER`) or, over streamable HTTP, from the
connection's `x-api-key` and `x-memwrite-user` headers. A memory id given to `forget` or `why`
is checked to be that user's before anything is done with it.
"""

from __future__ import annotations

import argparse
import os
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel, Field

from memwrite.client import AsyncMemwriteClient, NotFound, TraceNotFinished

__all__ = ["McpSettings", "build_server", "main"]

API_KEY_HEADER = "x-api-key"
USER_HEADER = "x-memwrite-user"
WAIT_SECS = 20.0
INSTRUCTIONS = """\
Long-term memory of the user you are talking with. `remember` what they tell you that will
matter later (facts about them, preferences, instructions, decisions); `recall` before
answering anything that may depend on what they said before; `why` shows where a memory came
from; `forget` removes a memory (or, asked explicitly, everything about the user)."""


@dataclass(frozen=True)
class McpSettings:
    """Where the API is and whose memories these are (one user of one tenant)."""

    url: str = "http://127.0.0.1:8080"
    api_key: str | None = None
    user_id: str | None = None
    session_id: str = field(default_factory=lambda: f"mcp-{uuid.uuid4().hex[:12]}")

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> McpSettings:
        values = os.environ if env is None else env
        return cls(
            url=values.get("MEMWRITE_URL", cls.url),
            api_key=values.get("MEMWRITE_API_KEY"),
            user_id=values.get("MEMWRITE_USER"),
        )


class TurnIn(BaseModel):
    role: Literal["user", "assistant"]
    content: str = Field(min_length=1)


class Remembered(BaseModel):
    trace_id: str
    status: str = Field(description="complete, failed, or in_progress if still running")
    stored: int
    merged: int
    memory_ids: list[str]


class Recalled(BaseModel):
    memory_id: str
    text: str
    type: str
    confidence: float
    score: float
    observed_at: str


class Forgotten(BaseModel):
    removed: list[str] = Field(description="memory ids removed")
    restored: list[str] = Field(default_factory=list, description="older memories active again")
    erased_user: bool = False


class TraceSummary(BaseModel):
    trace_id: str
    created_at: str
    session_id: str
    status: str
    outcome: list[str] = Field(description="what this trace did to the memory: stored, merged")
    stages: list[str] = Field(description="stage: result (reason), in order")


def _whose(ctx: Context | None, settings: McpSettings) -> tuple[str | None, str]:
    """The API key and user of this call: the connection's headers (HTTP), else settings."""
    headers: dict[str, str] = {}
    if ctx is not None:
        try:
            # Over streamable HTTP the request is the Starlette request; on stdio (and
            # in-process) there is none.
            http_request = ctx.request_context.request
        except ValueError:  # outside a request
            http_request = None
        raw = getattr(http_request, "headers", None) or {}
        headers = {str(k).lower(): str(v) for k, v in raw.items()}
    api_key = headers.get(API_KEY_HEADER) or settings.api_key
    user_id = headers.get(USER_HEADER) or settings.user_id
    if not user_id:
        raise ValueError(
            "no user configured: set MEMWRITE_USER (or --user), or the x-memwrite-user header"
        )
    return api_key, user_id


async def _own_memory(mw: AsyncMemwriteClient, memory_id: str, user_id: str) -> None:
    """Refuse a memory of another user exactly as an unknown one."""
    try:
        memory = await mw.get_memory(memory_id)
    except NotFound:
        raise ValueError(f"no memory {memory_id}") from None
    if memory.user_id != user_id:
        raise ValueError(f"no memory {memory_id}")


def build_server(settings: McpSettings) -> MCPServer:
    server = MCPServer("memwrite", instructions=INSTRUCTIONS)

    def client(api_key: str | None) -> AsyncMemwriteClient:
        return AsyncMemwriteClient(settings.url, api_key=api_key)

    @server.tool()
    async def remember(
        statement: str | None = None,
        turns: list[TurnIn] | None = None,
        ctx: Context | None = None,
    ) -> Remembered:
        """Store what the user said: one `statement` in their words, or conversation `turns`
        (role user or assistant). Waits for the pipeline (up to 20 s) and reports what was
        stored or merged into existing memories."""
        api_key, user_id = _whose(ctx, settings)
        sent = [t.model_dump() for t in turns or []]
        if statement:
            sent.append({"role": "user", "content": statement})
        if not sent:
            raise ValueError("give a statement or some turns")
        async with client(api_key) as mw:
            ack = await mw.add(user_id=user_id, session_id=settings.session_id, turns=sent)
            try:
                trace = await mw.wait(ack.trace_id, timeout=WAIT_SECS)
            except TraceNotFinished as late:
                trace = late.trace
        return Remembered(
            trace_id=ack.trace_id,
            status=trace.status,
            stored=trace.outcome.stored,
            merged=trace.outcome.merged,
            memory_ids=trace.outcome.memory_ids,
        )

    @server.tool()
    async def recall(query: str, k: int = 5, ctx: Context | None = None) -> list[Recalled]:
        """The user's memories that best answer `query` (a question or keywords), best
        first."""
        api_key, user_id = _whose(ctx, settings)
        async with client(api_key) as mw:
            # Memories only: the other tools (why, forget) take a memory's id; episodes (kept
            # turns not distilled yet) are the HTTP API's (`kinds`).
            hits = await mw.search(
                user_id=user_id, query=query, k=max(1, min(k, 50)), kinds=["memory"]
            )
        return [
            Recalled(
                memory_id=hit.memory_id or "",
                text=hit.text,
                type=hit.type or "",
                confidence=hit.confidence or 0.0,
                score=hit.score,
                observed_at=hit.observed_at.isoformat(),
            )
            for hit in hits
        ]

    @server.tool()
    async def forget(
        memory_id: str | None = None, everything: bool = False, ctx: Context | None = None
    ) -> Forgotten:
        """Forget one memory (`memory_id`: the request that stored it is rolled back, so what
        that same request stored goes too, and what it had superseded comes back), or, with
        `everything=true` and only when the user asks for it, every memory of the user."""
        api_key, user_id = _whose(ctx, settings)
        async with client(api_key) as mw:
            if everything:
                erased = await mw.erase_user(user_id)
                return Forgotten(removed=[], erased_user=erased.erased)
            if not memory_id:
                raise ValueError("give a memory_id, or everything=true")
            await _own_memory(mw, memory_id, user_id)
            why = await mw.memory_traces(memory_id)
            storing = [t.trace_id for t in why.traces if "stored" in t.memory_outcomes]
            removed: list[str] = []
            restored: list[str] = []
            for trace_id in storing[:1]:
                record = await mw.rollback(trace_id)
                removed, restored = record.removed, record.restored
        return Forgotten(removed=removed, restored=restored)

    @server.tool()
    async def why(memory_id: str, ctx: Context | None = None) -> list[TraceSummary]:
        """Where a memory came from: each request (trace) that stored or merged into it,
        oldest first, with what each pipeline stage decided."""
        api_key, user_id = _whose(ctx, settings)
        async with client(api_key) as mw:
            await _own_memory(mw, memory_id, user_id)
            found = await mw.memory_traces(memory_id)
        return [
            TraceSummary(
                trace_id=trace.trace_id,
                created_at=trace.created_at,
                session_id=trace.session_id,
                status=trace.status,
                outcome=trace.memory_outcomes,
                stages=[
                    f"{span.stage}: {span.result}"
                    + (f" ({span.reason.get('type', '')})" if span.reason else "")
                    for span in trace.spans
                ],
            )
            for trace in found.traces
        ]

    return server


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memwrite mcp", description=__doc__)
    add_mcp_arguments(parser)
    return parser


def add_mcp_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = McpSettings.from_env()
    parser.add_argument("--url", default=defaults.url, help="the memwrite API (MEMWRITE_URL)")
    parser.add_argument("--user", default=defaults.user_id, help="whose memories (MEMWRITE_USER)")
    parser.add_argument(
        "--http", action="store_true", help="streamable HTTP on --host:--port/mcp (not stdio)"
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)


def run(args: argparse.Namespace) -> int:
    """The API key is never a flag (it would show in `ps`): MEMWRITE_API_KEY, or per HTTP
    connection its x-api-key header."""
    api_key = os.environ.get("MEMWRITE_API_KEY")
    settings = McpSettings(url=args.url, api_key=api_key, user_id=args.user)
    server = build_server(settings)
    if args.http:
        server.run("streamable-http", host=args.host, port=args.port)
    else:
        server.run("stdio")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run(_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
