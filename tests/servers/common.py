"""What the MCP test servers share: the transport flags and runner, paging, the handshake-only era.

The servers are scripts (``python tests/servers/toolbox.py``), never imported as a package: each
puts this folder on ``sys.path`` (Python does it for a script, but not for one started through
``runpy``, as a test does) and then does ``import common``; tests/browser/catalog_server.py too.

- :func:`add_transport_flags` and :func:`serve`: ``--http PORT`` (Streamable HTTP at ``/mcp``),
  ``--sse PORT`` (legacy SSE at ``/sse``), both on 127.0.0.1, else stdio;
- ``handshake_only``: the server refuses ``server/discover`` (:func:`refuse_discover`), so a
  client in auto mode falls back to ``initialize``; over stdio it is then served by
  :func:`serve_stdio_handshake_only`;
- :class:`PagedServer` and :func:`page`: listings answered in pages (the cursor is an offset);
- the pieces several servers have: ``READ_ONLY``, ``PNG_1PX``, the ``echo`` tool.

Start-up cost: almost all of a server's start is the SDK's own ``import mcp`` (about 550
pydantic models, plus starlette, sse_starlette, uvicorn.main and httpx2, which
``mcp/__init__.py`` imports whatever the transport, so no server can leave the HTTP stack out
of a stdio start). What this module can save is the cyclic garbage collector's work on that
import: it is off while the SDK loads, and what the import built is then frozen
(``gc.freeze``), so no later collection walks it again. That is why a server imports this
module before anything from ``mcp`` (``import common`` sorts before ``import mcp``).
"""

from __future__ import annotations

import gc

gc.disable()  # until the SDK is imported (module docstring); re-enabled below

import argparse  # noqa: E402
import base64  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import time  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from typing import Any  # noqa: E402

import anyio  # noqa: E402
import mcp.types as types  # noqa: E402
from mcp import MCPError  # noqa: E402
from mcp.server.mcpserver import Context, MCPServer  # noqa: E402
from mcp.server.runner import serve_loop  # noqa: E402
from mcp.server.stdio import stdio_server  # noqa: E402

gc.freeze()
gc.enable()

READ_ONLY = types.ToolAnnotations(read_only_hint=True)
# A 1x1 transparent PNG.
PNG_1PX = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


def page[Item](
    items: Sequence[Item], params: types.PaginatedRequestParams | None, size: int
) -> tuple[list[Item], str | None]:
    """The page of ``items`` that ``params.cursor`` (an offset) asks for, and the next cursor."""
    start = int(params.cursor) if params and params.cursor else 0
    end = start + size
    return list(items[start:end]), str(end) if end < len(items) else None


class PagedServer(MCPServer):
    """MCPServer whose tools/list answers in pages of ``page_size`` (0 = one page)."""

    page_size = 0

    async def _handle_list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:  # type: ignore[override]
        tools = await self.list_tools()
        if not self.page_size:
            return types.ListToolsResult(tools=tools)
        found, next_cursor = page(tools, params, self.page_size)
        return types.ListToolsResult(tools=found, next_cursor=next_cursor)


def add_echo(server: MCPServer) -> None:
    """Register the read-only ``echo`` tool on ``server``."""

    stamped = bool(os.environ.get("BOOCODE_ECHO_STAMPS"))

    @server.tool(annotations=READ_ONLY)
    def echo(text: str) -> str:
        """Return the text unchanged."""
        if stamped:  # bench/chat_load.py: when the call arrived (time.perf_counter(), one clock per machine)
            return f"{text} @{time.perf_counter():.6f}"
        return text


def declared_capabilities(ctx: Context) -> str:
    """The capabilities the client declared, as JSON (``null`` when it declared none)."""
    declared = ctx.client_capabilities
    return json.dumps(declared.model_dump(by_alias=True, exclude_none=True) if declared else None)


async def _no_discover(ctx: Any, params: Any) -> types.DiscoverResult:
    raise MCPError(code=types.METHOD_NOT_FOUND, message="Method not found: server/discover")


def refuse_discover(server: MCPServer) -> None:
    """Answer ``server/discover`` with "method not found": a 2025-11-25 server only."""
    server._lowlevel_server.add_request_handler("server/discover", types.RequestParams, _no_discover)


async def serve_stdio_handshake_only(server: MCPServer) -> None:
    """Serve stdio in the handshake era only: ``server.run`` would let the client's first
    request (a ``server/discover`` probe) open a 2026-07-28 connection."""
    lowlevel = server._lowlevel_server
    async with stdio_server() as (read, write), lowlevel.lifespan(lowlevel) as state:
        await serve_loop(
            lowlevel, read, write, lifespan_state=state, init_options=lowlevel.create_initialization_options()
        )


def add_transport_flags(parser: argparse.ArgumentParser | Any, *, sse: bool = False) -> None:
    """Add ``--http PORT`` (and with ``sse``, ``--sse PORT``) to ``parser`` (or an argument group)."""
    parser.add_argument("--http", type=int, metavar="PORT", help="serve Streamable HTTP on this port")
    if sse:
        parser.add_argument("--sse", type=int, metavar="PORT", help="serve legacy SSE on this port")


def serve(
    server: MCPServer, *, http: int | None = None, sse: int | None = None, handshake_only: bool = False
) -> None:
    """Run ``server`` until it is stopped: Streamable HTTP on 127.0.0.1:``http``, legacy SSE on
    127.0.0.1:``sse``, else stdio (until stdin closes).

    ``handshake_only`` refuses ``server/discover`` on every transport. Over Streamable HTTP
    uvicorn logs at WARNING (no line per request); over SSE it keeps its INFO log.
    """
    if handshake_only:
        refuse_discover(server)
    if http:
        server.settings.log_level = "WARNING"
        server.run("streamable-http", host="127.0.0.1", port=http)
    elif sse:
        server.run("sse", host="127.0.0.1", port=sse)
    elif handshake_only:
        anyio.run(serve_stdio_handshake_only, server)
    else:
        server.run("stdio")
