"""The assistant message a turn is writing: its text and thinking as they stream in.

A turn (:class:`boocode.chat.turn.loop.Turn`) holds one :class:`Answer` for its length and opens
it on each assistant message it streams into (:meth:`Answer.open`, which sends ``message_start``);
``message_id`` is ``None`` between messages. The registry reads it for a reconnecting tab
(:meth:`boocode.chat.turn.registry.TurnRegistry.live_text`: the id, the text so far and its HTML).

Pace: the text and the thinking arrive as deltas of the model stream (:meth:`Answer.receive`);
they go out as ``reasoning_delta`` and ``text_delta`` frames at most every :data:`DELTA_INTERVAL`
seconds (the first text at once; what waits is flushed while the model is silent), cut to small
frames (:func:`boocode.chat.wire.sizes.delta_pieces`), and are saved every :data:`SAVE_INTERVAL`
seconds (a reloaded page shows them). Their HTML follows, rendered off the loop at a pace of its
own (:class:`boocode.chat.wire.live_markdown.LiveHtml`), and stops when the message is over.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine
from datetime import datetime
from typing import Any

from channels.db import database_sync_to_async

from boocode.chat.llm.client import Completion, ReasoningDelta, TextDelta
from boocode.chat.turn import conversations
from boocode.chat.wire.events import Emit
from boocode.chat.wire.live_markdown import LiveHtml
from boocode.chat.wire.sizes import delta_pieces, utf16_length

SAVE_INTERVAL = 0.25  # seconds between saves of the text being streamed
# Text arriving within this many seconds of the last frame waits and goes out with the next one:
# fewer frames for every open tab, no visible difference. The first text is never held back.
DELTA_INTERVAL = 0.03

db = database_sync_to_async


def _eager[T](coroutine: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
    """A task that runs ``coroutine`` now, up to its first real wait (saves a loop iteration)."""
    return asyncio.eager_task_factory(asyncio.get_running_loop(), coroutine)


class Answer:
    """The assistant message being streamed (see the module docstring); ``emit`` sends its frames."""

    def __init__(self, emit: Emit) -> None:
        self.emit = emit
        self.message_id: int | None = None  # the assistant message being streamed
        self.created_at: datetime | None = None
        self.parts: list[str] = []  # its text so far
        self.unsent: list[str] = []  # text not yet sent in a text_delta
        self.sent = 0  # UTF-16 length of the text sent so far
        self.thought: list[str] = []  # its thinking so far (reasoning_delta frames, stored apart)
        self.unsent_thought: list[str] = []
        self.sent_thought = 0  # UTF-16 length of the thinking sent so far
        self.live_html: LiveHtml | None = None  # its HTML for the pages while it streams (text_html)
        self.last_emit = 0.0
        self.stream_ended: float | None = None  # when the last model stream ended (time.monotonic())

    @property
    def text(self) -> str:
        return "".join(self.parts)

    @property
    def reasoning(self) -> str:
        """The thinking of the message being streamed, so far."""
        return "".join(self.thought)

    async def open(self, payload: dict[str, Any]) -> None:
        """Start streaming into the assistant message ``payload`` (just created)."""
        self.message_id, self.parts, self.unsent, self.sent = payload["id"], [], [], 0
        self.thought, self.unsent_thought, self.sent_thought = [], [], 0
        self.end_live_html()
        self.live_html = LiveHtml(payload["id"], lambda: self.text, self.emit)
        self.created_at = datetime.fromisoformat(payload["created_at"])
        self.last_emit = 0.0  # the first text goes out at once
        await self.emit({"type": "message_start", "message": payload})

    async def receive(
        self,
        stream: AsyncGenerator[TextDelta | ReasoningDelta | Completion],
        ready: Callable[[], Awaitable[None]],
    ) -> Completion:
        """Stream the model's ``stream`` into the open message; its :class:`Completion`.

        ``ready`` runs once the request is on its way and opens the message if none is open.
        """
        completion: Completion | None = None
        async with contextlib.aclosing(stream):
            # Each next event is awaited as a task: the request goes out while the message rows
            # are written, and text waiting for its frame is flushed while the model is silent.
            # The tasks start eagerly (the request is on its way before the first one is
            # awaited; an event already received costs no loop iteration). The generator must
            # be idle again before aclosing() closes it.
            upcoming = _eager(anext(stream))
            try:
                await ready()
                last_save = time.monotonic()
                while True:
                    if self.unsent or self.unsent_thought:
                        wait = DELTA_INTERVAL - (time.monotonic() - self.last_emit)
                        if wait > 0:
                            await asyncio.wait([upcoming], timeout=wait)
                        if not upcoming.done():
                            await self.flush()
                    try:
                        event = await upcoming
                    except StopAsyncIteration:
                        break
                    if isinstance(event, TextDelta | ReasoningDelta):
                        if isinstance(event, TextDelta):
                            self.parts.append(event.text)
                            self.unsent.append(event.text)
                        else:
                            self.thought.append(event.text)
                            self.unsent_thought.append(event.text)
                        if time.monotonic() - self.last_emit >= DELTA_INTERVAL:
                            await self.flush()
                        if time.monotonic() - last_save >= SAVE_INTERVAL:
                            await db(conversations.save_partial)(self.message_id, self.text, self.reasoning)
                            last_save = time.monotonic()
                    else:
                        completion = event
                        self.stream_ended = time.monotonic()  # the tool step begins (calls.execute)
                    upcoming = _eager(anext(stream))
            except BaseException:
                upcoming.cancel()
                await asyncio.wait([upcoming])
                if not upcoming.cancelled():
                    upcoming.exception()  # retrieved: the error that matters is the one raised here
                raise
            await self.flush()
        self.end_live_html()
        assert completion is not None  # stream_chat always ends with a Completion or raises
        return completion

    async def flush(self) -> None:
        """Send the thinking and the text not yet sent as one ``reasoning_delta`` and one
        ``text_delta`` (deltas are coalesced per DELTA_INTERVAL)."""
        if self.message_id is None:
            return
        if self.unsent_thought:
            thought = "".join(self.unsent_thought)
            self.unsent_thought.clear()
            self.last_emit = time.monotonic()
            for piece in delta_pieces(thought):
                offset = self.sent_thought
                self.sent_thought += utf16_length(piece)
                frame = {
                    "type": "reasoning_delta",
                    "message_id": self.message_id,
                    "offset": offset,
                    "text": piece,
                }
                await self.emit(frame)
        if not self.unsent:
            return
        text = "".join(self.unsent)
        self.unsent.clear()
        self.last_emit = time.monotonic()
        for piece in delta_pieces(text):  # a model may send megabytes at once: frames stay small
            offset = self.sent
            self.sent += utf16_length(piece)
            delta = {"type": "text_delta", "message_id": self.message_id, "offset": offset, "text": piece}
            await self.emit(delta)
        if self.live_html is not None:
            self.live_html.poke()

    def end_live_html(self) -> None:
        """The streamed message is over: no text_html after its final frame (which has its html)."""
        if self.live_html is not None:
            self.live_html.close()
            self.live_html = None
