"""Toolbox feature group "logs": log messages at every level (``--feature logs``).

The server declares the ``logging`` capability (a ``logging/setLevel`` handler). On a
2025-11-25 session it sends only messages at or above the level last set with
``logging/setLevel`` (filtering is the server's job in that revision); on 2026-07-28 the SDK
sends a request's messages only when its ``_meta`` asks for a level, at or above it.

``log_levels`` logs one message per level (``rounds`` times), ``log_data`` one message
whose data is a JSON object of about ``size`` characters with ``text`` in it (capping and
redaction), ``log_level_set`` answers the level set with ``logging/setLevel`` (or "none").
"""

from __future__ import annotations

from typing import Any

import mcp.types as types
from common import READ_ONLY
from mcp.server.mcpserver import Context, MCPServer

LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


def register(server: MCPServer) -> None:
    """Add the logging capability and the tools that log to ``server``."""
    state: dict[str, Any] = {"level": None}

    async def set_level(ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
        state["level"] = params.level
        return types.EmptyResult()

    server._lowlevel_server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_level)

    def allowed(level: str) -> bool:
        return state["level"] is None or LEVELS.index(level) >= LEVELS.index(state["level"])

    @server.tool(annotations=READ_ONLY)
    async def log_levels(ctx: Context, text: str = "hello", logger: str = "toolbox", rounds: int = 1) -> str:
        """Log ``<level>: text`` once at each of the eight levels, ``rounds`` times."""
        for _ in range(rounds):
            for level in LEVELS:
                if allowed(level):
                    await ctx.log(level, f"{level}: {text}", logger_name=logger)  # type: ignore[arg-type]
        return f"logged {rounds} round(s)"

    @server.tool(annotations=READ_ONLY)
    async def log_data(ctx: Context, text: str = "", size: int = 0, level: str = "error") -> str:
        """Log one message whose data is an object with ``text`` and ``size`` characters of padding."""
        if allowed(level):
            await ctx.log(level, {"text": text, "padding": "x" * size}, logger_name="data")  # type: ignore[arg-type]
        return "logged"

    @server.tool(annotations=READ_ONLY)
    def log_level_set() -> str:
        """The level last set with logging/setLevel, or "none"."""
        return state["level"] or "none"
