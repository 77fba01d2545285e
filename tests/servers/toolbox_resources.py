"""The toolbox's resources group: static resources, a template with completions, links, changes.

``python tests/servers/toolbox.py --feature resources`` adds it to the toolbox. Run as a script,
this module serves the toolbox with the group (``--handshake-only``: a 2025-11-25 server that
refuses ``server/discover``; ``--without-resources``: the toolbox without the resources and
completions capabilities at all; ``--http PORT``: over Streamable HTTP instead of stdio).

- static resources (listed in pages of :data:`PAGE_SIZE`): ``toolbox://notes/readme.txt``
  (text), ``toolbox://docs/guide.md`` (Markdown with a script tag and a link),
  ``toolbox://data/config.json`` (JSON), ``toolbox://images/dot.png`` (a PNG blob),
  ``toolbox://images/logo.svg`` (SVG markup with a script) and ``toolbox://data/large.txt``
  (6 MB of text, over the hub's 5 MB cap);
- the template ``toolbox://cities/{city}`` whose ``city`` is completed from :data:`CITIES`;
- the tools ``link_resource`` (a ``resource_link`` and an embedded resource) and
  ``add_resource`` (adds ``toolbox://added/<name>`` and announces the change both ways:
  ``notifications/resources/list_changed`` on 2025-11-25, ``subscriptions/listen`` on 2026-07-28).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for common.py, even when run via runpy

import common
import mcp.types as types
from common import PNG_1PX, READ_ONLY
from mcp import MCPError
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resources import TextResource

PAGE_SIZE = 2
CITIES = ("Amsterdam", "Athens", "Berlin", "Bern", "Lisbon", "London", "Paris")
GUIDE = (
    "# Toolbox guide\n\nUse **echo** to repeat text.\n\n<script>alert('guide')</script>\n\n"
    "[More](https://example.com/more)\n"
)
LARGE_BYTES = 6 * 1024 * 1024


def _paged_resources(server: MCPServer) -> Any:
    async def handler(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        resources, next_cursor = common.page(await server.list_resources(), params, PAGE_SIZE)
        return types.ListResourcesResult(resources=resources, next_cursor=next_cursor)

    return handler


def register(server: MCPServer) -> None:
    """Add the group's resources, template, completion handler and tools to ``server``."""

    @server.resource("toolbox://notes/readme.txt", name="readme", title="Read me", mime_type="text/plain")
    def readme() -> str:
        return "The toolbox reads you this note."

    @server.resource(
        "toolbox://docs/guide.md",
        name="guide",
        description="How to use the toolbox",
        mime_type="text/markdown",
    )
    def guide() -> str:
        return GUIDE

    @server.resource("toolbox://data/config.json", name="config", mime_type="application/json")
    def config() -> str:
        return json.dumps({"theme": "dark", "sizes": [1, 2, 3]})

    @server.resource("toolbox://images/dot.png", name="dot", title="A dot", mime_type="image/png")
    def dot() -> bytes:
        return PNG_1PX  # the same dot as the toolbox's ``media`` tool

    @server.resource("toolbox://images/logo.svg", name="logo", mime_type="image/svg+xml")
    def logo() -> str:
        return '<svg xmlns="http://www.w3.org/2000/svg"><script>alert("svg")</script></svg>'

    @server.resource(
        "toolbox://data/large.txt", name="large", description="Six megabytes", mime_type="text/plain"
    )
    def large() -> str:
        return "y" * LARGE_BYTES

    @server.resource(
        "toolbox://cities/{city}", name="city", description="Facts about a city", mime_type="text/plain"
    )
    def city(city: str) -> str:
        return f"{city} is a city in Europe."

    @server.completion()
    async def complete_city(
        ref: types.ResourceTemplateReference | types.PromptReference,
        argument: types.CompletionArgument,
        context: types.CompletionContext | None,
    ) -> types.Completion | None:
        if isinstance(ref, types.ResourceTemplateReference) and argument.name == "city":
            found = [c for c in CITIES if c.lower().startswith(argument.value.lower())]
            return types.Completion(values=found, total=len(found), has_more=False)
        if isinstance(ref, types.ResourceTemplateReference):
            raise MCPError(code=types.INVALID_PARAMS, message=f"no argument {argument.name!r}")
        return None

    @server.tool(annotations=READ_ONLY)
    def link_resource() -> types.CallToolResult:
        """A link to the guide and the config embedded."""
        return types.CallToolResult(
            content=[
                types.TextContent(type="text", text="see the guide"),
                types.ResourceLink(
                    type="resource_link",
                    uri="toolbox://docs/guide.md",
                    name="guide",
                    mime_type="text/markdown",
                ),
                types.ResourceLink(
                    type="resource_link", uri="toolbox://images/dot.png", name="dot", mime_type="image/png"
                ),
                types.EmbeddedResource(
                    type="resource",
                    resource=types.TextResourceContents(
                        uri="toolbox://data/config.json",
                        mime_type="application/json",
                        text='{"theme":"dark"}',
                    ),
                ),
            ]
        )

    @server.tool(annotations=READ_ONLY)
    async def add_resource(name: str, ctx: Context, notify: bool = True) -> str:
        """Add the resource ``toolbox://added/<name>`` at runtime and (unless ``notify`` is false) say so."""
        server.add_resource(
            TextResource(
                uri=f"toolbox://added/{name}", name=name, text=f"added {name}", mime_type="text/plain"
            )
        )
        if notify:
            await ctx.session.send_resource_list_changed()  # a 2025 session (dropped on 2026-07-28)
            await ctx.notify_resources_changed()  # every subscriptions/listen stream (2026-07-28)
        return f"added {name}"

    server._lowlevel_server.add_request_handler(
        "resources/list", types.PaginatedRequestParams, _paged_resources(server)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--handshake-only", action="store_true", help="a 2025-11-25 server")
    parser.add_argument("--without-resources", action="store_true", help="no resources capability")
    common.add_transport_flags(parser)
    options = parser.parse_args()
    # Imported here, not at the top: the toolbox imports this module for ``--feature resources``.
    from toolbox import build_server

    server = build_server(features=() if options.without_resources else ("resources",))
    if options.without_resources:
        for method in ("resources/list", "resources/templates/list", "resources/read", "completion/complete"):
            server._lowlevel_server._request_handlers.pop(method, None)
    common.serve(server, http=options.http, handshake_only=options.handshake_only)


if __name__ == "__main__":
    main()
