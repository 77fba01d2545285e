"""The chat websocket: ``/ws/conversations/<id>/``; frames are documented in docs/protocol.md.

The consumer only routes: it checks the user, joins the conversation's group, sends the
history, starts or cancels the turn task (never awaiting a turn itself, so ``cancel`` frames
get through) and relays group events. Closing the socket leaves the turn running.
``regenerate`` and ``edit`` are checked here (a clear error frame, nothing started) and then
run as turns of their own kind (:mod:`boocode.chat.turns`). Every connect asks for a check of
the model server, and open sockets keep it checked in the background (:mod:`boocode.chat.status`).

The socket lives only as long as the session that opened it (:mod:`boocode.security.sessions`):
it joins its user's group, re-checks the session before every incoming frame and every
``SESSION_CHECK_INTERVAL`` seconds, and closes with 4401 once the session has ended (logout,
password change, deactivation, expiry).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.db import DatabaseError

from boocode.chat import services, status
from boocode.chat.elicitations import BadAnswer, UnknownForm, forms
from boocode.chat.events import group_emitter, group_name
from boocode.chat.status import status_payload
from boocode.chat.text import text_problem
from boocode.chat.turns import MAX_MESSAGE_CHARS, TurnInProgress, TurnRequest, merge_live_text, registry
from boocode.security import sessions
from mcpclient.runtime import STATUS_GROUP

logger = logging.getLogger(__name__)

MAX_FRAME_BYTES = 64 * 1024
# Server changes arrive at once through the mcp_status group; the periodic check (in memory,
# a frame only on change) also covers the model's state.
STATUS_INTERVAL = 1.0
# Logout, password changes and deactivation close sockets at once (channel-layer events);
# this periodic check catches session expiry on a socket that sends nothing.
SESSION_CHECK_INTERVAL = 30.0
CLOSE_UNAUTHENTICATED = 4401  # not logged in, or the session ended while the socket was open
CLOSE_FORBIDDEN = 4403
TURN_IN_PROGRESS = "A turn is already running here; stop it or wait for it."
# The session check runs on the loop's worker threads: it never waits behind turns' writes.
session_is_current = database_sync_to_async(sessions.session_is_current, thread_sensitive=False)


class ChatConsumer(AsyncJsonWebsocketConsumer):
    """One browser tab on one conversation."""

    conversation_id: int | None = None
    status_task: asyncio.Task[None] | None = None
    last_status: dict[str, Any] | None = None
    user_id: int | None = None
    session_key: str | None = None
    session_task: asyncio.Task[None] | None = None
    ended = False  # closed because the session ended: nothing more goes out
    watching = False  # counted by status.watch() (the background model checks)

    async def connect(self) -> None:
        """Accept; close with 4401 (not logged in) or 4403 (not the owner), else join and send history."""
        # Accepting first lets the browser see the close code and stop reconnecting.
        await self.accept()
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        conversation_id = int(self.scope["url_route"]["kwargs"]["conversation_id"])
        if await database_sync_to_async(services.owned_conversation)(user.pk, conversation_id) is None:
            await self.close(code=CLOSE_FORBIDDEN)
            return
        self.conversation_id = conversation_id
        self.user_id = user.pk
        self.session_key = getattr(self.scope.get("session"), "session_key", None)
        # Join before reading the history: nothing emitted from now on can fall between the two.
        await self.channel_layer.group_add(group_name(conversation_id), self.channel_name)
        await self.channel_layer.group_add(STATUS_GROUP, self.channel_name)
        await self.channel_layer.group_add(sessions.user_group(user.pk), self.channel_name)
        history, info = await database_sync_to_async(_history_and_info)(conversation_id)
        await self.send_json(
            {
                "type": "history",
                "conversation": conversation_id,
                "conversation_info": info,
                "messages": merge_live_text(history, conversation_id),
                "running": registry.running(conversation_id),
                "turn_id": registry.turn_id(conversation_id),
                "elicitations": forms.pending(conversation_id),
            }
        )
        await self._send_status()
        self.status_task = asyncio.create_task(self._status_loop())
        self.session_task = asyncio.create_task(self._session_loop())
        # The status line tells the truth after a reconnect: the model server is asked again now.
        status.watch()
        self.watching = True
        status.check_model_soon()

    async def disconnect(self, code: int) -> None:
        """Leave the groups; the turn (if any) keeps running."""
        for task in (self.status_task, self.session_task):
            if task is not None:
                task.cancel()
        if self.watching:
            self.watching = False
            status.unwatch()
        if self.conversation_id is not None:
            await self.channel_layer.group_discard(group_name(self.conversation_id), self.channel_name)
            await self.channel_layer.group_discard(STATUS_GROUP, self.channel_name)
            if self.user_id is not None:
                await self.channel_layer.group_discard(sessions.user_group(self.user_id), self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """Check the session, size and JSON shape, then dispatch on ``type``; problems get an error frame."""
        if self.conversation_id is None:
            return
        if not await self._session_current():
            await self._end_session()
            return
        if text_data is None:
            await self._error("bad_frame", "Binary frames are not supported; send JSON text.")
            return
        if len(text_data) > MAX_FRAME_BYTES or len(text_data.encode()) > MAX_FRAME_BYTES:
            await self._error("too_large", f"Frames are limited to {MAX_FRAME_BYTES} bytes.")
            return
        try:
            content = json.loads(text_data)
        except ValueError:
            await self._error("bad_json", "The frame is not valid JSON.")
            return
        except RecursionError:  # 64 KB of "[" is valid-looking JSON too deep for the parser
            await self._error("bad_json", "The frame is nested too deeply.")
            return
        if not isinstance(content, dict) or not isinstance(content.get("type"), str):
            await self._error("bad_frame", 'Expected a JSON object with a string "type".')
            return
        handler = {
            "user_message": self._user_message,
            "cancel": self._cancel,
            "elicitation_answer": self._elicitation_answer,
            "regenerate": self._regenerate,
            "edit": self._edit,
        }.get(content["type"])
        if handler is None:
            await self._error("unknown_type", f'Unknown frame type "{content["type"][:50]}".')
            return
        await handler(content)

    async def _user_message(self, content: dict[str, Any]) -> None:
        assert self.conversation_id is not None
        text = await self._checked_text(content, "user_message")
        if text is None:
            return
        await self._start(TurnRequest(self.conversation_id, text, user_id=self.scope["user"].pk))

    async def _checked_text(self, content: dict[str, Any], frame: str) -> str | None:
        """The frame's ``text`` when it can be stored and sent, else None (the error is sent)."""
        text = content.get("text")
        if not isinstance(text, str) or not text.strip():
            await self._error("bad_frame", f'{frame} needs a non-empty string "text".')
            return None
        if len(text) > MAX_MESSAGE_CHARS:
            await self._error("too_long", f"Messages are limited to {MAX_MESSAGE_CHARS} characters.")
            return None
        problem = text_problem(text, "message")
        if problem is not None:
            await self._error("bad_text", problem)
            return None
        return text

    async def _regenerate(self, content: dict[str, Any]) -> None:
        """Answer the last user message again (what followed it is superseded by the turn)."""
        assert self.conversation_id is not None
        if registry.running(self.conversation_id):
            await self._error("turn_in_progress", TURN_IN_PROGRESS)
            return
        if await database_sync_to_async(services.regenerate_target)(self.conversation_id) is None:
            await self._error("nothing_to_regenerate", "There is no message to answer again yet.")
            return
        await self._start(TurnRequest(self.conversation_id, "", user_id=self.user_id, kind="regenerate"))

    async def _edit(self, content: dict[str, Any]) -> None:
        """Replace a user message (and everything after it) with new text, and answer it."""
        assert self.conversation_id is not None
        text = await self._checked_text(content, "edit")
        if text is None:
            return
        if registry.running(self.conversation_id):
            await self._error("turn_in_progress", TURN_IN_PROGRESS)
            return
        message_id = content.get("message_id")
        if not await database_sync_to_async(services.is_editable)(self.conversation_id, message_id):
            await self._error("unknown_message", "No current user message with this id in this conversation.")
            return
        await self._start(
            TurnRequest(self.conversation_id, text, user_id=self.user_id, kind="edit", edit_id=message_id)
        )

    async def _start(self, request: TurnRequest) -> None:
        try:
            registry.start(request, group_emitter(request.conversation_id))
        except TurnInProgress:
            await self._error("turn_in_progress", TURN_IN_PROGRESS)

    async def _cancel(self, content: dict[str, Any]) -> None:
        assert self.conversation_id is not None
        if not registry.cancel(self.conversation_id):
            await self._error("not_running", "No turn is running.")

    async def _elicitation_answer(self, content: dict[str, Any]) -> None:
        """The person's answer to a form of this conversation (the socket's user owns it)."""
        assert self.conversation_id is not None
        form_id = content.get("id")
        try:
            forms.answer(self.conversation_id, form_id, content.get("action"), content.get("content"))
        except UnknownForm:
            await self._error("unknown_elicitation", "No open form with this id in this conversation.")
        except BadAnswer as exc:
            await self._error("bad_answer", str(exc), form_id=form_id)

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Relay turn events and handle incoming frames directly; the rest goes through Channels.

        Channels closes stale database connections before every handler (a hop to the database
        thread) for handlers that use the ORM. Relaying a frame touches no database, and a turn
        relays dozens; an incoming frame's database work goes through ``database_sync_to_async``,
        which closes stale connections itself, before and after. The hop would only put a wait
        (behind other turns' writes) between a user's message and the model request.
        """
        if self.ended and message["type"] != "websocket.disconnect":
            return
        if message["type"] == "chat.event":
            await self.chat_event(message)
        elif message["type"] == "mcp.status":
            await self.mcp_status(message)
        elif message["type"] == "websocket.receive":
            await self.websocket_receive(message)
        else:
            await super().dispatch(message)

    async def chat_event(self, message: dict[str, Any]) -> None:
        """Relay a turn event from the group."""
        event = message["event"]
        if event.get("type") == "status":
            # The turn's status refresh: sent as this user may see it (errors only for staff).
            await self._send_status(force=True)
            return
        await self.send_json(event)

    async def mcp_status(self, message: dict[str, Any]) -> None:
        """A server changed state (admin toggle, crash, list_changed): update the status line now."""
        await self._send_status()

    async def session_ended(self, message: dict[str, Any]) -> None:
        """A logout: close if it ended this socket's session."""
        if message.get("session") == sessions.session_tag(self.session_key):
            await self._end_session()

    async def session_check(self, message: dict[str, Any]) -> None:
        """The user changed (password, active flag, deletion): close unless the session still holds."""
        if not await self._session_current():
            await self._end_session()

    async def _session_current(self) -> bool:
        return self.user_id is not None and await session_is_current(self.session_key, self.user_id)

    async def _end_session(self) -> None:
        """Stop relaying and close with 4401: the page then asks the user to log in again."""
        if self.ended:
            return
        self.ended = True
        for task in (self.status_task, self.session_task):
            if task is not None and task is not asyncio.current_task():
                task.cancel()
        await self.close(code=CLOSE_UNAUTHENTICATED)

    async def _session_loop(self) -> None:
        while True:
            await asyncio.sleep(SESSION_CHECK_INTERVAL)
            try:
                current = await self._session_current()
            except DatabaseError:  # a database outage is not a logout: check again next time
                logger.warning("could not check the session of a chat socket", exc_info=True)
                continue
            if not current:
                await self._end_session()
                return

    async def _error(self, code: str, text: str, *, form_id: str | None = None) -> None:
        frame: dict[str, Any] = {"type": "error", "code": code, "message": text}
        if form_id is not None:
            frame["id"] = form_id  # the form the answer was for (it stays open)
        await self.send_json(frame)

    async def _send_status(self, *, force: bool = False) -> None:
        user = self.scope.get("user")
        status = status_payload(staff=bool(user is not None and user.is_staff))
        if force or status != self.last_status:
            self.last_status = status
            await self.send_json(status)

    async def _status_loop(self) -> None:
        while True:
            await asyncio.sleep(STATUS_INTERVAL)
            await self._send_status()


def _history_and_info(conversation_id: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The history frame's messages and conversation object, read in one unit of work."""
    return services.history_payload(conversation_id), services.conversation_info(conversation_id)
