"""The tool step of a turn: the calls one model answer asked for, run concurrently.

The calls go out while the answer and their rows are written (:class:`ToolCalls`: the rows, filled
in once written, and that write); each call waits for its row (and card) before its result is
stored and sent (``tool_result``). They run in one task group
(:mod:`boocode.chat.calls.execution`): a stop cancels them all. Calls beyond the turn's remaining
budget of tool calls are not run; each is stored ``skipped`` with a result that says why. The
results go back in the order the model asked for them.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from channels.db import database_sync_to_async

from boocode.chat.calls.execution import call_scope, execute, server_of
from boocode.chat.ledger import metrics as chat_metrics
from boocode.chat.ledger.audit import AuditRecord
from boocode.chat.llm.client import ToolCallRequest
from boocode.chat.models import ToolCall
from boocode.chat.turn import conversations
from boocode.chat.turn.context import TurnContext
from boocode.chat.wire.events import Emit
from mcpclient.core.results import ToolResult

db = database_sync_to_async


@dataclass
class ToolCalls:
    """The calls one model step asked for: ``rows`` (filled in once written) and the write."""

    rows: list[dict[str, Any]]
    recorded: asyncio.Future[None] | None = None


async def run_calls(
    context: TurnContext,
    requests: list[ToolCallRequest],
    calls: ToolCalls,
    budget: int,
    *,
    conversation_id: int,
    user_id: int | None,
    emit: Emit,
    stream_ended: float | None,
) -> list[ToolResult]:
    """Run one step's tool calls concurrently, as their rows are written; calls beyond
    ``budget`` are skipped. ``stream_ended``: when the model stream that asked for them ended."""
    recorded = calls.recorded
    assert recorded is not None

    async def run_one(request: ToolCallRequest, call: dict[str, Any], allowed: bool) -> ToolResult:
        if not allowed:
            await asyncio.shield(recorded)
            result = ToolResult(
                output=f"Not run: the limit of {context.max_tool_calls} tool calls per turn was reached.",
                is_error=True,
            )
            skipped = ToolCall.Status.SKIPPED
            chat_metrics.TOOL_CALLS.labels(server_of(request.name, context.tools), "skipped").inc()
            final = await db(conversations.finish_tool_call)(call, result, 0, status=skipped)
        else:
            started = time.monotonic()
            with call_scope(conversation_id, call, emit, recorded):
                result = await execute(
                    request.name,
                    request.arguments,
                    context.tools,
                    stream_ended=stream_ended,
                    audit=AuditRecord("model", user_id, conversation_id, agent=context.agent_name),
                )
            duration = int((time.monotonic() - started) * 1000)
            await asyncio.shield(recorded)  # its row (and card) first
            final = await db(conversations.finish_tool_call)(call, result, duration)
        await emit({"type": "tool_result", "call": final})
        return result

    async with asyncio.TaskGroup() as group:
        tasks = [
            group.create_task(run_one(request, call, index < budget))
            for index, (request, call) in enumerate(zip(requests, calls.rows, strict=True))
        ]
    return [task.result() for task in tasks]
