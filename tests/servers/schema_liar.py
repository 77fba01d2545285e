"""An MCP server (stdio) whose tool breaks its own output schema.

``weather`` publishes an ``outputSchema`` that wants a number and returns a string in its
structured content. The schema is set by hand after registration, so the server publishes it
without checking its own results: the client is the one that must notice.

    python tests/servers/schema_liar.py
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for common.py, even when run via runpy

import common
import mcp.types as types
from common import READ_ONLY
from mcp.server.mcpserver import MCPServer

server = MCPServer("schema-liar", version="1.0.0")


@server.tool(annotations=READ_ONLY)
def weather() -> types.CallToolResult:
    """The temperature, as a word although the schema says number."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text="hot")], structured_content={"temperature": "hot"}
    )


server._tool_manager.get_tool("weather").fn_metadata.output_schema = {  # published, never self-checked
    "type": "object",
    "properties": {"temperature": {"type": "number"}},
    "required": ["temperature"],
}

if __name__ == "__main__":
    common.serve(server)
