"""Toolbox feature group "hang": a server that stops answering, pings included (``--feature hang``).

``freeze`` blocks the server's event loop for ``seconds``: the process stays alive and its pipes
stay open, but no request gets an answer, so only a ping with a deadline can tell that the
session is dead (the hub's healing, see mcpclient/engine/healing.py).
"""

from __future__ import annotations

import sys
import time

from common import READ_ONLY
from mcp.server.mcpserver import MCPServer


def register(server: MCPServer) -> None:
    """Add the ``freeze`` tool to ``server``."""

    @server.tool(annotations=READ_ONLY)
    async def freeze(seconds: float = 60.0) -> str:
        """Stop answering anything (this call, other calls, pings) for ``seconds``."""
        sys.stderr.write("toolbox: freezing on request\n")
        sys.stderr.flush()
        time.sleep(seconds)  # noqa: ASYNC251 - blocking the event loop is the point: the server hangs
        return f"froze {seconds}"
