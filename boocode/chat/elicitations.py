"""Forms in the conversation: an MCP server's elicitation, shown to the person and answered.

Lifecycle
---------
A turn runs each tool call inside :func:`mcpclient.elicitation.asking` with an asker made by
:func:`asker_for` (the conversation, the tool call's row, the turn's ``emit``). When the
server elicits, :meth:`Forms.ask` registers a :class:`PendingForm` under a random id, emits an
``elicitation`` frame to the conversation's group (every open tab shows the form) and waits.
It ends in exactly one way, announced with an ``elicitation_end`` frame:

* the person answers over the websocket (:meth:`Forms.answer`, called by the consumer, which
  has checked that the socket's user owns the conversation): ``accepted`` (the content was
  checked against the form, defaults applied), ``declined`` or ``cancelled``;
* nobody answers within ``BOOCODE_ELICITATION_TIMEOUT`` seconds: ``expired``, the server is
  told ``decline``;
* the turn is stopped (:meth:`Forms.stop`): ``stopped``, the server is told ``cancel``;
* the tool call ends first (the server gave up, the call was abandoned): the wait is cancelled,
  ``withdrawn``.

Pending forms live in this process's memory, like the running turn they belong to; a
reconnecting page gets them in its ``history`` frame (:meth:`Forms.pending`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from mcpclient.elicitation import Answer, Asker
from mcpclient.elicitation_schema import AnswerError, Form, complete_answer

logger = logging.getLogger(__name__)

Emit = Callable[[dict[str, Any]], Awaitable[None]]  # as boocode.chat.turns.Emit (which imports this module)

ACTIONS = ("accept", "decline", "cancel")
OUTCOMES = {"accept": "accepted", "decline": "declined", "cancel": "cancelled"}


def _new_future() -> asyncio.Future[Answer]:
    return asyncio.get_running_loop().create_future()


class UnknownForm(LookupError):
    """No open form with this id in this conversation (never existed, answered, or someone else's)."""


class BadAnswer(ValueError):
    """The answer does not fit the form; ``str()`` says what to fix (the form stays open)."""


@dataclass
class PendingForm:
    """A form waiting for the person."""

    id: str
    conversation_id: int
    call_id: int | None  # the ToolCall row the form belongs to
    tool: str  # the prefixed tool name, as the page shows it
    form: Form
    expires_at: dt.datetime
    reply: asyncio.Future[Answer] = field(repr=False, default_factory=_new_future)
    outcome: str = ""

    def payload(self) -> dict[str, Any]:
        """The ``elicitation`` object of the frames (docs/protocol.md)."""
        return {
            "id": self.id,
            "call_id": self.call_id,
            "tool": self.tool,
            "message": self.form.message,
            "fields": [made.payload() for made in self.form.fields],
            "expires_at": self.expires_at.isoformat(),
        }


class Forms:
    """The open forms of this process, by id."""

    def __init__(self) -> None:
        self._open: dict[str, PendingForm] = {}
        self._ending: set[asyncio.Task[None]] = set()

    async def ask(
        self, form: Form, *, conversation_id: int, call_id: int | None, tool: str, emit: Emit
    ) -> Answer:
        """Show ``form`` in the conversation and wait for the person (see the module docstring)."""
        timeout = float(settings.ELICITATION_TIMEOUT)
        pending = PendingForm(
            id=secrets.token_urlsafe(16),
            conversation_id=conversation_id,
            call_id=call_id,
            tool=tool,
            form=form,
            expires_at=dt.datetime.now(dt.UTC) + dt.timedelta(seconds=timeout),
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
        task = asyncio.ensure_future(emit(frame))
        self._ending.add(task)
        task.add_done_callback(self._ending.discard)

    def answer(self, conversation_id: int, form_id: Any, action: Any, content: Any) -> None:
        """Settle an open form of ``conversation_id`` with the person's answer.

        Raises :class:`UnknownForm` for an id that is not open in this conversation and
        :class:`BadAnswer` for an unknown action or content that does not fit the form (the
        form stays open, nothing is sent to the server).
        """
        pending = self._open.get(form_id) if isinstance(form_id, str) else None
        if pending is None or pending.conversation_id != conversation_id or pending.reply.done():
            raise UnknownForm(form_id)
        if action not in ACTIONS:
            raise BadAnswer(f'"action" must be one of {", ".join(ACTIONS)}')
        if action == "accept":
            try:
                content = complete_answer(pending.form, content)
            except AnswerError as exc:
                raise BadAnswer("The answer does not fit the form: " + "; ".join(exc.problems)) from None
        else:
            content = None
        pending.outcome = OUTCOMES[action]
        pending.reply.set_result(Answer(action, content))

    def stop(self, conversation_id: int) -> None:
        """The conversation's turn is stopping: its open forms are answered ``cancel``."""
        for pending in list(self._open.values()):
            if pending.conversation_id == conversation_id and not pending.reply.done():
                pending.outcome = "stopped"
                pending.reply.set_result(Answer("cancel"))

    def pending(self, conversation_id: int) -> list[dict[str, Any]]:
        """The open forms of a conversation, oldest first (for the ``history`` frame)."""
        mine = (p for p in self._open.values() if p.conversation_id == conversation_id)
        return [p.payload() for p in mine if not p.reply.done()]


forms = Forms()


def asker_for(conversation_id: int, call: dict[str, Any], emit: Emit) -> Asker:
    """The asker of one tool call of a turn: its forms go to the conversation, under the call's card."""

    async def ask(form: Form) -> Answer:
        return await forms.ask(form, conversation_id=conversation_id, call_id=call.get("id"),
                               tool=str(call.get("name", form.tool)), emit=emit)

    return ask
