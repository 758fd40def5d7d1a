"""The Strands Agents tools `remember`, `recall` and `forget`: memwrite as an agent's long-term
memory, `Agent(tools=memwrite_tools(url, api_key, user_id="dana"))`.

The user is fixed when the tools are made, never a tool argument; each tool answers in words
(`memwrite.integrations.tools.MemoryTools`), and a failure raises, which Strands hands back to
the model as the tool's error result.
"""

from __future__ import annotations

from strands import tool
from strands.types.tools import AgentTool

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
) -> list[AgentTool]:
    """The three tools for `user_id` on the memwrite API at `url` (`api_key`: else
    `MEMWRITE_API_KEY`; `client` replaces the HTTP client)."""
    memory = MemoryTools(client or MemwriteClient(url, api_key=api_key), user_id)
    if session_id is not None:
        memory.session_id = session_id

    return [tool(fn) for fn in tool_functions(memory)]
