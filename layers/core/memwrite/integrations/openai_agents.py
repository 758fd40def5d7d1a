"""The OpenAI Agents SDK tools `remember`, `recall` and `forget`: memwrite as an agent's
long-term memory, `Agent(tools=memwrite_tools(url, api_key, user_id="dana"))`.

The user is fixed when the tools are made, never a tool argument; each tool answers in words
(`memwrite.integrations.tools.MemoryTools`), and a failure goes back to the model as the
tool's error message (the SDK's default `failure_error_function`).
"""

from __future__ import annotations

from agents import FunctionTool, function_tool

from memwrite.client import MemwriteClient
from memwrite.integrations.tools import MemoryTools, tool_functions

__all__ = ["memwrite_tools"]


def memwrite_tools(
    url: str,
    api_key: str | None = None,
    *,
    user_id: str,
    session_id: str | None = None,
    client: MemwriteClient | None = None,
) -> list[FunctionTool]:
    """The three tools for `user_id` on the memwrite API at `url` (`api_key`: else
    `MEMWRITE_API_KEY`; `client` replaces the HTTP client)."""
    memory = MemoryTools(client or MemwriteClient(url, api_key=api_key), user_id)
    if session_id is not None:
        memory.session_id = session_id

    return [function_tool(fn) for fn in tool_functions(memory)]
