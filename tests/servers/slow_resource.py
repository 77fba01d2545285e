"""A small MCP server with one resource whose read never ends, for stopping a turn while it reads.

``python tests/servers/slow_resource.py SOCKET`` (stdio): reading ``slow://forever`` connects to
the Unix socket SOCKET, so a test knows the read has begun, and then waits until the client
gives up.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for common.py, even when run via runpy

import anyio
import common
from mcp.server.mcpserver import MCPServer


def main() -> None:
    socket_path = sys.argv[1]
    server = MCPServer("slow")

    @server.resource("slow://forever", name="forever", mime_type="text/plain")
    async def forever() -> str:
        async with await anyio.connect_unix(socket_path) as stream:
            await stream.send(b"reading")
        await anyio.sleep_forever()
        return ""

    common.serve(server)


if __name__ == "__main__":
    main()
