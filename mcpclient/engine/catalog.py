"""A list kept fresh on one live session: its tools, its prompts, its resources.

Invariants. A catalog is listed once when its session is ready, then again after every change
signal (:meth:`KeptFresh.request_refresh`: a 2025-11-25 ``list_changed`` notification, a
2026-07-28 change-stream event, an administrator's rediscovery); a burst of signals while a
listing runs costs one more listing, never one each. A failed listing keeps the last good list
and says why in ``error``; it never fails the session. The loop runs in the session owner's task
group, so a catalog is listed exactly as long as its session lives. A server that does not
declare the capability is never asked: its catalog stays empty and ``supported`` is False.

The tool list is one too, with one difference: its first listing is part of connecting (a
server is ``ready`` once its tools are listed), so its loop starts after that listing and lists
again only when asked (:meth:`mcpclient.engine.connection.ServerConnection.request_relist`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio


@dataclass(eq=False)
class KeptFresh:
    """Listing state and signals shared by every kept-fresh list of a session."""

    supported: bool = False  # the server declares the capability
    error: str = ""  # why the last listing failed ("" when it worked)
    listings: int = 0  # listings finished (tests and the API wait on it)
    rounds: int = 0  # listings started (a rediscovery waits for the next one to finish)
    _wanted: asyncio.Event = field(default_factory=asyncio.Event, repr=False)
    _listed: asyncio.Event = field(default_factory=asyncio.Event, repr=False)
    updated: asyncio.Event = field(default_factory=asyncio.Event, repr=False)  # pulsed per listing

    def request_refresh(self) -> None:
        """List again soon; bursts coalesce into one listing."""
        self._wanted.set()

    @property
    def listed(self) -> bool:
        """True once a first listing has finished (or nothing is to be listed)."""
        return self._listed.is_set()

    def mark_listed(self) -> None:
        """Nothing (more) to wait for: unsupported, or a copy of a catalog listed elsewhere."""
        self._listed.set()

    async def wait_listed(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the first listing (no error if it takes longer)."""
        with anyio.move_on_after(timeout):
            await self._listed.wait()

    def finish_listing(self) -> None:
        """Count a listing (worked or failed) and wake whoever waits for one."""
        self.listings += 1
        self._listed.set()
        self.updated.set()
        self.updated = asyncio.Event()

    async def keep_fresh(self, relist: Callable[[], Awaitable[bool]], *, now: bool = True) -> None:
        """List (now, unless ``now`` is False), then again on every request.

        Ends when ``relist`` returns False: the session ended.
        """
        if now:
            self.request_refresh()
        while True:
            await self._wanted.wait()
            self._wanted.clear()
            self.rounds += 1
            if not await relist():
                return

    async def refresh_now(self, timeout: float) -> None:
        """List again and wait for a listing that started after this call (one in flight is stale).

        Waits at most ``timeout`` seconds; a session that ends meanwhile just ends the wait.
        """
        if not self.supported:
            return
        target = self.rounds + 1
        self.request_refresh()
        with anyio.move_on_after(timeout):
            while self.listings < target:
                await self.updated.wait()
