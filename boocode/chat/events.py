"""Where turn events go: the conversation's channel-layer group, relayed by every open tab."""

from __future__ import annotations

from typing import Any

from channels.layers import get_channel_layer

from boocode.chat.turns import Emit


def group_name(conversation_id: int) -> str:
    """The channel-layer group of a conversation."""
    return f"conv_{conversation_id}"


def group_emitter(conversation_id: int) -> Emit:
    """An ``emit`` callback for :mod:`boocode.chat.turns` that sends to the conversation's group."""
    layer = get_channel_layer()
    group = group_name(conversation_id)

    async def emit(event: dict[str, Any]) -> None:
        await layer.group_send(group, {"type": "chat.event", "event": event})

    return emit
