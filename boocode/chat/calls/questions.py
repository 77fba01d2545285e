"""Questions in the conversation: an MCP server's elicitation (a form or a link), shown and answered.

The chat's side of elicitation (the protocol's side: :mod:`mcpclient.engine.elicitation`). A
turn runs each tool call inside ``asking`` with an asker made by :func:`asker_for` (the
conversation, the tool call's row, the turn's ``emit``). When the server elicits,
:meth:`Forms.ask` registers a :class:`PendingForm` under a random id, emits an ``elicitation``
frame to the conversation's group (every open tab shows the form, or the link in URL mode)
and waits. It ends in exactly one way, announced with an ``elicitation_end``
frame:

* the person answers over the websocket (:meth:`Forms.answer`, called by the consumer, which
  has checked that the socket's user owns the conversation): ``accepted`` (the content was
  checked against the form, defaults applied), ``declined`` or ``cancelled``;
* nobody answers within ``BOOCODE_ELICITATION_TIMEOUT`` seconds: ``expired``, the server is
  told ``decline``;
* the turn is stopped (:meth:`Forms.stop`): ``stopped``, the server is told ``cancel``;
* the tool call ends first (the server gave up, the call was abandoned): the wait is cancelled,
  ``withdrawn``.

A link (URL mode) the person opens is answered ``accept`` at once (that is their consent, per
the spec) and then waits for the server, announced with ``elicitation_waiting``: it ends
``completed`` (the server reported completion, or the retried 2026-07-28 call returned),
``done`` (the person said they finished), ``expired`` (``BOOCODE_ELICITATION_TIMEOUT`` again),
``stopped`` or ``withdrawn``; :meth:`Forms._follow` runs that wait in a task of its own.

Pending forms live in this process's memory, like the running turn they belong to; a
reconnecting page gets them in its ``history`` frame (:meth:`Forms.pending`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import secrets
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from boocode.chat.ledger import metrics as chat_metrics
from boocode.chat.wire.events import Emit
from mcpclient.core.elicitation import Answer, Asker, Link
from mcpclient.core.elicitation_form import AnswerError, Form, complete_answer

logger = logging.getLogger(__name__)

ACTIONS = ("accept", "decline", "cancel")
OUTCOMES = {"accept": "accepted", "decline": "declined", "cancel": "cancelled"}
WAITING_ACTIONS = ("done",)  # a link the person opened, while it waits for the server


def _new_future() -> asyncio.Future[Answer]:
    return asyncio.get_running_loop().create_future()


class UnknownForm(LookupError):
    """No open form with this id in this conversation (never existed, answered, or someone else's)."""


class BadAnswer(ValueError):
    """The answer does not fit the form; ``str()`` says what to fix (the form stays open), and
    ``fields`` what is wrong with each field, by name (shown at the field)."""

    def __init__(self, message: str, fields: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.fields = fields or {}


@dataclass
class PendingForm:
    """A form waiting for the person."""

    id: str
    conversation_id: int
    call_id: int | None  # the ToolCall row the form belongs to
    tool: str  # the prefixed tool name, as the page shows it
    form: Form | Link
    expires_at: dt.datetime
    server: str = ""
    reply: asyncio.Future[Answer] = field(repr=False, default_factory=_new_future)
    outcome: str = ""
    waiting: bool = False  # a link the person opened, waiting for the server

    def payload(self) -> dict[str, Any]:
        """The ``elicitation`` object of the frames (docs/protocol.md)."""
        common = {
            "id": self.id,
            "call_id": self.call_id,
            "tool": self.tool,
            "server": self.server,
            "message": self.form.message,
            "expires_at": self.expires_at.isoformat(),
        }
        if isinstance(self.form, Link):
            state = "waiting" if self.waiting else "asking"
            link = {"url": self.form.url, "host": self.form.host, "required": self.form.required}
            return {**common, "mode": "url", "state": state, **link}
        return {**common, "mode": "form", "fields": [made.payload() for made in self.form.fields]}


class Forms:
    """The open forms of this process, by id."""

    def __init__(self) -> None:
        self._open: dict[str, PendingForm] = {}
        self._ending: set[asyncio.Task[None]] = set()

    async def ask(
        self,
        form: Form | Link,
        *,
        conversation_id: int,
        call_id: int | None,
        tool: str,
        emit: Emit,
        server: str = "",
    ) -> Answer:
        """Show ``form`` (or a link) in the conversation and wait for the person (module docstring)."""
        timeout = float(settings.ELICITATION_TIMEOUT)
        pending = PendingForm(
            id=secrets.token_urlsafe(16),
            conversation_id=conversation_id,
            call_id=call_id,
            tool=tool,
            form=form,
            expires_at=dt.datetime.now(dt.UTC) + dt.timedelta(seconds=timeout),
            server=server,
        )
        self._open[pending.id] = pending
        try:
            await emit({"type": "elicitation", "elicitation": pending.payload()})
            async with asyncio.timeout(timeout):
                reply = await asyncio.shield(pending.reply)
        except TimeoutError:
            pending.outcome = "expired"
            reply = Answer("decline")
        except asyncio.CancelledError:
            pending.outcome = pending.outcome or "withdrawn"
            self._end_later(self._forget(pending), emit)
            raise
        if isinstance(form, Link) and reply.action == "accept":
            await self._wait_for_server(pending, form, emit, timeout)
            return reply
        logger.info("conversation %s: form %s for %s %s", conversation_id, pending.id, tool, pending.outcome)
        end = self._forget(pending)
        try:
            await emit(end)  # before the answer goes back, so the frame precedes the tool's result
        except asyncio.CancelledError:
            self._end_later(end, emit)
            raise
        return reply

    def _forget(self, pending: PendingForm) -> dict[str, Any]:
        """Close ``pending``; the ``elicitation_end`` frame that says how."""
        self._open.pop(pending.id, None)
        if not pending.reply.done():
            pending.reply.cancel()
        return {"type": "elicitation_end", "id": pending.id, "outcome": pending.outcome or "withdrawn"}

    def _end_later(self, frame: dict[str, Any], emit: Emit) -> None:
        """Send ``frame`` from a task of its own: the asking task is being cancelled."""
        self._in_background(emit(frame))

    def _in_background(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._ending.add(task)
        task.add_done_callback(self._ending.discard)

    async def _wait_for_server(self, pending: PendingForm, link: Link, emit: Emit, timeout: float) -> None:
        """The person opened the link: tell every tab, then follow the link to its end in a task."""
        pending.waiting = True
        pending.expires_at = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=timeout)
        waiting = {
            "type": "elicitation_waiting",
            "id": pending.id,
            "expires_at": pending.expires_at.isoformat(),
        }
        self._in_background(self._follow(pending, link, emit, timeout, waiting))

    async def _follow(
        self, pending: PendingForm, link: Link, emit: Emit, timeout: float, waiting: dict[str, Any]
    ) -> None:
        """Wait (at most ``timeout`` s) for the server to finish ``link``; announce how it ended."""
        await emit(waiting)
        try:
            async with asyncio.timeout(timeout):
                await asyncio.shield(link.finished)
        except TimeoutError:
            link.finish("expired")
        pending.outcome = link.finished.result()
        logger.info(
            "conversation %s: link %s for %s %s",
            pending.conversation_id,
            pending.id,
            pending.tool,
            pending.outcome,
        )
        await emit(self._forget(pending))

    def is_open(self, conversation_id: int, form_id: Any) -> bool:
        """Whether ``form_id`` is an open form of ``conversation_id`` in this process."""
        pending = self._open.get(form_id) if isinstance(form_id, str) else None
        return pending is not None and pending.conversation_id == conversation_id

    def answer(self, conversation_id: int, form_id: Any, action: Any, content: Any) -> None:
        """Settle an open form of ``conversation_id`` with the person's answer.

        Raises :class:`UnknownForm` for an id that is not open in this conversation and
        :class:`BadAnswer` for an unknown action or content that does not fit the form (the
        form stays open, nothing is sent to the server).
        """
        pending = self._open.get(form_id) if isinstance(form_id, str) else None
        if pending is None or pending.conversation_id != conversation_id:
            raise UnknownForm(form_id)
        if pending.waiting and isinstance(pending.form, Link):
            if action in ACTIONS:
                raise UnknownForm(form_id)  # answered already (from this tab or another)
            if action not in WAITING_ACTIONS:
                raise BadAnswer(f'The page was opened; "action" can only be {", ".join(WAITING_ACTIONS)} now')
            pending.form.finish("done")
            return
        if pending.reply.done():
            raise UnknownForm(form_id)
        if action not in ACTIONS:
            raise BadAnswer(f'"action" must be one of {", ".join(ACTIONS)}')
        if isinstance(pending.form, Link):
            content = None  # URL mode: the server's page gets the data, never this client
        elif action == "accept":
            try:
                content = complete_answer(pending.form, content)
            except AnswerError as exc:
                raise BadAnswer(
                    "The answer does not fit the form: " + "; ".join(exc.problems), exc.fields
                ) from None
        else:
            content = None
        pending.outcome = OUTCOMES[action]
        pending.reply.set_result(Answer(action, content))

    def stop(self, conversation_id: int) -> None:
        """The conversation's turn is stopping: its open forms are answered ``cancel``, its links end."""
        for pending in list(self._open.values()):
            if pending.conversation_id != conversation_id:
                continue
            if pending.waiting and isinstance(pending.form, Link):
                pending.form.finish("stopped")
            elif not pending.reply.done():
                pending.outcome = "stopped"
                pending.reply.set_result(Answer("cancel"))

    def pending(self, conversation_id: int) -> list[dict[str, Any]]:
        """The open forms of a conversation, oldest first (for the ``history`` frame)."""
        mine = (p for p in self._open.values() if p.conversation_id == conversation_id)
        return [p.payload() for p in mine if p.waiting or not p.reply.done()]

    def waiting(self) -> int:
        """How many forms and links of this process wait for a person (``boocode_questions_waiting``)."""
        return sum(1 for p in list(self._open.values()) if p.waiting or not p.reply.done())


forms = Forms()
chat_metrics.QUESTIONS_WAITING.set_function(forms.waiting)


def asker_for(conversation_id: int, call: dict[str, Any], emit: Emit) -> Asker:
    """The asker of one tool call of a turn: its forms and links go under the call's card."""

    async def ask(form: Form | Link) -> Answer:
        return await forms.ask(
            form,
            conversation_id=conversation_id,
            call_id=call.get("id"),
            tool=str(call.get("name", form.tool)),
            emit=emit,
            server=str(call.get("server") or ""),
        )

    return ask
