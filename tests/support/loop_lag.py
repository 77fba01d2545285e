"""A probe for how long the event loop goes without a break, measured from inside it.

A task wakes every few milliseconds and records the CPU time the loop's thread spent between
two of its wake-ups (``time.thread_time``): that is the work the loop did in one go, whatever
else the machine was doing (a descheduled process waits without counting). ``worst`` is the
longest such stretch while the probe ran.

The cyclic collector's full collections are taken out of the figure: they scan every object the
process tracks (a test process holds hundreds of thousands: 0.3 s a collection was measured), and
when one falls inside the probe is a matter of allocation counts, not of the code under test.
The probe collects, then freezes the heap (``gc.freeze``) while it runs, as the serving processes
do after start-up (:mod:`mcpclient.runtime.heap`).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time


class LoopLag:
    """``async with LoopLag() as lag: ...``; then ``lag.worst`` (seconds of the loop's CPU in one go)."""

    def __init__(self, interval: float = 0.005) -> None:
        self.interval = interval
        self.worst = 0.0
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> LoopLag:
        gc.collect()
        gc.freeze()
        self._task = asyncio.create_task(self._probe())
        await asyncio.sleep(0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        gc.unfreeze()

    async def _probe(self) -> None:
        while True:
            before = time.thread_time()
            await asyncio.sleep(self.interval)
            self.worst = max(self.worst, time.thread_time() - before)
