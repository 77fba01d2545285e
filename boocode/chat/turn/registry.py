"""The running turns: at most one per conversation, in this process and across web processes.

Start: :meth:`TurnRegistry.start` runs a :class:`~boocode.chat.turn.loop.Turn` as a task of this
process; a second start in the conversation raises :class:`TurnInProgress`. The turn is over
just before its ``turn_end`` goes out (its task still sends the conversation frame after it),
so a message sent the moment a tab hears ``turn_end`` starts the next turn. The task belongs to
no websocket. With the Redis channel layer the consumer uses :meth:`TurnRegistry.begin`, which
first takes the conversation's lock (:mod:`boocode.chat.turn.locks`), so no other process starts
one either, and gives it back just before ``turn_end`` goes out.

Across processes: ``state``, ``stop`` and ``answer`` reach a turn of another process over the
channel layer (its live text, questions, approvals and progress for a connecting tab; a cancel;
an answer). A turn whose process died is settled ``failed`` ("interrupted") by whichever
process sees it first: when a tab connects, and in a sweep every half lock TTL.

Stop: :meth:`TurnRegistry.cancel` first answers the turn's open questions ``cancel`` (so the
servers hear it), then cancels the task. A stopping server stops all its turns and waits at
most :data:`SHUTDOWN_WAIT` seconds, so their locks go back at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from dataclasses import dataclass, field
from functools import partial
from typing import Any, NamedTuple

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer

from boocode.chat.calls.approvals import BadDecision, UnknownApproval, approvals
from boocode.chat.calls.progress import running as running_progress
from boocode.chat.calls.questions import BadAnswer, UnknownForm, forms
from boocode.chat.turn.conversations import close_interrupted
from boocode.chat.turn.history import INTERRUPTED
from boocode.chat.turn.locks import Holder, SharedTurns, TurnLocked, shared_turns
from boocode.chat.turn.loop import Turn, TurnRequest
from boocode.chat.wire.events import Emit, group_emitter
from mcpclient.runtime.shutdown import on_server_shutdown

logger = logging.getLogger(__name__)

db = database_sync_to_async


# How a turn stopped because its process lost the conversation's lock ends (nobody cancelled it).
LOCK_LOST = (
    "Interrupted: this server lost the conversation's turn lock (Redis was unreachable, or the "
    "server stalled past BOOCODE_TURN_LOCK_TTL), so the turn was stopped rather than let two "
    "servers write to it. Send the message again."
)


class TurnInProgress(Exception):
    """A turn is already running in this conversation."""


_tasks: set[asyncio.Task[None]] = set()  # the registry's own background work (sweeps, lock releases)


def _background(coroutine: Coroutine[Any, Any, None]) -> None:
    task = asyncio.ensure_future(coroutine)
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)


class TurnRegistry:
    """The running turns of this process, one per conversation."""

    def __init__(self) -> None:
        self._tasks: dict[int, asyncio.Task[str]] = {}
        self._turns: dict[int, Turn] = {}
        self._cancelled: set[asyncio.Task[str]] = set()
        # Turns whose turn_end went out: over (a new one may start) while their task still
        # sends the conversation frame that follows it.
        self._ended: set[Turn] = set()
        self._swept: set[SharedTurns] = set()  # shared states whose sweep for dead turns runs

    def _live_task(self, conversation_id: int) -> asyncio.Task[str] | None:
        task = self._tasks.get(conversation_id)
        if task is None or task.done():
            return None
        try:
            if task.get_loop() is not asyncio.get_running_loop():
                return None  # left behind by a loop that is gone (tests run one loop per test)
        except RuntimeError:
            pass
        return task

    def running(self, conversation_id: int) -> bool:
        """Whether a turn is running in the conversation (over once its ``turn_end`` went out)."""
        live = self._live_task(conversation_id) is not None
        return live and self._turns.get(conversation_id) not in self._ended

    def turn_id(self, conversation_id: int) -> str | None:
        """The id of the running turn, if any."""
        turn = self._turns.get(conversation_id)
        return turn.request.turn_id if turn is not None and self.running(conversation_id) else None

    def start(self, request: TurnRequest, emit: Emit) -> asyncio.Task[str]:
        """Start a turn as a task on the running loop; raises :class:`TurnInProgress`."""
        conversation_id = request.conversation_id
        if self.running(conversation_id):
            raise TurnInProgress(conversation_id)

        async def emit_ending(event: dict[str, Any]) -> None:
            # Over before any tab hears turn_end: a message sent the moment it arrives is taken.
            if event.get("type") == "turn_end" and event.get("turn_id") == request.turn_id:
                self._ended.add(turn)
            await emit(event)

        turn = Turn(request, emit_ending)
        self._turns[conversation_id] = turn
        # Eager: the turn runs at once up to its first wait (the read before the model request).
        loop = asyncio.get_running_loop()
        task = asyncio.eager_task_factory(loop, turn.run(), name=f"turn-{conversation_id}")
        self._tasks[conversation_id] = task
        task.add_done_callback(partial(self._forget, conversation_id, turn))
        return task

    def _forget(self, conversation_id: int, turn: Turn, task: asyncio.Task[str]) -> None:
        if self._tasks.get(conversation_id) is task:
            del self._tasks[conversation_id]
            self._turns.pop(conversation_id, None)
        self._cancelled.discard(task)
        self._ended.discard(turn)

    def cancel(self, conversation_id: int, reason: str = "") -> bool:
        """Ask the running turn to stop; ``False`` if none runs. Repeated calls are harmless.

        Without ``reason`` the turn ends ``stopped`` (a person stopped it); with one it ends
        ``failed`` and the reason is what its message and unfinished calls say.
        """
        task = self._live_task(conversation_id)
        if task is None or not self.running(conversation_id):
            return False
        turn = self._turns.get(conversation_id)
        if reason and turn is not None and not turn.interrupted:
            turn.interrupted = reason
        if task not in self._cancelled:
            self._cancelled.add(task)
            forms.stop(conversation_id)  # before the calls are cancelled: the servers hear "cancel"
            task.cancel()
        return True

    async def wait(self, conversation_id: int) -> None:
        """Wait until the conversation's turn (if any) has ended (bound it with ``asyncio.timeout``)."""
        task = self._live_task(conversation_id)
        if task is not None:
            await asyncio.wait([task])

    def live_text(self, conversation_id: int) -> tuple[int, str] | None:
        """``(message id, text so far)`` of the message being streamed, if any."""
        turn = self._turns.get(conversation_id)
        if turn is None or turn.answer.message_id is None or not self.running(conversation_id):
            return None
        return turn.answer.message_id, turn.answer.text

    def live_html(self, conversation_id: int) -> dict[str, Any] | None:
        """The HTML sent so far of the message being streamed (its ``text_html``), if any."""
        turn = self._turns.get(conversation_id)
        if turn is None or turn.answer.live_html is None or not self.running(conversation_id):
            return None
        live_html = turn.answer.live_html
        return live_html.state() if live_html.message_id == turn.answer.message_id else None

    # --- across processes (Redis channel layer; see boocode.chat.turn.locks) ----------------------

    def _shared(self) -> SharedTurns | None:
        """The lock and control channel shared with other processes; None in the embedded mode."""
        shared = shared_turns(self._control)
        if shared is not None and shared not in self._swept:
            self._swept.add(shared)
            shared.on_lost(lambda conversation_id: self.cancel(conversation_id, LOCK_LOST))
            _background(self._sweep(shared))
            # Ctrl-C / SIGTERM: stop this process's turns so their locks go back at once
            # (otherwise the other processes would wait for the TTL and call them interrupted).
            on_server_shutdown(self.stop_all)
        return shared

    async def stop_all(self) -> None:
        """Stop every turn of this process and wait (at most :data:`SHUTDOWN_WAIT`) for them to end."""
        tasks = [task for key in list(self._tasks) if (task := self._live_task(key)) is not None]
        for conversation_id in list(self._tasks):
            self.cancel(conversation_id)
        if tasks:
            await asyncio.wait(tasks, timeout=SHUTDOWN_WAIT)

    async def begin(self, request: TurnRequest, emit: Emit) -> asyncio.Task[str]:
        """:meth:`start` after taking the conversation's lock across processes (Redis layer only).

        Raises :class:`TurnInProgress` when a turn runs here or in another process. A lock left
        by a process that died mid-turn is taken over: that turn is settled first. The lock is
        given back just before ``turn_end`` goes out, so a tab may start the next turn at once.
        """
        conversation_id = request.conversation_id
        shared = self._shared()
        if shared is None:
            return self.start(request, emit)
        if self.running(conversation_id):
            raise TurnInProgress(conversation_id)
        try:
            claim = await shared.acquire(conversation_id, request.turn_id)
        except TurnLocked:
            raise TurnInProgress(conversation_id) from None
        released = False

        async def release() -> None:
            nonlocal released
            if not released:
                released = True
                await shared.release(conversation_id, claim, request.turn_id)

        async def emit_releasing(event: dict[str, Any]) -> None:
            if event.get("type") == "turn_end" and event.get("turn_id") == request.turn_id:
                try:
                    await release()
                except Exception:  # Redis away: the lock expires after its TTL; the tabs still hear
                    logger.exception("conversation %s: could not give the turn lock back", conversation_id)
            await emit(event)

        try:
            if claim.interrupted:
                await self._settle(conversation_id, claim.interrupted)
            task = self.start(request, emit_releasing)
        except BaseException:
            await release()
            raise
        task.add_done_callback(lambda _task: _background(release()))
        return task

    async def state(self, conversation_id: int) -> TurnState:
        """The conversation's turn as a connecting tab needs it, wherever it runs.

        A turn of another process is asked for its live text, open forms, approvals and progress
        over the channel layer; a conversation whose turn's process died is settled now.
        """
        shared = None if self.running(conversation_id) else self._shared()
        if shared is None:
            return self._local_state(conversation_id)
        holder = await shared.holder(conversation_id)
        if holder is None:
            return TurnState(settled=await self._settle_dead(shared, conversation_id))
        if holder.turn_id.startswith(SETTLING):
            return TurnState()
        reply = await shared.request(
            holder.channel, {"type": "turn.snapshot", "conversation": conversation_id}, SNAPSHOT_TIMEOUT
        )
        if reply is None:  # the owner is busy or dying: the stored text and running state
            return TurnState(running=True, turn_id=holder.turn_id)
        live = reply.get("live")
        return TurnState(
            running=bool(reply.get("running")),
            turn_id=reply.get("turn_id"),
            live=(live[0], live[1]) if live else None,
            live_html=reply.get("live_html") if live else None,
            elicitations=reply.get("elicitations") or [],
            progress=reply.get("progress") or [],
            approvals=reply.get("approvals") or [],
        )

    def _local_state(self, conversation_id: int) -> TurnState:
        return TurnState(
            running=self.running(conversation_id),
            turn_id=self.turn_id(conversation_id),
            live=self.live_text(conversation_id),
            live_html=self.live_html(conversation_id),
            elicitations=forms.pending(conversation_id),
            progress=running_progress(conversation_id),
            approvals=approvals.pending(conversation_id),
        )

    async def stop(self, conversation_id: int) -> bool:
        """:meth:`cancel`, also of a turn running in another process; ``False`` if none runs."""
        if self.cancel(conversation_id):
            return True
        holder = await self._remote_holder(conversation_id)
        if holder is None:
            return False
        await holder[0].send(holder[1].channel, {"type": "turn.cancel", "conversation": conversation_id})
        return True

    async def answer(
        self, conversation_id: int, frame: dict[str, Any], *, user_id: int | None, reply_to: str
    ) -> RefusedAnswer | None:
        """Apply an ``elicitation_answer`` or ``approval_answer`` frame where the turn runs.

        Here: why it was refused (the error frame to send back), or None. In another process the
        frame goes to it with the same checks, and an error comes back to ``reply_to`` as a
        ``chat.answer_error`` message.
        """
        # A view's call (MCP Apps) asks in the process of the socket that carried it, turn or not.
        here = self.running(conversation_id) or open_here(conversation_id, frame)
        holder = None if here else await self._remote_holder(conversation_id)
        if holder is None:
            return answer_here(conversation_id, frame, user_id)
        message = {
            "type": "turn.answer",
            "conversation": conversation_id,
            "frame": frame,
            "user_id": user_id,
            "reply_to": reply_to,
        }
        await holder[0].send(holder[1].channel, message)
        return None

    async def _remote_holder(self, conversation_id: int) -> tuple[SharedTurns, Holder] | None:
        shared = self._shared()
        if shared is None:
            return None
        holder = await shared.holder(conversation_id)
        if holder is None or holder.turn_id.startswith(SETTLING):
            return None
        return shared, holder

    async def _control(self, message: dict[str, Any]) -> None:
        """A message from another process about a turn of this one (see :mod:`boocode.chat.turn.locks`)."""
        conversation_id = message.get("conversation")
        if not isinstance(conversation_id, int):
            return
        kind = message.get("type")
        if kind == "turn.cancel":
            self.cancel(conversation_id)
        elif kind == "turn.snapshot" and isinstance(message.get("reply"), str):
            state = self._local_state(conversation_id)
            answer = {"type": "turn.reply", "request": message.get("request"), **state.wire()}
            await get_channel_layer().send(message["reply"], answer)
        elif kind == "turn.answer" and isinstance(message.get("frame"), dict):
            error = answer_here(conversation_id, message["frame"], message.get("user_id"))
            if error is not None and isinstance(message.get("reply_to"), str):
                await get_channel_layer().send(
                    message["reply_to"], {"type": "chat.answer_error", **error._asdict()}
                )

    async def _settle(self, conversation_id: int, turn_id: str) -> None:
        """Settle what a dead process's turn left (under the lock) and end that turn in every tab."""
        await db(close_interrupted)(conversation_id)
        logger.warning(
            "conversation %s: turn %s was interrupted by a process that died", conversation_id, turn_id
        )
        end = {"type": "turn_end", "turn_id": turn_id, "status": "failed", "error": INTERRUPTED}
        try:
            await group_emitter(conversation_id)({**end, "cap_hit": False})
        except Exception:  # the rows are settled; a tab that missed this sees them on reload
            logger.exception("could not announce the end of interrupted turn %s", turn_id)

    async def _settle_dead(self, shared: SharedTurns, conversation_id: int) -> bool:
        """Settle the conversation if its turn's process died holding it; whether it did."""
        claimed = await shared.claim_interrupted(conversation_id)
        if claimed is None:
            return False
        claim, dead = claimed
        try:
            await self._settle(conversation_id, dead)
        finally:
            await shared.release(conversation_id, claim, dead)
        return True

    async def _sweep(self, shared: SharedTurns) -> None:
        """Settle conversations whose turn's process died, every half TTL, in every process."""
        while True:
            try:
                for conversation_id in await shared.interrupted():
                    await self._settle_dead(shared, conversation_id)
            except Exception:  # Redis or the database away: look again next time
                logger.exception("could not look for interrupted turns")
            await asyncio.sleep(shared.ttl / 2)


SETTLING = "settling-"  # the turn id in a lock taken only to settle a dead process's turn
SNAPSHOT_TIMEOUT = 2.0  # seconds a connecting tab waits for another process's running turn
SHUTDOWN_WAIT = 5.0  # seconds a stopping server gives its turns to save and give their locks back


@dataclass
class TurnState:
    """A conversation's turn as the ``history`` frame shows it (:meth:`TurnRegistry.state`)."""

    running: bool = False
    turn_id: str | None = None
    live: tuple[int, str] | None = None  # (message id, text so far) of the message being streamed
    live_html: dict[str, Any] | None = None  # ... and its HTML sent so far (a text_html object)
    elicitations: list[dict[str, Any]] = field(default_factory=list)
    progress: list[dict[str, Any]] = field(default_factory=list)
    approvals: list[dict[str, Any]] = field(default_factory=list)
    settled: bool = False  # a dead process's turn was settled just now (re-read the history)

    def wire(self) -> dict[str, Any]:
        """As sent between processes (no tuples)."""
        return {
            "running": self.running,
            "turn_id": self.turn_id,
            "live": list(self.live) if self.live else None,
            "live_html": self.live_html,
            "elicitations": self.elicitations,
            "progress": self.progress,
            "approvals": self.approvals,
        }


class RefusedAnswer(NamedTuple):
    """Why an answer frame was refused: the ``error`` frame's fields (``id``: the form it was for,
    which stays open; ``fields``: what is wrong with each of its fields, by name)."""

    code: str
    message: str
    id: Any = None
    fields: dict[str, str] | None = None


def open_here(conversation_id: int, frame: dict[str, Any]) -> bool:
    """Whether the form or approval an answer frame is for waits in this process."""
    if frame.get("type") == "elicitation_answer":
        return forms.is_open(conversation_id, frame.get("id"))
    return approvals.is_open(conversation_id, frame.get("id"))


def answer_here(conversation_id: int, frame: dict[str, Any], user_id: int | None) -> RefusedAnswer | None:
    """Apply an answer frame to this process's open forms or approvals; why it was refused, or None."""
    if frame.get("type") == "elicitation_answer":
        form_id = frame.get("id")
        try:
            forms.answer(conversation_id, form_id, frame.get("action"), frame.get("content"))
        except UnknownForm:
            return RefusedAnswer("unknown_elicitation", "No open form with this id in this conversation.")
        except BadAnswer as exc:
            return RefusedAnswer("bad_answer", str(exc), form_id, exc.fields or None)
        return None
    try:
        approvals.answer(
            conversation_id, frame.get("id"), frame.get("decision"), frame.get("remember"), user_id=user_id
        )
    except UnknownApproval:
        return RefusedAnswer("unknown_approval", "No pending approval with this id in this conversation.")
    except BadDecision as exc:
        return RefusedAnswer("bad_approval", str(exc))
    return None


registry = TurnRegistry()


def merge_live_text(
    history: list[dict[str, Any]],
    conversation_id: int,
    live: tuple[int, str] | None = None,
    live_html: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Replace the saved text of the message being streamed with the live text (reconnects),
    and give it the HTML sent so far (``text_html``: the page goes on from it).

    ``live`` and ``live_html`` as :meth:`TurnRegistry.state` found them (another process's
    turn); else this process's.
    """
    if live is None:
        live, live_html = registry.live_text(conversation_id), registry.live_html(conversation_id)
    if live is not None:
        message_id, text = live
        for message in history:
            if message["id"] == message_id:
                message["content"] = text
                if live_html is not None:
                    message["text_html"] = live_html
    return history
