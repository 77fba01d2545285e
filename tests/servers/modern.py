"""A 2026-07-28 MCP server for the test suite (the SDK's MCPServer over Streamable HTTP).

    python tests/servers/modern.py --http PORT                    # 2026-07-28 (and 2025-11-25)
    python tests/servers/modern.py --http PORT --handshake-only   # refuses server/discover
    python tests/servers/modern.py --http PORT --page-size 2 --ttl-ms 60000
    python tests/servers/modern.py --stdio [--handshake-only] --elicit-tools

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

``--elicit-tools`` adds tools that elicit on either revision (an ``InputRequiredResult`` on
2026-07-28, an ``elicitation/create`` request mid-call on 2025-11-25) and answer with what
came back (``accept {"name": "Ada"}``, ``decline``): ``ask_defaults`` (the conformance
suite's SEP-1034 schema, every field with a default), ``ask_profile`` (a required name
without default, an integer, an enum, a boolean), ``ask_unrelated`` (as ``ask_profile`` but
on 2025-11-25 sent without ``related_request_id``: over Streamable HTTP it travels on the
standalone GET stream), ``ask_url`` (URL mode), ``ask_nested`` (a nested schema, not allowed)
and ``capabilities`` (the client's declared capabilities as JSON). ``--stdio`` serves over
stdio instead of HTTP.
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
from common import READ_ONLY, PagedServer
from mcp import MCPError
from mcp.server.caching import CacheHint
from mcp.server.mcpserver import Context, MCPServer

DEFAULTS_SCHEMA = {  # the conformance suite's elicitation-sep1034-client-defaults schema
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {
            "type": "string",
            "description": "User status",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "description": "Verification status", "default": True},
    },
    "required": [],
}
PROFILE_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Your name", "description": "As you like to be called"},
        "age": {"type": "integer", "title": "Age", "minimum": 0, "maximum": 150, "default": 30},
        "color": {
            "type": "string",
            "title": "Favourite colour",
            "oneOf": [
                {"const": "red", "title": "Red"},
                {"const": "green", "title": "Green"},
                {"const": "blue", "title": "Blue"},
            ],
            "default": "green",
        },
        "subscribe": {"type": "boolean", "title": "Subscribe", "default": False},
    },
    "required": ["name"],
}
NESTED_SCHEMA = {"type": "object", "properties": {"address": {"type": "object", "properties": {}}}}


def _outcome(result: Any) -> str:
    """``accept {json}``, ``decline`` or ``cancel``: what the client answered."""
    result = types.ElicitResult.model_validate(result) if isinstance(result, dict) else result
    if result.action == "accept":
        return f"accept {json.dumps(result.content, sort_keys=True)}"
    return result.action


async def _elicit(
    ctx: Context, message: str, schema: dict[str, Any], *, related: bool = True
) -> str | types.InputRequiredResult:
    """Ask in form mode the way the negotiated revision does it; the outcome as text."""
    if ctx.protocol_version == "2026-07-28":
        answers = ctx.input_responses or {}
        if "form" not in answers:
            request = types.ElicitRequest(
                params=types.ElicitRequestFormParams(message=message, requested_schema=schema)
            )
            return types.InputRequiredResult(input_requests={"form": request})
        return _outcome(answers["form"])
    related_id = ctx.request_context.request_id if related else None
    return _outcome(await ctx.session.elicit_form(message, schema, related_request_id=related_id))


def _add_elicit_tools(server: MCPServer) -> None:
    @server.tool(annotations=READ_ONLY)
    async def ask_defaults(ctx: Context) -> str | types.InputRequiredResult:
        """Asks for a form whose every field has a default (SEP-1034)."""
        return await _elicit(
            ctx, "Test client default value handling - please accept with defaults", DEFAULTS_SCHEMA
        )

    @server.tool(annotations=READ_ONLY)
    async def ask_profile(ctx: Context) -> str | types.InputRequiredResult:
        """Asks for a name (required, no default), an age, a colour and a subscription."""
        return await _elicit(ctx, "Tell me about <b>you</b>", PROFILE_SCHEMA)

    @server.tool(annotations=READ_ONLY)
    async def ask_unrelated(ctx: Context) -> str | types.InputRequiredResult:
        """As ask_profile; on 2025-11-25 the request names no related request."""
        return await _elicit(ctx, "Tell me about you", PROFILE_SCHEMA, related=False)

    @server.tool(annotations=READ_ONLY)
    async def ask_nested(ctx: Context) -> str | types.InputRequiredResult:
        """Asks with a nested schema, which elicitation does not allow."""
        try:
            return await _elicit(ctx, "Where do you live?", NESTED_SCHEMA)
        except MCPError as exc:
            return f"refused: {exc.error.message}"

    @server.tool(annotations=READ_ONLY)
    async def ask_url(ctx: Context) -> str | types.InputRequiredResult:
        """Asks the user to visit a URL (URL mode)."""
        url, message = "https://example.invalid/connect", "Connect your account"
        if ctx.protocol_version == "2026-07-28":
            answers = ctx.input_responses or {}
            if "url" not in answers:
                request = types.ElicitRequest(params=types.ElicitRequestURLParams(message=message, url=url))
                return types.InputRequiredResult(input_requests={"url": request})
            return _outcome(answers["url"])
        try:
            return _outcome(
                await ctx.session.elicit_url(
                    message, url, "connect-1", related_request_id=ctx.request_context.request_id
                )
            )
        except MCPError as exc:
            return f"refused: {exc.error.message}"

    @server.tool(annotations=READ_ONLY)
    def capabilities(ctx: Context) -> str:
        """The capabilities the client declared, as JSON."""
        return common.declared_capabilities(ctx)


def build_server(*, page_size: int = 0, ttl_ms: int = 0, elicit_tools: bool = False) -> PagedServer:
    """Create the server with every test tool registered."""
    server = PagedServer("modern", version="2.0.0", cache_hints={"tools/list": CacheHint(ttl_ms=ttl_ms)})
    server.page_size = page_size
    common.add_echo(server)

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
        result = answers["name"]
        result = types.ElicitResult.model_validate(result) if isinstance(result, dict) else result
        if result.action != "accept":
            return result.action
        return f"hello {(result.content or {}).get('name', 'nobody')}"

    if elicit_tools:
        _add_elicit_tools(server)
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    common.add_transport_flags(where)
    where.add_argument("--stdio", action="store_true", help="serve over stdio")
    parser.add_argument("--page-size", type=int, default=0)
    parser.add_argument("--ttl-ms", type=int, default=0, help="the tools/list cache hint")
    parser.add_argument("--handshake-only", action="store_true", help="refuse server/discover")
    parser.add_argument("--elicit-tools", action="store_true", help="add the tools that elicit")
    options = parser.parse_args()
    server = build_server(
        page_size=options.page_size, ttl_ms=options.ttl_ms, elicit_tools=options.elicit_tools
    )
    common.serve(server, http=options.http, handshake_only=options.handshake_only)


if __name__ == "__main__":
    main()
