"""Approval requests: a tool call of a conversation waits for its owner's decision.

The chat's side of approval (which tools need it: :mod:`mcpclient.core.approval`; the gate a
call passes: :mod:`boocode.tools.approval_gate`). A turn runs each tool call inside
:func:`~boocode.tools.approval_gate.approving` with a gate made by :func:`gate_for` (the
conversation, the tool call's row, the turn's ``emit``); the registry asks it only for a tool
that needs approval, before the tool runs and its time limit starts.

:meth:`Approvals.ask` first records a :class:`~boocode.chat.models.ToolApproval` row. When the
tool, as it is defined now, is in ``Conversation.allowed_tools`` (its prefixed name and the digest
of its definition, :func:`allowance`) the row is ``allowed`` and the call runs at once: an
allowance ends with the definition it was given for. Otherwise the row is ``pending``, an
``approval`` frame goes to the conversation's group (every open tab shows the card) and the
call waits. It ends in exactly
one way, stored on the row and announced with an ``approval_end`` frame:

* the owner answers over the websocket (:meth:`Approvals.answer`, called by the consumer,
  which checked that the socket's user owns the conversation): ``approved`` (the call runs;
  with ``remember`` the tool's allowance joins ``allowed_tools`` and the conversation's other
  pending calls of the same tool and definition are ``allowed`` too) or ``denied`` (the model
  gets a tool error saying the person denied the call; the server never hears of it);
* nobody answers within ``BOOCODE_APPROVAL_TIMEOUT`` seconds: ``expired``, denied;
* the turn is stopped (the waiting task is cancelled): ``stopped``.

The first answer wins: the pending entry is settled once, later answers (another tab) get an
``unknown_approval`` error. Pending calls live in this process's memory, like the running turn
they belong to; a reconnecting page gets them in its ``history`` frame (:meth:`Approvals.pending`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
from dataclasses import dataclass, field
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from boocode.chat.ledger import metrics as chat_metrics
from boocode.chat.ledger.audit import note_approval
from boocode.chat.models import Conversation, ToolApproval
from boocode.chat.wire.events import Emit
from boocode.tools.approval_gate import Gate, GatedTool
from mcpclient.core.approval import declared_hints, grant
from mcpclient.core.results import ToolResult
from mcpclient.telemetry.metrics import tool_step_skipped

logger = logging.getLogger(__name__)

DECISIONS = ("approve", "deny")
Decision = ToolApproval.Decision


class UnknownApproval(LookupError):
    """No pending approval with this id in this conversation (never existed, decided, someone else's)."""


class BadDecision(ValueError):
    """The answer is malformed; ``str()`` says what to fix (the approval stays pending)."""


def denial_text(name: str, decision: str) -> str:
    """What the model reads when the call did not run."""
    if decision == Decision.EXPIRED:
        limit = float(settings.APPROVAL_TIMEOUT)
        return (
            f'Not run: the call of "{name}" needs the person\'s approval and nobody answered within '
            f"{limit:g} s, so it was denied. Ask them before trying again."
        )
    if decision == Decision.STOPPED:
        return f'Not run: the turn was stopped while the call of "{name}" waited for approval.'
    return (
        f'Not run: the person denied this call of "{name}". The tool was not called; do not retry it '
        "unless they ask for it."
    )


@dataclass
class PendingApproval:
    """A tool call waiting for the person."""

    id: int  # the ToolApproval row
    conversation_id: int
    call_id: int | None  # the ToolCall row
    name: str  # the prefixed name the model called
    key: str  # its allowance (name and definition digest, see allowance())
    server: str
    tool: str
    title: str
    arguments: dict[str, Any]
    hints: dict[str, bool | None]
    reason: str
    expires_at: dt.datetime
    from_view: bool  # asked by a view (MCP Apps), not the model: the card says so
    reply: asyncio.Future[tuple[str, bool, int | None]] = field(repr=False)

    def payload(self) -> dict[str, Any]:
        """The ``approval`` object of the frames (docs/protocol.md)."""
        return {
            "id": self.id,
            "call_id": self.call_id,
            "name": self.name,
            "server": self.server,
            "tool": self.tool,
            "title": self.title,
            "arguments": self.arguments,
            "hints": self.hints,
            "reason": self.reason,
            "expires_at": self.expires_at.isoformat(),
            "from_view": self.from_view,
        }


# --- database units (each one short, run with database_sync_to_async) -----------------------------
def begin_approval(
    conversation_id: int,
    call_id: int | None,
    *,
    server: str,
    tool: str,
    name: str,
    arguments: str,
    hints: dict[str, Any],
    reason: str,
    key: str,
    by_rule: bool = False,
) -> tuple[int, bool]:
    """Record the call's approval row: ``(row id, allowed)``; allowed when ``key`` is remembered,
    or ``by_rule`` (the agent's ``approve: allow`` vouches for it: ``reason`` says which)."""
    conversation = Conversation.objects.only("owner_id", "allowed_tools").get(pk=conversation_id)
    allowed = by_rule or key in (conversation.allowed_tools or [])
    row = ToolApproval.objects.create(
        conversation_id=conversation_id,
        tool_call_id=call_id,
        server=server[:100],
        tool=tool[:255],
        name=name[:200],
        arguments=arguments,
        hints=hints,
        reason=reason[:200],
        decision=Decision.ALLOWED if allowed else Decision.PENDING,
        decided_by_id=conversation.owner_id if allowed and not by_rule else None,  # (a rule: nobody)
        decided_at=timezone.now() if allowed else None,
    )
    return row.pk, allowed


def settle_approval(
    approval_id: int, decision: str, *, remember: bool = False, user_id: int | None = None, key: str = ""
) -> None:
    """Store the decision; with ``remember``, ``key`` joins the conversation's ``allowed_tools``."""
    with transaction.atomic():
        row = ToolApproval.objects.select_related("conversation").get(pk=approval_id)
        row.decision = decision
        row.remember = remember
        row.decided_by_id = user_id
        row.decided_at = timezone.now()
        row.save(update_fields=["decision", "remember", "decided_by", "decided_at"])
        if remember:
            conversation = Conversation.objects.select_for_update().get(pk=row.conversation_id)
            allowed = list(conversation.allowed_tools or [])
            if key and key not in allowed:
                allowed.append(key)
                Conversation.objects.filter(pk=conversation.pk).update(allowed_tools=allowed)


GOOD_FOR_SECONDS = 300  # after its decision, an approval is good for a call made this long after


def approval_holds(approval_id: int, name: str, arguments: dict[str, Any], user_id: int | None) -> str:
    """ "" when the approval row ``approval_id`` allows this very call, else why it does not.

    The hub worker asks this before running a call that needs approval (registered with
    :func:`mcpclient.core.approval.check_approvals_with` when the app is ready): the row must
    approve (or allow for the conversation) the same tool, with the same arguments, in a
    conversation of ``user_id``, decided within :data:`GOOD_FOR_SECONDS`.
    """
    row = ToolApproval.objects.select_related("conversation").filter(pk=approval_id).first()
    if row is None:
        return f"there is no approval {approval_id}"
    if row.name != name:
        return f"approval {approval_id} is for another tool"
    if row.decision not in (Decision.APPROVED, Decision.ALLOWED):
        return f"approval {approval_id} is {row.decision}"
    if user_id is not None and row.conversation.owner_id != user_id:
        return f"approval {approval_id} is another person's"
    if row.decided_at is None or (timezone.now() - row.decided_at).total_seconds() > GOOD_FOR_SECONDS:
        return f"approval {approval_id} was decided too long ago"
    try:
        same = json.loads(row.arguments) == arguments
    except ValueError:
        same = False
    return "" if same else f"approval {approval_id} was given for other arguments"


def allowance(tool: GatedTool) -> str:
    """What "allow for this conversation" remembers: the tool's name and its definition's digest."""
    return f"{tool.name}#{tool.digest()}"


db = database_sync_to_async


class Approvals:
    """The pending approvals of this process, by row id."""

    def __init__(self) -> None:
        self._open: dict[int, PendingApproval] = {}
        self._ending: set[asyncio.Task[None]] = set()

    async def ask(
        self,
        tool: GatedTool,
        arguments: dict[str, Any],
        *,
        conversation_id: int,
        call: dict[str, Any],
        emit: Emit,
    ) -> ToolResult | None:
        """Wait for the decision on one call (see the module docstring); None lets it run."""
        name = tool.name
        server = str(call.get("server") or tool.source)
        tool_name = str(call.get("tool") or name)
        hints = declared_hints(tool.annotations)
        key = allowance(tool)
        from_view = call.get("from_view") is True
        # The record says who asked: the model, or a view of one of its calls (MCP Apps).
        reason = f"asked by a view: {tool.approval_reason}" if from_view else tool.approval_reason
        if tool.allowed_by:  # on the record, without a card: the operator vouched in AGENTS.md
            reason = f'{reason}; allowed by the agent\'s rules ("approve: allow" matches "{tool.allowed_by}")'
        approval_id, allowed = await db(begin_approval)(
            conversation_id,
            call.get("id"),
            server=server,
            tool=tool_name,
            name=name,
            arguments=json.dumps(arguments, ensure_ascii=False),
            hints=tool.annotations or {},
            reason=reason,
            key=key,
            by_rule=bool(tool.allowed_by),
        )
        if allowed:
            how = "by the agent's rules" if tool.allowed_by else "for the conversation"
            logger.info("conversation %s: %s allowed %s", conversation_id, name, how)
            note_approval(Decision.ALLOWED, None, remembered=not tool.allowed_by)
            grant(approval_id)
            return None
        tool_step_skipped()  # the person's time is not BooCode's tool step (mcpclient.telemetry.metrics)
        timeout = float(settings.APPROVAL_TIMEOUT)
        pending = PendingApproval(
            id=approval_id,
            conversation_id=conversation_id,
            call_id=call.get("id"),
            name=name,
            key=key,
            server=server,
            tool=tool_name,
            title=str(call.get("title") or tool.title),
            arguments=arguments,
            hints=hints,
            reason=reason,
            expires_at=dt.datetime.now(dt.UTC) + dt.timedelta(seconds=timeout),
            from_view=from_view,
            reply=asyncio.get_running_loop().create_future(),
        )
        self._open[pending.id] = pending
        try:
            await emit({"type": "approval", "approval": pending.payload()})
            async with asyncio.timeout(timeout):
                decision, remember, user_id = await asyncio.shield(pending.reply)
        except TimeoutError:
            decision, remember, user_id = Decision.EXPIRED, False, None
        except asyncio.CancelledError:
            note_approval(Decision.STOPPED, None)
            self._finish_later(pending, Decision.STOPPED, False, None, emit)
            raise
        logger.info("conversation %s: approval %s for %s %s", conversation_id, pending.id, name, decision)
        note_approval(decision, user_id)
        ending = self._finish_later(pending, decision, remember, user_id, emit)
        # The row and the approval_end frame come before the tool runs (or the model hears "no").
        await asyncio.shield(ending)
        if decision in (Decision.APPROVED, Decision.ALLOWED):
            grant(approval_id)  # named in the call, so that the process running it can check it
            return None
        return ToolResult.error(denial_text(name, decision))

    def _finish_later(
        self, pending: PendingApproval, decision: str, remember: bool, user_id: int | None, emit: Emit
    ) -> asyncio.Task[None]:
        """Close ``pending``, store the decision and announce it, in a task a stop cannot cancel."""
        self._open.pop(pending.id, None)
        if not pending.reply.done():
            pending.reply.cancel()
        task = asyncio.ensure_future(self._finish(pending, decision, remember, user_id, emit))
        self._ending.add(task)
        task.add_done_callback(self._ending.discard)
        return task

    async def _finish(
        self, pending: PendingApproval, decision: str, remember: bool, user_id: int | None, emit: Emit
    ) -> None:
        try:
            await db(settle_approval)(
                pending.id, decision, remember=remember, user_id=user_id, key=pending.key
            )
        except Exception:  # the decision holds in memory; the row stays pending for the record
            logger.exception("could not store approval %s (%s)", pending.id, decision)
        try:
            await emit(
                {
                    "type": "approval_end",
                    "id": pending.id,
                    "call_id": pending.call_id,
                    "decision": str(decision),
                    "remember": remember,
                }
            )
        except Exception:  # the channel layer is a boundary: a lost frame is not a lost decision
            logger.exception("could not announce approval %s", pending.id)

    def answer(
        self, conversation_id: int, approval_id: Any, decision: Any, remember: Any, *, user_id: int | None
    ) -> None:
        """Settle a pending approval of ``conversation_id`` with the owner's decision.

        Raises :class:`UnknownApproval` for an id that is not pending in this conversation and
        :class:`BadDecision` for a malformed answer (nothing is decided then).
        """
        if isinstance(approval_id, bool) or not isinstance(approval_id, int):
            raise BadDecision('"id" must be the approval\'s id (an integer)')
        if decision not in DECISIONS:
            raise BadDecision('"decision" must be "approve" or "deny"')
        if remember is None:
            remember = False
        if not isinstance(remember, bool):
            raise BadDecision('"remember" must be true or false')
        if remember and decision != "approve":
            raise BadDecision('"remember" only goes with "approve" (allow the tool for the conversation)')
        pending = self._open.get(approval_id)
        if pending is None or pending.conversation_id != conversation_id or pending.reply.done():
            raise UnknownApproval(approval_id)
        outcome = Decision.APPROVED if decision == "approve" else Decision.DENIED
        pending.reply.set_result((outcome, remember, user_id))
        if remember:
            # The conversation's other calls of this tool waiting now need no second click.
            for other in list(self._open.values()):
                if (
                    other is not pending
                    and other.conversation_id == conversation_id
                    and other.key == pending.key
                    and not other.reply.done()
                ):
                    other.reply.set_result((Decision.ALLOWED, False, user_id))

    def is_open(self, conversation_id: int, approval_id: Any) -> bool:
        """Whether ``approval_id`` waits for a decision in ``conversation_id`` in this process."""
        pending = self._open.get(approval_id) if isinstance(approval_id, int) else None
        return pending is not None and pending.conversation_id == conversation_id and not pending.reply.done()

    def pending(self, conversation_id: int) -> list[dict[str, Any]]:
        """The pending approvals of a conversation, oldest first (for the ``history`` frame)."""
        mine = (p for p in self._open.values() if p.conversation_id == conversation_id)
        return [p.payload() for p in sorted(mine, key=lambda p: p.id) if not p.reply.done()]

    def waiting(self) -> int:
        """How many approvals of this process wait for a decision (``boocode_approvals_waiting``)."""
        return sum(1 for p in list(self._open.values()) if not p.reply.done())


approvals = Approvals()
chat_metrics.APPROVALS_WAITING.set_function(approvals.waiting)


def gate_for(conversation_id: int, call: dict[str, Any], emit: Emit) -> Gate:
    """The approval gate of one tool call of a turn: its card goes to the conversation."""

    async def gate(tool: GatedTool, arguments: dict[str, Any]) -> ToolResult | None:
        return await approvals.ask(tool, arguments, conversation_id=conversation_id, call=call, emit=emit)

    return gate
