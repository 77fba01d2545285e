"""tests/servers/modern.py on every wire: both protocol revisions, over Streamable HTTP and stdio.

The wire's name says both (``http2026``, ``stdio2025``...). ``--handshake-only`` makes the server
refuse ``server/discover``, so the client falls back to the 2025-11-25 handshake.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from tests.support.processes import PYTHON, ROOT, HttpServer, free_port

MODERN = ROOT / "tests" / "servers" / "modern.py"
# Where each server runs and which revision it speaks: (modern.py's arguments, the revision).
WIRES = {
    "http2026": ([], "2026-07-28"),
    "http2025": (["--handshake-only"], "2025-11-25"),
    "stdio2026": (["--stdio"], "2026-07-28"),
    "stdio2025": (["--stdio", "--handshake-only"], "2025-11-25"),
}


@contextlib.contextmanager
def modern_wires(*args: str) -> Iterator[Callable[..., dict[str, Any]]]:
    """Factory ``entry(wire, **keys)``: the mcp.json entry of modern.py (with ``args``) on ``wire``.

    An HTTP server is started on first use and shared until the block ends (give the block a
    module's scope when the tools keep no state); stdio ones are started by each hub.
    """
    started: dict[str, HttpServer] = {}

    def entry(wire: str, **keys: Any) -> dict[str, Any]:
        extra, _ = WIRES[wire]
        if "--stdio" in extra:
            return {"command": PYTHON, "args": [str(MODERN), *args, *extra], **keys}
        if wire not in started:
            port = free_port()
            command = [PYTHON, str(MODERN), "--http", str(port), *args, *extra]
            started[wire] = HttpServer(command, port, "/mcp")
        return {"type": "http", "url": started[wire].url, **keys}

    try:
        yield entry
    finally:
        for server in started.values():
            server.stop()
