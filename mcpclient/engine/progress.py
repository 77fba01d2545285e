"""Progress of tool calls: a server's ``notifications/progress``, handed to whoever made the call.

Every ``tools/call`` the hub sends carries a progress token: the hub's ``Client``
(:class:`mcpclient.engine.protocol.HubClient`) passes the callback of :func:`tool_call` to the SDK's
``call_tool(..., progress_callback=...)``, which puts a token in the request's ``_meta`` and
routes the server's notifications for that token back to the callback (both protocol
revisions, every transport: the token is the request's id).

Lifecycle
---------
A caller that wants the progress of the calls it makes runs them inside :func:`reporting`
with a :data:`Reporter` (the chat: one per tool call of a turn). :func:`tool_call` captures
the reporter of the calling context when the call starts; the callback forwards each update
until the call returns, fails or is cancelled, and drops whatever arrives later (the SDK
delivers notifications from tasks of its own, so one can still be on its way after the
result). Without a reporter the updates are dropped: the token is still sent, a server may
report progress to nobody.

Values are checked here, not trusted: ``progress`` and ``total`` must be finite numbers
(``total`` positive, else it is dropped), the message is cut at :data:`MAX_MESSAGE` characters.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import math
from collections.abc import Awaitable, Callable, Iterator

from mcpclient.core.progress import Progress, Reporter

logger = logging.getLogger(__name__)

MAX_MESSAGE = 500  # characters of a progress message kept (a server's text, shown on the page)


ProgressCallback = Callable[[float, float | None, str | None], Awaitable[None]]

_reporter: contextvars.ContextVar[Reporter | None] = contextvars.ContextVar("progress_reporter", default=None)


@contextlib.contextmanager
def reporting(reporter: Reporter) -> Iterator[None]:
    """Tool calls started in this block report their progress to ``reporter``."""
    token = _reporter.set(reporter)
    try:
        yield
    finally:
        _reporter.reset(token)


def _number(value: float | None) -> float | None:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def checked(tool: str, progress: float, total: float | None, message: str | None) -> Progress | None:
    """The update as a :class:`Progress`, or None when ``progress`` is not a finite number."""
    value = _number(progress)
    if value is None:
        return None
    limit = _number(total)
    text = message if isinstance(message, str) else ""
    return Progress(
        tool=tool, progress=value, total=limit if limit and limit > 0 else None, message=text[:MAX_MESSAGE]
    )


@contextlib.contextmanager
def tool_call(*, tool: str) -> Iterator[ProgressCallback]:
    """The progress callback of one ``tools/call`` (see the module docstring); closed on leaving."""
    reporter = _reporter.get()
    open_ = True

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        if not open_ or reporter is None:
            return
        update = checked(tool, progress, total, message)
        if update is None:
            logger.debug('tool "%s": ignored a progress notification without a usable value', tool)
            return
        outcome = reporter(update)
        if outcome is not None:
            await outcome

    try:
        yield on_progress
    finally:
        open_ = False
