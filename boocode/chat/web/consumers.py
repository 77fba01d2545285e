"""The chat websocket: ``/ws/conversations/<id>/``; frames are documented in docs/protocol.md.

The consumer only routes: it checks the user, joins the conversation's group, sends the
history, starts or cancels the turn task (never awaiting a turn itself, so ``cancel`` frames
get through) and relays group events. Closing the socket leaves the turn running.
``regenerate`` and ``edit`` are checked here (a clear error frame, nothing started) and then
run as turns of their own kind (:mod:`boocode.chat.turn.loop`). Every connect asks for a check of
the model server, and open sockets keep it checked in the background (:mod:`boocode.chat.llm.status`).

The socket lives only as long as the session that opened it (:mod:`boocode.security.sessions`):
it joins its user's group, re-checks the session before every incoming frame and every
``SESSION_CHECK_INTERVAL`` seconds, and closes with 4401 once the session has ended (logout,
password change, deactivation, expiry).
"""

from __future__ import annotations

import asyncio
import json
import logging
from functools import partial
from typing import Any

from autobahn.exception import Disconnected
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.db import DatabaseError

from boocode.chat.llm import status
from boocode.chat.llm.status import status_payload
from boocode.chat.storable import text_problem
from boocode.chat.turn import conversations, prompt_insertion
from boocode.chat.turn.loop import MAX_MESSAGE_CHARS, Admission, TurnRequest
from boocode.chat.turn.registry import TurnInProgress, merge_live_text, registry
from boocode.chat.web.view_requests import ViewRequests
from boocode.chat.wire.attachments import BadAttachments, checked_attachments
from boocode.chat.wire.attachments import refs as attachment_refs
from boocode.chat.wire.events import group_emitter, group_name
from boocode.chat.wire.payloads import conversation_info, history_payload
from boocode.chat.wire.sizes import MAX_SENT_FRAME_BYTES, bounded_approval, bounded_message, encoded_size
from boocode.security import sessions
from mcpclient.runtime import STATUS_GROUP, people

logger = logging.getLogger(__name__)

MAX_FRAME_BYTES = 64 * 1024
# Server changes arrive at once through the mcp_status group; the periodic check (in memory,
# a frame only on change) also covers the model's state.
STATUS_INTERVAL = 1.0
# How old a read of the person's groups the status line may show servers by (mcpclient.runtime.people).
STATUS_GROUPS_AGE = 30.0
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
    ended = False  # closed (the session ended, or the client went away): nothing more goes out
    watching = False  # counted by status.watch() (the background model checks)
    unchecked = False  # the frame being handled is a message whose turn checks the session
    views: ViewRequests | None = None  # requests from the conversation's views (MCP Apps)

    async def connect(self) -> None:
        """Accept; close with 4401 (not logged in) or 4403 (not the owner), else join and send history."""
        # Accepting first lets the browser see the close code and stop reconnecting.
        await self.accept()
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        conversation_id = int(self.scope["url_route"]["kwargs"]["conversation_id"])
        if await database_sync_to_async(conversations.owned_conversation)(user.pk, conversation_id) is None:
            await self.close(code=CLOSE_FORBIDDEN)
            return
        self.conversation_id = conversation_id
        self.user_id = user.pk
        self.session_key = getattr(self.scope.get("session"), "session_key", None)
        self.views = ViewRequests(conversation_id, user.pk, self.send_json)
        # Join before reading the history: nothing emitted from now on can fall between the two.
        await self.channel_layer.group_add(group_name(conversation_id), self.channel_name)
        await self.channel_layer.group_add(STATUS_GROUP, self.channel_name)
        await self.channel_layer.group_add(sessions.user_group(user.pk), self.channel_name)
        (history, more), info = await database_sync_to_async(_history_and_info)(conversation_id)
        # The turn may run in another web process (Redis layer): it is asked for its live state.
        turn = await registry.state(conversation_id)
        if turn.settled:  # a dead process's turn was settled just now: show the settled rows
            (history, more), info = await database_sync_to_async(_history_and_info)(conversation_id)
        frame = {
            "type": "history",
            "conversation": conversation_id,
            "conversation_info": info,
            # The live text of a streamed answer can be any length: bounded again with it.
            "messages": [
                bounded_message(m)
                for m in merge_live_text(history, conversation_id, turn.live, turn.live_html)
            ],
            "more": more,  # older messages: GET /c/<id>/messages/?before=<first id>
            "running": turn.running,
            "turn_id": turn.turn_id,
            "elicitations": turn.elicitations,
            "progress": turn.progress,  # running calls' latest tool_progress
            "approvals": [bounded_approval(approval) for approval in turn.approvals],
        }
        await self.send_json(_within_frame(frame))
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
        if self.views is not None:
            self.views.close()
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
        # Every frame is checked against the session before it has any effect. A message's check
        # runs in its turn's first database hop (turn.Admission); an error frame waits for it.
        self.unchecked = text_data is not None and '"user_message"' in text_data
        try:
            await self._handle(text_data, bytes_data)
        finally:
            self.unchecked = False

    async def _handle(self, text_data: str | None, bytes_data: bytes | None) -> None:
        if not self.unchecked and not await self._session_current():
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
            "approval_answer": self._approval_answer,
            "regenerate": self._regenerate,
            "edit": self._edit,
            "prompt": self._prompt,
            "view_request": self._view_request,
        }.get(content["type"])
        if handler is None:
            await self._error("unknown_type", f'Unknown frame type "{content["type"][:50]}".')
            return
        if self.unchecked and handler != self._user_message:  # the text only mentioned a message
            self.unchecked = False
            if not await self._session_current():
                await self._end_session()
                return
        await handler(content)

    async def _user_message(self, content: dict[str, Any]) -> None:
        assert self.conversation_id is not None
        text = await self._checked_text(content, "user_message")
        if text is None:
            return
        try:
            attached = tuple(checked_attachments(content.get("attachments")))
        except BadAttachments as exc:
            await self._error("bad_attachments", str(exc))
            return
        assert self.user_id is not None  # a socket is connected only for a person
        admission = Admission(partial(sessions.session_is_current, self.session_key, self.user_id))
        request = TurnRequest(
            self.conversation_id, text, user_id=self.user_id, attachments=attached, admission=admission
        )
        if await self._start(request):
            verdict = await admission.verdict
            if not (await self._session_current() if verdict is None else verdict):
                await self._end_session()

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
        if await database_sync_to_async(conversations.regenerate_target)(self.conversation_id) is None:
            await self._error("nothing_to_regenerate", "There is no message to answer again yet.")
            return
        await self._start(TurnRequest(self.conversation_id, "", user_id=self.user_id, kind="regenerate"))

    async def _edit(self, content: dict[str, Any]) -> None:
        """Replace a user message (and everything after it) with new text, and answer it.

        ``attachments`` as in ``user_message``; without it the message keeps the ones it had.
        """
        assert self.conversation_id is not None
        text = await self._checked_text(content, "edit")
        if text is None:
            return
        try:  # absent or null: the message keeps its attachments; a list replaces them
            given = content.get("attachments")
            attached = None if given is None else tuple(checked_attachments(given))
        except BadAttachments as exc:
            await self._error("bad_attachments", str(exc))
            return
        if registry.running(self.conversation_id):
            await self._error("turn_in_progress", TURN_IN_PROGRESS)
            return
        message_id = content.get("message_id")
        if not await database_sync_to_async(conversations.is_editable)(self.conversation_id, message_id):
            await self._error("unknown_message", "No current user message with this id in this conversation.")
            return
        if attached is None:
            kept = database_sync_to_async(conversations.stored_attachments)
            attached = tuple(attachment_refs(await kept(self.conversation_id, message_id)))
        await self._start(
            TurnRequest(
                self.conversation_id,
                text,
                user_id=self.user_id,
                kind="edit",
                edit_id=message_id,
                attachments=attached,
            )
        )

    async def _prompt(self, content: dict[str, Any]) -> None:
        """Insert an MCP prompt's messages and answer them (the frame checked by :mod:`.prompt_insertion`)."""
        assert self.conversation_id is not None
        try:
            hub = await prompt_insertion.running_hub(self.user_id)
            request = prompt_insertion.checked_frame(content, hub, self.user_id)
        except prompt_insertion.BadPrompt as exc:
            await self._error(exc.code, str(exc))
            return
        await self._start(
            TurnRequest(self.conversation_id, "", user_id=self.user_id, kind="prompt", prompt=request)
        )

    async def _view_request(self, content: dict[str, Any]) -> None:
        """A view's request to its server (MCP Apps); the reply comes to this socket only."""
        assert self.views is not None
        await self.views.handle(content)

    async def _start(self, request: TurnRequest) -> bool:
        """Start the turn; ``False`` (and an error frame) when one already runs here."""
        try:
            await registry.begin(request, group_emitter(request.conversation_id))
        except TurnInProgress:
            await self._error("turn_in_progress", TURN_IN_PROGRESS)
            return False
        return True

    async def _cancel(self, content: dict[str, Any]) -> None:
        assert self.conversation_id is not None
        if not await registry.stop(self.conversation_id):
            await self._error("not_running", "No turn is running.")

    async def _elicitation_answer(self, content: dict[str, Any]) -> None:
        """The person's answer to a form of this conversation (the socket's user owns it)."""
        await self._answer(content)

    async def _answer(self, content: dict[str, Any]) -> None:
        """An answer frame, applied in the process running the turn (errors may come back later)."""
        assert self.conversation_id is not None
        error = await registry.answer(
            self.conversation_id, content, user_id=self.user_id, reply_to=self.channel_name
        )
        if error is not None:
            await self._error(error.code, error.message, form_id=error.id, fields=error.fields)

    async def chat_answer_error(self, message: dict[str, Any]) -> None:
        """The turn's process refused an answer this socket sent (routed back over the layer)."""
        fields = message.get("fields")
        await self._error(
            str(message["code"]),
            str(message["message"]),
            form_id=message.get("id"),
            fields=fields if isinstance(fields, dict) else None,
        )

    async def _approval_answer(self, content: dict[str, Any]) -> None:
        """The owner's decision on a tool call of this conversation waiting for approval."""
        await self._answer(content)

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

    async def send_json(self, content: Any, close: bool = False) -> None:
        """Send a frame; a socket the client has just closed drops it quietly.

        A frame relayed between the client closing and Daphne telling this consumer so would
        raise (and log a traceback) for a page that is simply gone; its disconnect follows.

        Frames are bounded where they are built (:mod:`boocode.chat.wire.sizes`); one that still
        passes :data:`~boocode.chat.wire.sizes.MAX_SENT_FRAME_BYTES` would make Daphne close the
        socket (1011), so an ``error`` frame (``frame_too_large``) goes in its place: the page
        reconnects and reads the conversation again.
        """
        text = await self.encode_json(content)
        if len(text) > MAX_SENT_FRAME_BYTES:
            kind = content.get("type") if isinstance(content, dict) else None
            limit = MAX_SENT_FRAME_BYTES
            logger.warning("a %s frame of %d bytes was not sent (limit %d)", kind, len(text), limit)
            text = await self.encode_json(
                {
                    "type": "error",
                    "code": "frame_too_large",
                    "message": f"Something here was too large to show ({len(text):,} bytes); reloading.",
                }
            )
        try:
            await self.send(text_data=text, close=close)
        except Disconnected:
            self.ended = True

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

    async def _error(
        self, code: str, text: str, *, form_id: str | None = None, fields: dict[str, str] | None = None
    ) -> None:
        if self.unchecked:  # a message refused before its turn checked the session: checked now
            self.unchecked = False
            if not await self._session_current():
                await self._end_session()
                return
        frame: dict[str, Any] = {"type": "error", "code": code, "message": text}
        if form_id is not None:
            frame["id"] = form_id  # the form the answer was for (it stays open)
        if fields:
            frame["fields"] = fields  # what is wrong with each of its fields, by name
        await self.send_json(frame)

    async def _send_status(self, *, force: bool = False) -> None:
        user = self.scope.get("user")
        user_id = getattr(user, "pk", None)
        await people.refresh(user_id, max_age=STATUS_GROUPS_AGE)  # the servers their groups allow
        status = status_payload(user_id, staff=bool(user is not None and user.is_staff))
        if force or status != self.last_status:
            self.last_status = status
            await self.send_json(status)

    async def _status_loop(self) -> None:
        while True:
            await asyncio.sleep(STATUS_INTERVAL)
            await self._send_status()


def _within_frame(history: dict[str, Any]) -> dict[str, Any]:
    """The history frame, its oldest messages left to the older pages (``more``) while the whole
    frame would pass :data:`~boocode.chat.wire.sizes.MAX_SENT_FRAME_BYTES` (the open forms and
    approvals it carries count too, and cannot be read elsewhere)."""
    messages = history["messages"]
    excess = encoded_size(history) - MAX_SENT_FRAME_BYTES
    dropped = 0
    while excess > 0 and dropped < len(messages) - 1:
        excess -= encoded_size(messages[dropped]) + 2  # (the separator)
        dropped += 1
    if not dropped:
        return history
    return {**history, "messages": messages[dropped:], "more": True}


def _history_and_info(conversation_id: int) -> tuple[tuple[list[dict[str, Any]], bool], dict[str, Any]]:
    """The history frame's messages (and whether older ones exist) and conversation object,
    read in one unit of work."""
    return history_payload(conversation_id), conversation_info(conversation_id)
