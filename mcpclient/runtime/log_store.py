"""Server logs in the database: the tail of each server's log messages and the level asked for.

The hub keeps each shared session's ``notifications/message`` in memory
(:mod:`mcpclient.engine.server_logs`); :class:`LogTailWriter` mirrors them into
``McpServer.log_tail`` for the admin. A chatty server must not cost a database write per
message: the writer remembers which servers changed and writes them all in one unit of work
:data:`FLUSH_DELAY` seconds after the first change (so at most one write per server per
delay). What is written is the ring as it is then (at most 200 entries, each capped and
redacted by the hub).

Lifecycle: :func:`mcpclient.runtime.new_hub` registers one writer per hub as a log listener.
Its flush runs as a task on the hub's loop; :meth:`LogTailWriter.flush` writes what is
pending at once (tests, shutdown). A failed write is logged and the entries stay in memory.

``McpServer.log_level`` is read when the hub starts (:func:`read_log_levels`) and changed by the
admin through :func:`mcpclient.admin.changes.set_log_level`, which also applies it to the
live session.
"""

from __future__ import annotations

import asyncio
import logging

from channels.db import database_sync_to_async

from mcpclient.models import McpServer

logger = logging.getLogger(__name__)

FLUSH_DELAY = 1.0  # seconds between a server's first new log message and the write that stores it


def read_log_levels() -> dict[str, str]:
    """The level asked of each server that has one (``McpServer.log_level``)."""
    return dict(McpServer.objects.exclude(log_level="").values_list("name", "log_level"))


def write_log_tails(tails: dict[str, list[dict[str, str]]]) -> None:
    """Store each server's log tail (one UPDATE per server, nothing else of the row)."""
    for name, entries in tails.items():
        McpServer.objects.filter(name=name).update(log_tail=entries)


class LogTailWriter:
    """Coalesces the hub's log messages into few writes of ``McpServer.log_tail``."""

    def __init__(self, delay: float = FLUSH_DELAY) -> None:
        self.delay = delay
        self._dirty: dict[str, list[dict[str, str]]] = {}
        self._task: asyncio.Task[None] | None = None
        self.writes = 0  # units of work written so far (the coalescing is observable)

    def note(self, name: str, entries: tuple[dict[str, str], ...]) -> None:
        """The hub's log listener: server ``name``'s ring now holds ``entries``."""
        self._dirty[name] = list(entries)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._flush_later(), name="mcp-log-tails")

    async def _flush_later(self) -> None:
        await asyncio.sleep(self.delay)
        await self.flush()

    async def flush(self) -> None:
        """Write every pending tail now."""
        pending, self._dirty = self._dirty, {}
        if not pending:
            return
        try:
            await database_sync_to_async(write_log_tails)(pending)
            self.writes += 1
        except Exception:  # a listener's write must never break the hub; the ring is in memory
            logger.exception("could not store the log messages of MCP servers %s", ", ".join(pending))

    async def idle(self) -> None:
        """Wait until the scheduled write (if any) has run."""
        if self._task is not None:
            await asyncio.wait([self._task])
