"""The embedded channel layer: Channels' in-memory layer, made cheap per message.

Channels' ``InMemoryChannelLayer`` sweeps every channel and every group membership for
expired entries on each ``receive`` and ``group_send``, so a streamed turn pays for every open
tab in the process on each of its frames, twice; and ``group_send`` starts one task per
member. Here the sweep runs at most once per :data:`SWEEP_INTERVAL` and a group send puts
the message on each member's queue directly. Delivery is unchanged: every member gets every
message, in order, and a full channel drops the message as in Channels.
"""

from __future__ import annotations

import time
from typing import Any

from channels.exceptions import ChannelFull
from channels.layers import InMemoryChannelLayer

SWEEP_INTERVAL = 1.0  # seconds; messages expire after `expiry` (60 s), memberships after a day


class ChatChannelLayer(InMemoryChannelLayer):
    """``InMemoryChannelLayer`` with a throttled expiry sweep and task-free group sends."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._next_sweep = 0.0

    def _clean_expired(self) -> None:
        now = time.monotonic()
        if now < self._next_sweep:
            return
        self._next_sweep = now + SWEEP_INTERVAL
        super()._clean_expired()

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        """Send ``message`` to every channel of ``group`` (``send`` never waits: no task each)."""
        assert isinstance(message, dict), "Message is not a dict"
        self.require_valid_group_name(group)
        self._clean_expired()
        for channel in list(self.groups.get(group, ())):
            try:
                await self.send(channel, message)
            except ChannelFull:
                pass  # as in Channels: a channel that stopped reading must not block the others
