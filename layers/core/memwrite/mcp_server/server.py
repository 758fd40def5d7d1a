"""The MCP server: four tools over the memwrite API, for one user of one tenant.

Who the memories belong to is never a tool argument (a model could be talked into naming
another user): the user and the API key come from the server's settings (flags or
`MEMWRITE_URL`, `MEMWRITE_API_KEY`, `MEMWRITE_USER`) or, over streamable HTTP, from the
connection's `x-api-key` and `x-memwrite-user` headers. A memory id given to `forget` or `why`
is checked to be that user's before anything is done with it.

Every failure reaches the client as the SDK's `ToolError` with a message the model can act on
(no statement, an unknown memory, no user, a wrong key, the API down); `memwrite mcp` refuses
to start on stdio without a user.
"""

from __future__ import annotations

import argparse
import os
import sys
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Annotated, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from pydantic import BaseModel, Field

from memwrite.client import (
    AsyncMemwriteClient,
    MemwriteApiError,
    MemwriteClientError,
    NotFound,
    ServiceUnreachable,
    TraceNotFinished,
    Unauthenticated,
)
from memwrite.integrations.tools import WAIT_SECS, Remembered, remembered

__all__ = ["McpSettings", "build_server", "main"]

API_KEY_HEADER = "x-api-key"
USER_HEADER = "x-memwrite-user"
NO_USER = "no user configured: set MEMWRITE_USER (or --user), or the x-memwrite-user header"
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
    role: Literal["user", "assistant"] = Field(description="Who said it: user or assistant.")
    content: str = Field(min_length=1, description="What was said, word for word.")


class Recalled(BaseModel):
    kind: Literal["memory", "episode"] = Field(
        description="memory: a distilled memory; episode: the user's own words kept as said, "
        "not distilled yet (no memory_id: `why` and `forget` take memories only)"
    )
    memory_id: str | None = Field(description="a memory's id; None for an episode")
    text: str
    type: str | None = Field(description="a memory's type (fact, preference, ...)")
    confidence: float | None = Field(description="a memory's confidence, 0 to 1")
    score: float
    observed_at: str


class Forgotten(BaseModel):
    removed: list[str] = Field(description="memory ids removed")
    restored: list[str] = Field(
        default_factory=list,
        description="older memories the removed one had superseded, current again",
    )
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
        raise ToolError(NO_USER)
    return api_key, user_id


@contextmanager
def _told(url: str) -> Iterator[None]:
    """Every failure of a tool as the SDK's `ToolError`, whose message reaches the model (any
    other exception reaches it only as "Error executing tool X")."""
    try:
        yield
    except ToolError:
        raise
    except Unauthenticated as exc:
        raise ToolError(
            f"the memwrite API at {url} refused the API key ({exc.status}): set "
            "MEMWRITE_API_KEY (or the x-api-key header) to a key of this deployment"
        ) from exc
    except ServiceUnreachable as exc:
        raise ToolError(
            f"the memwrite API at {url} cannot be reached ({exc}); is `memwrite serve` "
            "running, or MEMWRITE_URL right?"
        ) from exc
    except MemwriteApiError as exc:
        raise ToolError(f"the memwrite API answered {exc.status} {exc.code}: {exc}") from exc
    except MemwriteClientError as exc:
        raise ToolError(str(exc)) from exc


async def _own_memory(mw: AsyncMemwriteClient, memory_id: str, user_id: str) -> None:
    """Refuse a memory of another user exactly as an unknown one."""
    unknown = ToolError(f"no memory {memory_id} (recall gives the ids of the user's memories)")
    try:
        memory = await mw.get_memory(memory_id)
    except NotFound:
        raise unknown from None
    if memory.user_id != user_id:
        raise unknown


Statement = Annotated[
    str | None,
    Field(
        description="One thing the user said, in their words (e.g. 'I moved to Lisbon'). "
        "Give this or `turns`."
    ),
]
Turns = Annotated[
    list[TurnIn] | None,
    Field(description="Conversation turns to learn from, oldest first. Give this or `statement`."),
]
Query = Annotated[str, Field(description="A question or keywords about the user.")]
TopK = Annotated[int, Field(description="How many results at most (1 to 50).")]
MemoryId = Annotated[str, Field(description="A memory's id, as recall returns it.")]
OptionalMemoryId = Annotated[
    str | None,
    Field(description="The id of the memory to forget, as recall returns it."),
]
Everything = Annotated[
    bool,
    Field(description="True: erase every memory of the user. Only when the user asks for it."),
]
# `remember` needs one of its two arguments: the schema says so (JSON Schema `anyOf`).
ONE_OF_STATEMENT_OR_TURNS = [{"required": ["statement"]}, {"required": ["turns"]}]


def build_server(settings: McpSettings) -> MCPServer:
    def client(api_key: str | None) -> AsyncMemwriteClient:
        return AsyncMemwriteClient(settings.url, api_key=api_key)

    async def remember(
        statement: Statement = None, turns: Turns = None, ctx: Context | None = None
    ) -> Remembered:
        """Store what the user said: one `statement` in their words, or conversation `turns`
        (role user or assistant); one of the two is required. Waits for the pipeline (up to
        20 s) and says what happened: stored, already known, kept as an episode, or why not."""
        with _told(settings.url):
            api_key, user_id = _whose(ctx, settings)
            sent = [t.model_dump() for t in turns or []]
            if statement:
                sent.append({"role": "user", "content": statement})
            if not sent:
                raise ToolError("give a statement (the user's words) or some turns")
            async with client(api_key) as mw:
                ack = await mw.add(user_id=user_id, session_id=settings.session_id, turns=sent)
                try:
                    trace = await mw.wait(ack.trace_id, timeout=WAIT_SECS)
                except TraceNotFinished as late:
                    trace = late.trace
            return remembered(ack, trace)

    async def recall(query: Query, k: TopK = 5, ctx: Context | None = None) -> list[Recalled]:
        """What the user said before that best answers `query`, best first: memories, and
        episodes (their own words, kept as said until a model distils them)."""
        with _told(settings.url):
            api_key, user_id = _whose(ctx, settings)
            async with client(api_key) as mw:
                hits = await mw.search(user_id=user_id, query=query, k=max(1, min(k, 50)))
            return [
                Recalled(
                    kind="episode" if hit.kind == "episode" else "memory",
                    memory_id=hit.memory_id,
                    text=hit.text,
                    type=hit.type,
                    confidence=hit.confidence,
                    score=hit.score,
                    observed_at=hit.observed_at.isoformat(),
                )
                for hit in hits
            ]

    async def forget(
        memory_id: OptionalMemoryId = None,
        everything: Everything = False,
        ctx: Context | None = None,
    ) -> Forgotten:
        """Forget one memory (`memory_id`): it is deleted, and an older memory it had
        superseded is current again. Or, with `everything=true` and only when the user asks for
        it, every memory of the user."""
        with _told(settings.url):
            api_key, user_id = _whose(ctx, settings)
            async with client(api_key) as mw:
                if everything:
                    erased = await mw.erase_user(user_id)
                    return Forgotten(removed=[], erased_user=erased.erased)
                if not memory_id:
                    raise ToolError("give a memory_id (recall gives them), or everything=true")
                await _own_memory(mw, memory_id, user_id)
                record = await mw.delete_memory(memory_id)
            return Forgotten(removed=[record.memory_id], restored=record.restored)

    async def why(memory_id: MemoryId, ctx: Context | None = None) -> list[TraceSummary]:
        """Where a memory came from: each request (trace) that stored or merged into it,
        oldest first, with what each pipeline stage decided."""
        with _told(settings.url):
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

    tools = [Tool.from_function(fn) for fn in (remember, recall, forget, why)]
    tools[0].parameters["anyOf"] = ONE_OF_STATEMENT_OR_TURNS
    return MCPServer("memwrite", instructions=INSTRUCTIONS, tools=tools)


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
    if not args.user and not args.http:
        # stdio serves one user: without one every tool would fail. Over HTTP each connection
        # may name its own (x-memwrite-user).
        print(f"memwrite mcp: {NO_USER}", file=sys.stderr)
        return 2
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
