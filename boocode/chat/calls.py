"""One tool call of a conversation's turn, run through the tool registry in the conversation's scope.

Inside :func:`call_scope` the call's questions (:mod:`boocode.chat.questions`), its approval
request (:mod:`boocode.chat.approval_requests`) and its progress (:mod:`boocode.chat.tool_progress`)
reach the conversation's tabs under the call's card. :func:`execute` never raises for a tool's
failure: a tool's own bug reaches the model as an error result, it does not end the turn.
Cancelling it (a stopped turn) cancels the call (see :mod:`boocode.tools.registry`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from typing import Any

from boocode.chat.approval_requests import gate_for
from boocode.chat.events import Emit
from boocode.chat.questions import asker_for
from boocode.chat.tool_progress import tracking
from boocode.tools.approval_gate import approving
from boocode.tools.registry import Tool, execute_tool
from mcpclient.core.results import ToolResult
from mcpclient.engine.elicitation import asking
from mcpclient.runtime import TURN_CHECK_INTERVAL, ensure_hub
from mcpclient.runtime.signin import open_sessions

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def call_scope(conversation_id: int, call: dict[str, Any], emit: Emit) -> Iterator[None]:
    """A tool call of the conversation: its questions, its approval and its progress reach the tabs."""
    with (
        asking(asker_for(conversation_id, call, emit)),
        approving(gate_for(conversation_id, call, emit)),
        tracking(conversation_id, call, emit),
    ):
        yield


async def execute(name: str, arguments: str, allowed: Sequence[Tool] | None) -> ToolResult:
    """Run the tool call ``name`` (``allowed``: the agent's tools); a tool's exception is an error result."""
    try:
        return await execute_tool(name, arguments, allowed=allowed)
    except Exception as exc:  # a tool's own bug must reach the model as text, not end the turn
        logger.exception("tool %s raised", name)
        return ToolResult(output=f"{name} failed: {type(exc).__name__}: {exc}", is_error=True)


async def prepare_hub(user_id: int | None, *, fresh: bool = False) -> None:
    """The hub (started, changes applied) with ``user_id``'s own sessions open.

    A model turn may reuse a check of other processes' changes made within the last
    ``TURN_CHECK_INTERVAL`` seconds; with ``fresh`` (the tool console) they are read now.
    An edited mcp.json is applied either way.
    """
    await open_sessions(await ensure_hub(max_age=0.0 if fresh else TURN_CHECK_INTERVAL), user_id)
