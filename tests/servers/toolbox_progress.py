"""Toolbox feature group "progress": tools that report progress (``--feature progress``).

``count_steps`` reports one ``notifications/progress`` per step, with a total or without and
with a message per step; with ``gate`` (a folder) it reports step N only once a file named
``go-N`` exists there, so a test decides when the bar moves (no timing involved).
``chatty`` sends many notifications as fast as it can (then optionally waits for a file), to
test throttling. Both work on
2026-07-28 and 2025-11-25 sessions and over every transport (the token is in the request).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from common import READ_ONLY
from mcp.server.mcpserver import Context, MCPServer

GATE_TIMEOUT = 60.0  # seconds a gated step waits for its file before going on anyway
GATE_POLL = 0.01  # the server has no event for "a file appeared": it looks again this often


async def _wait_for(path: Path) -> None:
    deadline = time.monotonic() + GATE_TIMEOUT
    # Polled: nothing tells a process that another one created a file.
    while not path.exists() and time.monotonic() < deadline:  # noqa: ASYNC110, ASYNC240
        await asyncio.sleep(GATE_POLL)


def register(server: MCPServer) -> None:
    """Add ``count_steps`` and ``chatty`` to ``server``."""

    @server.tool(annotations=READ_ONLY)
    async def count_steps(
        ctx: Context, steps: int = 3, with_total: bool = True, message: str = "step", gate: str = ""
    ) -> str:
        """Report progress once per step (``steps`` of them), then answer.

        ``with_total`` false leaves the total out; ``message`` prefixes each step's message
        (empty: no message); ``gate`` makes step N wait for the file ``<gate>/go-N``.
        """
        for step in range(1, steps + 1):
            if gate:
                await _wait_for(Path(gate) / f"go-{step}")
            text = f"{message} {step} of {steps}" if message else None
            await ctx.report_progress(step, steps if with_total else None, text)
        return f"counted {steps} steps"

    @server.tool(annotations=READ_ONLY)
    async def chatty(ctx: Context, count: int = 200, gate: str = "") -> str:
        """Send ``count`` progress notifications as fast as possible, then answer.

        ``gate``: after the burst, wait for the file ``<gate>/done`` before answering.
        """
        for index in range(1, count + 1):
            await ctx.report_progress(index, count, f"update {index}")
        if gate:
            await _wait_for(Path(gate) / "done")
        return f"sent {count} progress notifications"
