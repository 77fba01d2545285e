"""One progress update of a tool call, as whoever made the call is handed it.

The protocol's side (the token, the server's notifications, checking their values) is
:mod:`mcpclient.engine.progress`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Progress:
    """One progress update of a tool call (``total`` None: the server does not know the end)."""

    tool: str
    progress: float
    total: float | None = None
    message: str = ""


Reporter = Callable[[Progress], Awaitable[None] | None]
"""Receives the progress updates of the calls made in its :func:`reporting` block."""
