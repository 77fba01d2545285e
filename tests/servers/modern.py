"""A 2026-07-28 MCP server for the test suite (the SDK's MCPServer over Streamable HTTP).

    python tests/servers/modern.py --http PORT                    # 2026-07-28 (and 2025-11-25)
    python tests/servers/modern.py --http PORT --handshake-only   # refuses server/discover
    python tests/servers/modern.py --http PORT --page-size 2 --ttl-ms 60000

The SDK's server answers ``server/discover`` and stateless 2026-07-28 requests (the
``MCP-Protocol-Version`` header routes them) beside the 2025-11-25 handshake;
``--handshake-only`` replaces the discover handler with "method not found", so a client in
auto mode falls back to ``initialize``: a real 2025-11-25 server. ``tools/list`` answers in
pages of ``--page-size`` with the cache hint ``ttlMs = --ttl-ms``.

Tools: ``echo``, ``add``, ``add_tool`` (adds a tool at runtime and announces it both ways:
``subscriptions/listen`` for 2026-07-28 clients, ``notifications/tools/list_changed`` for
2025 ones), ``resume`` (answers an ``InputRequiredResult`` with only ``requestState`` first:
nothing to ask, the client retries) and ``ask_name`` (asks for an elicitation the client has
to answer).
"""

from __future__ import annotations

import argparse
from typing import Any

import mcp.types as types
from mcp import MCPError
from mcp.server.caching import CacheHint
from mcp.server.mcpserver import Context, MCPServer

READ_ONLY = types.ToolAnnotations(read_only_hint=True)


class PagedServer(MCPServer):
    """MCPServer whose tools/list answers in pages of ``page_size`` (0 = one page)."""

    page_size = 0

    async def _handle_list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:  # type: ignore[override]
        tools = await self.list_tools()
        if not self.page_size:
            return types.ListToolsResult(tools=tools)
        start = int(params.cursor) if params and params.cursor else 0
        end = start + self.page_size
        next_cursor = str(end) if end < len(tools) else None
        return types.ListToolsResult(tools=tools[start:end], next_cursor=next_cursor)


async def _no_discover(ctx: Any, params: Any) -> types.DiscoverResult:
    raise MCPError(code=types.METHOD_NOT_FOUND, message="Method not found: server/discover")


def build_server(*, page_size: int = 0, ttl_ms: int = 0, handshake_only: bool = False) -> PagedServer:
    """Create the server with every test tool registered."""
    server = PagedServer("modern", version="2.0.0", cache_hints={"tools/list": CacheHint(ttl_ms=ttl_ms)})
    server.page_size = page_size
    if handshake_only:
        server._lowlevel_server.add_request_handler("server/discover", types.RequestParams, _no_discover)

    @server.tool(annotations=READ_ONLY)
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool(annotations=READ_ONLY)
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool(annotations=READ_ONLY)
    async def add_tool(name: str, ctx: Context) -> str:
        """Add a read-only tool called ``name`` and announce the change."""

        def dynamic() -> str:
            return f"I am {name}"

        server.add_tool(dynamic, name=name, description=f"added at runtime: {name}", annotations=READ_ONLY)
        await ctx.notify_tools_changed()  # to subscriptions/listen streams (2026-07-28)
        await ctx.session.send_tool_list_changed()  # to a 2025 session (dropped on 2026-07-28)
        return f"added {name}"

    @server.tool(annotations=READ_ONLY)
    async def resume(ctx: Context) -> str | types.InputRequiredResult:
        """First round: only requestState (nothing to ask); the retry carries it back."""
        if ctx.request_state is None:
            return types.InputRequiredResult(request_state="round-1")
        return f"resumed after {ctx.request_state}"

    @server.tool(annotations=READ_ONLY)
    async def ask_name(ctx: Context) -> str | types.InputRequiredResult:
        """Asks the user for a name through elicitation."""
        answers = ctx.input_responses or {}
        if "name" not in answers:
            request = types.ElicitRequest(
                params=types.ElicitRequestFormParams(
                    message="Your name?",
                    requested_schema={"type": "object", "properties": {"name": {"type": "string"}}},
                )
            )
            return types.InputRequiredResult(input_requests={"name": request})
        return f"hello {answers['name']}"

    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", type=int, metavar="PORT", required=True, help="serve on this port")
    parser.add_argument("--page-size", type=int, default=0)
    parser.add_argument("--ttl-ms", type=int, default=0, help="the tools/list cache hint")
    parser.add_argument("--handshake-only", action="store_true", help="refuse server/discover")
    options = parser.parse_args()
    server = build_server(
        page_size=options.page_size, ttl_ms=options.ttl_ms, handshake_only=options.handshake_only
    )
    server.settings.log_level = "WARNING"
    server.run("streamable-http", host="127.0.0.1", port=options.http)


if __name__ == "__main__":
    main()
