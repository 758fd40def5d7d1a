"""`memwrite mcp` through the SDK's own client, in-process, on a live `memwrite serve`: the
four tools, and no tool argument can reach another user."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from typing import Any

from mcp import Client, StdioServerParameters

from memwrite.client import MemwriteClient
from memwrite.mcp_server import McpSettings, build_server
from tests.client.conftest import API_KEY
from tests.serve_process import REPO_ROOT, ServeProcess


def structured(result: Any) -> Any:
    assert not result.is_error, result.content
    content = result.structured_content
    if isinstance(content, dict) and set(content) == {"result"}:
        return content["result"]
    return content if content is not None else json.loads(result.content[0].text)


def settings_for(serve: ServeProcess, user_id: str) -> McpSettings:
    return McpSettings(url=serve.base_url, api_key=API_KEY, user_id=user_id)


def test_the_tools_remember_recall_explain_and_forget(serve: ServeProcess) -> None:
    dana = f"dana-{uuid.uuid4().hex[:8]}"
    server = build_server(settings_for(serve, dana))

    async def session() -> dict[str, Any]:
        async with Client(server) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            remembered = structured(
                await client.call_tool(
                    "remember",
                    # A claim the offline rules read whole (a partial reading is an episode)
                    {"statement": "I live in Berlin."},
                )
            )
            recalled = structured(await client.call_tool("recall", {"query": "where do I live?"}))
            first = recalled[0]["memory_id"]
            why = structured(await client.call_tool("why", {"memory_id": first}))
            forgotten = structured(await client.call_tool("forget", {"memory_id": first}))
            after = structured(await client.call_tool("recall", {"query": "where do I live?"}))
            return {
                "tools": tools,
                "remembered": remembered,
                "recalled": recalled,
                "why": why,
                "forgotten": forgotten,
                "after": after,
            }

    found = asyncio.run(session())
    # Then the four tools exist, and none takes a user or a key
    assert set(found["tools"]) == {"remember", "recall", "forget", "why"}
    for tool in found["tools"].values():
        assert not {"user_id", "user", "api_key", "tenant"} & set(tool.input_schema["properties"])
    # And what was remembered is recalled, explained by its trace, then forgotten
    assert found["remembered"]["status"] == "complete" and found["remembered"]["stored"] >= 1
    assert any("Berlin" in hit["text"] for hit in found["recalled"])
    assert found["why"][0]["trace_id"] == found["remembered"]["trace_id"]
    assert found["why"][0]["outcome"] == ["stored"]
    assert found["recalled"][0]["memory_id"] in found["forgotten"]["removed"]
    assert found["recalled"][0]["memory_id"] not in {hit["memory_id"] for hit in found["after"]}


def test_a_memory_of_another_user_is_unknown_to_the_tools(serve: ServeProcess) -> None:
    # Given a memory of another user of the same tenant
    alex = f"alex-{uuid.uuid4().hex[:8]}"
    with MemwriteClient(serve.base_url, api_key=API_KEY) as mw:
        ack = mw.add(
            user_id=alex, session_id="s", turns=[{"role": "user", "content": "I live in Oslo."}]
        )
        theirs = mw.wait(ack.trace_id, timeout=30).outcome.memory_ids[0]
    server = build_server(settings_for(serve, f"dana-{uuid.uuid4().hex[:8]}"))

    async def session() -> list[Any]:
        async with Client(server) as client:
            return [
                await client.call_tool("why", {"memory_id": theirs}),
                await client.call_tool("forget", {"memory_id": theirs}),
                await client.call_tool("recall", {"query": "Oslo"}),
            ]

    why, forget, recall = asyncio.run(session())
    # Then it can be neither explained nor forgotten, nor found
    assert why.is_error and forget.is_error
    assert structured(recall) == []
    with MemwriteClient(serve.base_url, api_key=API_KEY) as mw:
        assert mw.get_memory(theirs).memory_id == theirs


def test_memwrite_mcp_over_stdio_as_a_desktop_client_starts_it(serve: ServeProcess) -> None:
    # Given the command and environment of docs/mcp.md's desktop config
    dana = f"dana-{uuid.uuid4().hex[:8]}"
    command = StdioServerParameters(
        command=sys.executable,
        args=["-m", "memwrite_local.cli", "mcp"],
        cwd=str(REPO_ROOT),
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("MEMWRITE_")},
            "MEMWRITE_URL": serve.base_url,
            "MEMWRITE_API_KEY": API_KEY,
            "MEMWRITE_USER": dana,
        },
    )

    async def session() -> tuple[set[str], Any]:
        async with Client(command) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            return names, await client.call_tool("recall", {"query": "anything"})

    names, recalled = asyncio.run(session())
    # Then the tools are there, and a new user has no memories yet
    assert names == {"remember", "recall", "forget", "why"}
    assert structured(recalled) == []
