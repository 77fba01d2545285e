"""One tool call of a conversation's turn, run through the tool registry in the conversation's scope.

Inside :func:`call_scope` the call's questions (:mod:`boocode.chat.calls.questions`), its approval
request (:mod:`boocode.chat.calls.approvals`) and its progress (:mod:`boocode.chat.calls.progress`)
reach the conversation's tabs under the call's card. :func:`execute` never raises for a tool's
failure: a tool's own bug reaches the model as an error result, it does not end the turn.
Cancelling it (a stopped turn) cancels the call (see :mod:`boocode.tools.registry`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

from django.utils import timezone

from boocode.chat.calls.approvals import gate_for
from boocode.chat.calls.progress import tracking
from boocode.chat.calls.questions import asker_for
from boocode.chat.ledger import metrics as chat_metrics
from boocode.chat.ledger.audit import REFUSALS, AuditRecord, auditing
from boocode.chat.ledger.audit import write as write_audit
from boocode.chat.wire.events import Emit
from boocode.tools.approval_gate import approving
from boocode.tools.execution import execute_tool
from boocode.tools.tool import Tool
from mcpclient.core.results import ToolResult
from mcpclient.engine.api import asking
from mcpclient.runtime import TURN_CHECK_INTERVAL, ensure_hub
from mcpclient.runtime.signin import open_sessions
from mcpclient.telemetry import tracing
from mcpclient.telemetry.metrics import tool_step_began

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def call_scope(
    conversation_id: int, call: dict[str, Any], emit: Emit, recorded: Awaitable[Any] | None = None
) -> Iterator[None]:
    """A tool call of the conversation: its questions, its approval and its progress reach the tabs.

    ``recorded``: the call's row is still being written while the call goes out (the turn does
    not make the server wait for its database); ``call`` is filled in when it is done, and the
    call's question, approval and progress frames wait for it (after the card's ``tool_call``).
    """
    asker, gate = asker_for(conversation_id, call, emit), gate_for(conversation_id, call, emit)
    if recorded is not None:
        asker, gate = _after(recorded, asker), _after(recorded, gate)
    with asking(asker), approving(gate), tracking(conversation_id, call, emit, recorded):
        yield


def _after[**P, T](
    recorded: Awaitable[Any], function: Callable[P, Awaitable[T]]
) -> Callable[P, Awaitable[T]]:
    """``function`` once ``recorded`` is done (a cancelled wait leaves the write alone)."""

    async def waiting(*args: P.args, **keys: P.kwargs) -> T:
        await asyncio.shield(recorded)
        return await function(*args, **keys)

    return waiting


async def execute(
    name: str,
    arguments: str,
    allowed: Sequence[Tool] | None,
    *,
    stream_ended: float | None = None,
    audit: AuditRecord | None = None,
) -> ToolResult:
    """Run the tool call ``name`` (``allowed``: the agent's tools); a tool's exception is an error result.

    The call is a span (``execute_tool <name>``) and counts in ``boocode_tool_calls_total`` and
    ``boocode_tool_call_duration_seconds``; ``stream_ended`` (when the model stream that asked
    for it ended, ``time.monotonic()``) starts its tool step (:mod:`mcpclient.telemetry.metrics`).
    With ``audit`` (who calls, and how) the call gets its row in the audit log
    (:mod:`boocode.chat.ledger.audit`).
    """
    server = server_of(name, allowed)
    started, outcome = time.monotonic(), "cancelled"
    began = timezone.now()
    result: ToolResult | None = None
    if stream_ended is not None:
        tool_step_began(stream_ended)
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "boocode.tool.server": server,
    }
    with tracing.span(f"execute_tool {name}", attributes=attributes) as span, auditing(audit):
        try:
            try:
                user_id = audit.user_id if audit is not None else None
                result = await execute_tool(name, arguments, allowed=allowed, user_id=user_id)
            except Exception as exc:  # a tool's own bug must reach the model as text, not end the turn
                logger.exception("tool %s raised", name)
                result = ToolResult(output=f"{name} failed: {type(exc).__name__}: {exc}", is_error=True)
            outcome = "error" if result.is_error else "ok"
        finally:
            seconds = time.monotonic() - started
            chat_metrics.TOOL_CALLS.labels(server, outcome).inc()
            chat_metrics.TOOL_CALL_SECONDS.labels(server).observe(seconds)
            tracing.outcome(span, "" if outcome == "ok" else outcome, **{"boocode.outcome": outcome})
            if audit is not None:
                tool = next((tool for tool in allowed or () if tool.name == name), None)
                write_audit(
                    audit,
                    server=server,
                    tool=(tool.remote_name if tool is not None else "") or name,
                    name=name,
                    digest=tool.definition_digest if tool is not None else "",
                    arguments=arguments,
                    result=result,
                    refused=audit.approval in REFUSALS,
                    began=began,
                    seconds=seconds,
                )
    assert result is not None  # (set unless the call was cancelled, which raised above)
    return result


def server_of(name: str, tools: Sequence[Tool] | None) -> str:
    """The server a tool call's metrics name: its MCP server, ``native``, or ``unknown``."""
    found = next((tool.source for tool in tools or () if tool.name == name), None)
    return found or "unknown"


async def prepare_hub(user_id: int | None, *, fresh: bool = False, skills: bool = True) -> list[str]:
    """The hub (started, changes applied) with ``user_id``'s own sessions open and, with ``skills``,
    their skills at hand (the registry's ``load_skill`` lists them; through the hub worker they are
    fetched here, so a caller that runs no model tool, like a view's request, leaves them).

    A model turn may reuse a check of other processes' changes made within the last
    ``TURN_CHECK_INTERVAL`` seconds; with ``fresh`` (the tool console) they are read now.
    An edited mcp.json is applied either way. Returns what of ``user_id``'s own sessions could
    not be opened (a per-person server at its limit), in sentences for them.
    """
    hub = await ensure_hub(max_age=0.0 if fresh else TURN_CHECK_INTERVAL)
    refused = await open_sessions(hub, user_id)
    if skills:
        await hub.load_skills(user_id)
    return refused
