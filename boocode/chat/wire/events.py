"""Where turn events go: the conversation's channel-layer group, relayed by every open tab.

Every event is bounded on its way out (:func:`boocode.chat.wire.sizes.bounded_frame`), so no frame
a tab relays grows with what the model or a server sent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from channels.layers import get_channel_layer

from boocode.chat.wire.sizes import bounded_frame

# Where a turn sends its events (and the forms, approvals and progress of its tool calls theirs).
Emit = Callable[[dict[str, Any]], Awaitable[None]]


def group_name(conversation_id: int) -> str:
    """The channel-layer group of a conversation."""
    return f"conv_{conversation_id}"


def group_emitter(conversation_id: int) -> Emit:
    """An :data:`Emit` for a turn of the conversation: it sends to the conversation's group."""
    layer = get_channel_layer()
    group = group_name(conversation_id)

    async def emit(event: dict[str, Any]) -> None:
        await layer.group_send(group, {"type": "chat.event", "event": bounded_frame(event)})

    return emit
