"""A real MCP server for the test suite, built with the SDK's MCPServer.

Run over stdio (default) or Streamable HTTP / SSE on 127.0.0.1:

    python tests/servers/toolbox.py                      # stdio
    python tests/servers/toolbox.py --http PORT          # Streamable HTTP at /mcp
    python tests/servers/toolbox.py --sse PORT           # legacy SSE at /sse
    python tests/servers/toolbox.py --extra-tools 120 --page-size 50   # several tools/list pages
    python tests/servers/toolbox.py --titled-tools       # + tools with titles, icons, outputSchema

Tools cover what the hub must handle: read-only tools, a tool annotated readOnlyHint=false
(must be rejected), a slow tool, a tool that kills the process, a tool
returning more than 5 MB, images/resources/links, structured-only output, an error result,
and a tool that adds a tool at runtime and sends notifications/tools/list_changed.
``--titled-tools`` adds two read-only tools with display metadata (off by default, so the
tool counts other tests rely on stay put): ``forecast`` has a ``title``, an ``annotations.title``,
icons (https, javascript:, a small and an oversized data: image) and an ``outputSchema``;
``almanac`` has only an ``annotations.title``. ``--feature NAME`` (repeatable) adds one of the
groups in ``tests/servers/toolbox_<name>.py``: progress, logs, resources, prompts, writes
(tools with ``readOnlyHint: false``), questions (elicitation in form and URL mode), hang
(a tool after which the server answers nothing, pings included), meta (a tool that returns its
request's ``_meta``), apps (tools with MCP Apps views and visibilities) and skills (skills served
by the skills extension, SEP-2640), pins (a tool whose definition changes while it runs) and
undeclared (tools without ``readOnlyHint``, which ask before each call).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import importlib
import os
import sys
from collections.abc import Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for common.py, even when run via runpy

import common
import mcp.types as types
from common import PNG_1PX, READ_ONLY, PagedServer
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel

FORECAST_ICONS = [
    types.Icon(src="https://icons.example.invalid/forecast.png", mime_type="image/png", sizes=["48x48"]),
    types.Icon(src="javascript:alert('icon')", mime_type="image/png"),
    types.Icon(src="data:image/png;base64," + base64.b64encode(PNG_1PX).decode(), theme="dark"),
    types.Icon(src="data:image/png;base64," + "A" * 9000),  # over 8 KB
]


class Forecast(BaseModel):
    """Tomorrow's weather."""

    temperature: float
    unit: str


# Optional groups of tools, resources and prompts, each in tests/servers/toolbox_<name>.py with a
# ``register(server)`` function; off by default so that the tool counts other tests rely on stay put.
FEATURES = (
    "progress",
    "logs",
    "resources",
    "prompts",
    "writes",
    "questions",
    "hang",
    "meta",
    "apps",
    "skills",
    "pins",
    "undeclared",
)


def add_feature(server: MCPServer, name: str) -> None:
    """Register the feature group ``name`` (one of :data:`FEATURES`) on ``server``."""
    if name not in FEATURES:
        raise ValueError(f"unknown feature {name!r}; known: {', '.join(FEATURES)}")
    importlib.import_module(f"toolbox_{name}").register(server)  # a script: this folder is on sys.path


def build_server(
    extra_tools: int = 0, page_size: int = 0, titled_tools: bool = False, features: Sequence[str] = ()
) -> PagedServer:
    """Create the toolbox server with every test tool registered (and the ``features`` asked for)."""
    server = PagedServer("toolbox", version="1.0.0")
    server.page_size = page_size
    for feature in features:
        add_feature(server, feature)

    common.add_echo(server)

    @server.tool(annotations=READ_ONLY)
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool(annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=True))
    def delete_everything(path: str) -> str:
        """A write tool: the hub must reject it."""
        return f"deleted {path}"

    @server.tool(annotations=READ_ONLY)
    async def slow(seconds: float) -> str:
        """Sleep, then answer."""
        await asyncio.sleep(seconds)
        return f"slept {seconds}"

    @server.tool(annotations=READ_ONLY)
    def crash() -> str:
        """Kill this server process without answering."""
        sys.stderr.write("toolbox: crashing on request\n")
        sys.stderr.flush()
        os._exit(3)

    @server.tool(annotations=READ_ONLY)
    def big(megabytes: float) -> str:
        """Return this many megabytes of text."""
        return "x" * int(megabytes * 1024 * 1024)

    @server.tool(annotations=READ_ONLY)
    def media() -> types.CallToolResult:
        """An image, an embedded text resource, a blob resource and a resource link."""
        return types.CallToolResult(
            content=[
                types.TextContent(type="text", text="here is a picture"),
                types.ImageContent(
                    type="image", data=base64.b64encode(PNG_1PX).decode(), mime_type="image/png"
                ),
                types.EmbeddedResource(
                    type="resource",
                    resource=types.TextResourceContents(
                        uri="file:///notes.txt", mime_type="text/plain", text="notes"
                    ),
                ),
                types.EmbeddedResource(
                    type="resource",
                    resource=types.BlobResourceContents(
                        uri="file:///data.bin",
                        mime_type="application/octet-stream",
                        blob=base64.b64encode(b"\x00" * 10).decode(),
                    ),
                ),
                types.ResourceLink(type="resource_link", uri="file:///linked.txt", name="linked"),
            ]
        )

    @server.tool(annotations=READ_ONLY)
    def structured() -> types.CallToolResult:
        """Structured content only."""
        return types.CallToolResult(content=[], structured_content={"temperature": 21.5, "unit": "C"})

    @server.tool(annotations=READ_ONLY)
    def empty() -> types.CallToolResult:
        """No content at all."""
        return types.CallToolResult(content=[])

    @server.tool(annotations=READ_ONLY)
    def fail(message: str) -> types.CallToolResult:
        """An error result carrying the message."""
        return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True)

    @server.tool(annotations=READ_ONLY)
    def stderr(text: str) -> str:
        """Write a line to stderr."""
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
        return "written"

    @server.tool(annotations=READ_ONLY)
    async def add_tool(name: str, ctx: Context, notify: bool = True) -> str:
        """Register a new read-only tool at runtime and (unless ``notify`` is false) say so."""

        def dynamic() -> str:
            return f"I am {name}"

        server.add_tool(dynamic, name=name, description=f"added at runtime: {name}", annotations=READ_ONLY)
        if notify:
            await ctx.session.send_tool_list_changed()  # a 2025 session (dropped on 2026-07-28)
            await ctx.notify_tools_changed()  # every subscriptions/listen stream (2026-07-28)
        return f"added {name}"

    @server.tool(annotations=READ_ONLY)
    async def remove_tool(name: str, ctx: Context) -> str:
        """Remove a tool at runtime and notify the client."""
        server.remove_tool(name)
        await ctx.session.send_tool_list_changed()
        await ctx.notify_tools_changed()
        return f"removed {name}"

    if titled_tools:

        @server.tool(
            title="Weather forecast",
            annotations=types.ToolAnnotations(read_only_hint=True, title="Forecast (annotation title)"),
            icons=FORECAST_ICONS,
        )
        def forecast(city: str) -> Forecast:
            """Tomorrow's temperature in a city."""
            return Forecast(temperature=21.5, unit="C")

        @server.tool(annotations=types.ToolAnnotations(read_only_hint=True, title="Almanac of the year"))
        def almanac() -> str:
            """The almanac (titled by its annotations only)."""
            return "full moon on Friday"

    for index in range(extra_tools):

        def item(index: int = index) -> str:
            return f"item {index}"

        server.add_tool(
            item, name=f"item_{index:03d}", description=f"extra tool {index}", annotations=READ_ONLY
        )
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common.add_transport_flags(parser, sse=True)
    parser.add_argument("--extra-tools", type=int, default=0)
    parser.add_argument("--page-size", type=int, default=0)
    parser.add_argument("--titled-tools", action="store_true", help="add forecast and almanac")
    parser.add_argument(
        "--feature", action="append", default=[], choices=FEATURES, help="add a feature group (repeatable)"
    )
    parser.add_argument("--tag", default="", help="ignored; lets tests find this process")
    options = parser.parse_args()
    server = build_server(options.extra_tools, options.page_size, options.titled_tools, options.feature)
    common.serve(server, http=options.http, sse=options.sse)


if __name__ == "__main__":
    main()
