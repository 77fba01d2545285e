"""Progress of tool calls in the conversation: ``tool_progress`` frames, throttled per call.

The chat's side of progress (the protocol's side: :mod:`mcpclient.engine.progress`). A turn
runs each tool call inside :func:`tracking` (beside its question asker): it opens a
:class:`CallProgress` for the call's row, registered under the row's id, and makes it the
call's progress reporter (``reporting``). Each update the server sends is kept as the call's
latest; frames go out through the turn's ``emit`` (the conversation's
group: every open tab) at most once per :data:`MIN_INTERVAL` seconds per call. The first
update goes out at once; updates within the interval only replace the pending one, which a
sender task delivers when the interval has passed, so the latest value always arrives and a
chatty server costs a handful of frames per second.

Leaving :func:`tracking` (the call returned, failed or was cancelled) closes the call before
its ``tool_result`` is emitted: the sender task is cancelled and whatever comes later is
dropped, so no ``tool_progress`` follows the result. The page also ignores progress for a
card that is not running.

A page that (re)connects mid-call gets the latest progress of the conversation's running calls
in its ``history`` frame (:func:`running`). State lives in this process's memory, like the
turn it belongs to.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Iterator
from typing import Any

from boocode.chat.wire.events import Emit
from mcpclient.core.progress import Progress
from mcpclient.engine.api import reporting

logger = logging.getLogger(__name__)

MIN_INTERVAL = 0.25  # seconds between two tool_progress frames of one call (4 per second at most)


class CallProgress:
    """The progress of one running tool call and the sending of its frames."""

    def __init__(
        self, conversation_id: int, call: dict[str, Any], emit: Emit, recorded: Awaitable[Any] | None = None
    ) -> None:
        self.conversation_id = conversation_id
        self.call = call  # the call's row (its id filled in once ``recorded`` is done)
        self._recorded = recorded
        self._emit = emit
        self.latest: dict[str, Any] | None = None
        self._unsent = False
        self._sent_at = float("-inf")
        self._sender: asyncio.Task[None] | None = None
        self.closed = False
        self.frames = 0  # frames sent (throttling is observable)

    @property
    def call_id(self) -> int | None:
        call_id = self.call.get("id")
        return call_id if isinstance(call_id, int) else None

    def update(self, update: Progress) -> None:
        """The server reported progress: keep it, send it now or when the interval has passed."""
        if self.closed:
            return
        self.latest = {
            "call_id": self.call_id,
            "progress": update.progress,
            "total": update.total,
            "message": update.message,
        }
        self._unsent = True
        if self._sender is None or self._sender.done():
            loop = asyncio.get_running_loop()
            self._sender = loop.create_task(self._send(), name=f"progress-{self.call_id}")

    async def _send(self) -> None:
        if self._recorded is not None:  # the call's row is still being written: its frames follow it
            await asyncio.shield(self._recorded)  # (close() cancels this task, never the write)
            self._recorded = None
        while self._unsent and not self.closed:
            wait = self._sent_at + MIN_INTERVAL - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
                if self.closed:
                    return
            self._unsent = False
            self._sent_at = time.monotonic()
            assert self.latest is not None
            self.latest["call_id"] = self.call_id
            self.frames += 1
            try:
                await self._emit({"type": "tool_progress", **self.latest})
            except Exception:  # a frame that cannot go out costs only that frame
                logger.warning("conversation %s: lost a progress frame", self.conversation_id, exc_info=True)

    def close(self) -> None:
        """The call is over: no frame after this one (a pending one is dropped)."""
        self.closed = True
        if self._sender is not None and not self._sender.done():
            self._sender.cancel()


_open: set[CallProgress] = set()  # the progress of every call running in this process


@contextlib.contextmanager
def tracking(
    conversation_id: int, call: dict[str, Any], emit: Emit, recorded: Awaitable[Any] | None = None
) -> Iterator[CallProgress | None]:
    """Run a tool call of the conversation with its progress shown on its card (see the module).

    With ``recorded`` the call's row is being written beside the call (``call`` gets its id when
    it is done): progress frames wait for it, after the card's ``tool_call`` frame.
    """
    if recorded is None and not isinstance(call.get("id"), int):
        yield None
        return
    current = CallProgress(conversation_id, call, emit, recorded)
    _open.add(current)
    try:
        with reporting(current.update):
            yield current
    finally:
        current.close()
        _open.discard(current)


def running(conversation_id: int) -> list[dict[str, Any]]:
    """The latest progress of the conversation's running calls (for the ``history`` frame)."""
    return [
        {**current.latest, "call_id": current.call_id}
        for current in list(_open)
        if current.conversation_id == conversation_id
        and current.latest is not None
        and current.call_id is not None
    ]
