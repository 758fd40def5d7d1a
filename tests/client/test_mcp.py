"""`memwrite mcp` through the SDK's own client, in-process, on a live `memwrite serve`: the
four tools, no tool argument can reach another user, every failure reaches the model as a
message it can act on, and `remember` says what happened."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from typing import Any

import pytest
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
    assert found["forgotten"]["removed"] == [found["recalled"][0]["memory_id"]]
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


def test_every_tool_input_is_described_and_remember_needs_a_statement_or_turns(
    serve: ServeProcess,
) -> None:
    server = build_server(settings_for(serve, "dana"))

    async def listed() -> dict[str, Any]:
        async with Client(server) as client:
            return {tool.name: tool.input_schema for tool in (await client.list_tools()).tools}

    schemas = asyncio.run(listed())
    # Then every property of every tool (and of a turn) says what it is
    for name, schema in schemas.items():
        properties = dict(schema["properties"])
        properties.update(schema.get("$defs", {}).get("TurnIn", {}).get("properties", {}))
        undescribed = [p for p, spec in properties.items() if not spec.get("description")]
        assert undescribed == [], (name, undescribed)
    # And remember's schema requires one of statement or turns
    assert schemas["remember"]["anyOf"] == [{"required": ["statement"]}, {"required": ["turns"]}]


def error_of(result: Any) -> str:
    assert result.is_error, result
    text: str = result.content[0].text
    # The SDK prefixes "Error executing tool <name>: "; the message after it is ours
    return text.partition(": ")[2]


@pytest.mark.parametrize(
    ("settings", "tool", "arguments", "says"),
    [
        ("ok", "remember", {}, "give a statement"),
        ("ok", "why", {"memory_id": "f" * 32}, f"no memory {'f' * 32}"),
        ("ok", "forget", {"memory_id": "f" * 32}, f"no memory {'f' * 32}"),
        ("no_user", "recall", {"query": "x"}, "no user configured"),
        ("wrong_key", "recall", {"query": "x"}, "refused the API key (401)"),
        ("api_down", "remember", {"statement": "I live in Oslo."}, "cannot be reached"),
    ],
)
def test_each_failure_reaches_the_model_as_its_message(
    serve: ServeProcess, settings: str, tool: str, arguments: dict[str, Any], says: str
) -> None:
    # Given the server set up right, or without a user, with a wrong key, or no API there
    chosen = {
        "ok": settings_for(serve, f"dana-{uuid.uuid4().hex[:8]}"),
        "no_user": McpSettings(url=serve.base_url, api_key=API_KEY, user_id=None),
        "wrong_key": McpSettings(url=serve.base_url, api_key="not-a-key", user_id="dana"),
        "api_down": McpSettings(url="http://127.0.0.1:9", api_key=API_KEY, user_id="dana"),
    }[settings]
    server = build_server(chosen)

    async def call() -> Any:
        async with Client(server) as client:
            return await client.call_tool(tool, arguments)

    # When the tool is called, then the model reads what went wrong (not only "Error executing
    # tool X")
    assert says in error_of(asyncio.run(call()))


def test_remember_says_what_happened_and_recall_returns_episodes(serve: ServeProcess) -> None:
    server = build_server(settings_for(serve, f"dana-{uuid.uuid4().hex[:8]}"))
    # A sentence the offline rules cannot read whole: kept as an episode
    wedding = "My sister's wedding in Porto was the best weekend of the year."

    async def session() -> dict[str, Any]:
        async with Client(server) as client:
            kept = structured(await client.call_tool("remember", {"statement": wedding}))
            oslo = {"statement": "I live in Oslo."}
            stored = structured(await client.call_tool("remember", oslo))
            again = structured(await client.call_tool("remember", oslo))
            found = structured(await client.call_tool("recall", {"query": "wedding in Porto"}))
            return {"kept": kept, "stored": stored, "again": again, "found": found}

    found = asyncio.run(session())
    # Then remember says it was kept as an episode, why, and that it is searchable now
    kept = found["kept"]
    assert (kept["stored"], kept["episodes"]) == (0, 1)
    assert "kept as an episode because no model is configured" in kept["summary"]
    assert "searchable with recall now" in kept["summary"]
    # And a stored fact says so; the same words again say already known
    assert found["stored"]["summary"] == "stored 1 new memory"
    assert found["again"]["duplicates"] == 1
    assert found["again"]["summary"].startswith("already known")
    # And recall returns the episode, marked as one (no memory id)
    [episode] = [hit for hit in found["found"] if hit["text"] == wedding]
    assert (episode["kind"], episode["memory_id"]) == ("episode", None)


def test_memwrite_mcp_without_a_user_refuses_to_start() -> None:
    # Given no MEMWRITE_USER and no --user
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMWRITE_")}
    # When `memwrite mcp` starts on stdio
    done = subprocess.run(
        [sys.executable, "-m", "memwrite_local.cli", "mcp"],
        check=False,
        cwd=REPO_ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    # Then it exits at once, saying what to set
    assert done.returncode == 2
    assert "no user configured: set MEMWRITE_USER" in done.stderr
