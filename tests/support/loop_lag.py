"""A probe for how long the event loop goes without a break, measured from inside it.

A task wakes every few milliseconds and records the CPU time the loop's thread spent between
two of its wake-ups (``time.thread_time``): that is the work the loop did in one go, whatever
else the machine was doing (a descheduled process waits without counting). ``worst`` is the
longest such stretch while the probe ran.
"""

from __future__ import annotations

import asyncio
import contextlib
import time


class LoopLag:
    """``async with LoopLag() as lag: ...``; then ``lag.worst`` (seconds of the loop's CPU in one go)."""

    def __init__(self, interval: float = 0.005) -> None:
        self.interval = interval
        self.worst = 0.0
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> LoopLag:
        self._task = asyncio.create_task(self._probe())
        await asyncio.sleep(0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def _probe(self) -> None:
        while True:
            before = time.thread_time()
            await asyncio.sleep(self.interval)
            self.worst = max(self.worst, time.thread_time() - before)
