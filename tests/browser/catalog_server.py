"""A small real MCP server (stdio) for the chat page's browser tests: results people read.

``rows`` returns structured content shaped as table rows (one row carries hostile markup),
``tree`` nested structured content, ``lines`` plain text of any length (long output is cut
in the page's preview and fetched whole on "Show all").
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "servers"))  # the servers' common.py

import common
import mcp.types as types
from common import READ_ONLY
from mcp.server.mcpserver import MCPServer

HOSTILE = "<img src=x onerror=\"window.__pwned='rows'\"><script>window.__pwned='rows-script'</script>"


def build_server() -> MCPServer:
    """The catalog server with its three tools."""
    server = MCPServer("catalog", version="1.0.0")

    @server.tool(title="Catalogue rows", annotations=READ_ONLY)
    def rows(word: str) -> types.CallToolResult:
        """Items of the catalogue whose name holds ``word``, as rows."""
        items = [
            {"name": word, "qty": 3, "price": 1.5},
            {"name": HOSTILE, "qty": 1, "price": 2},
        ]
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=f"{len(items)} items")],
            structured_content={"items": items},
        )

    @server.tool(annotations=READ_ONLY)
    def tree() -> types.CallToolResult:
        """The shop, as nested data."""
        shop = {"shop": {"name": "Boo", "open": True, "tags": ["tea", "cake"], "address": {"city": "Paris"}}}
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=json.dumps(shop))], structured_content=shop
        )

    @server.tool(annotations=READ_ONLY)
    def lines(count: int) -> str:
        """``count`` numbered lines of text."""
        return "\n".join(f"line {n:04d} of the catalogue listing" for n in range(1, count + 1))

    return server


if __name__ == "__main__":
    common.serve(build_server())
