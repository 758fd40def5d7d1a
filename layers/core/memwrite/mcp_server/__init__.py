"""`memwrite mcp`: memwrite as an MCP server (the official `mcp` SDK), on `memwrite.client`.

Tools: `remember`, `recall`, `forget`, `why`. The user and the API key are the server's
(settings, or the headers of an HTTP connection), never a tool argument.
"""

from memwrite.mcp_server.server import McpSettings, build_server, main

__all__ = ["McpSettings", "build_server", "main"]
