"""The tool console: ``/tools``, ``/call <tool> {json}`` and ``/help`` typed in a conversation.

The turn stores the command as a console row first, then runs it here. What the console lists
and runs follows mcp.json and AGENTS.md as they are now: other processes' changes are read
before it answers. A ``/call`` is a tool call of the conversation like the model's (approval,
questions, progress), shown on the command's row; console rows never reach the model.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable, Sequence

from channels.db import database_sync_to_async

from agents.models import Agent
from boocode.chat.calls.execution import call_scope, execute, prepare_hub
from boocode.chat.ledger.audit import AuditRecord
from boocode.chat.turn import conversations
from boocode.chat.wire.events import Emit
from boocode.tools.agent_rules import agent_tools
from boocode.tools.tool import Tool

# "/compact" is run by the turn itself (boocode.chat.turn.compacting): it asks the model for a summary.
COMMANDS = ("/tools", "/call", "/compact", "/help")
CONSOLE_HELP = (
    "**Tool console**\n\n"
    "- `/tools` lists the tools this conversation's agent may use\n"
    '- `/call <tool> {"argument": "value"}` runs one tool and shows its result\n'
    "- `/compact` summarises the earlier messages for the model (the page keeps them all)\n"
    "- `/help` shows this help\n\n"
    "Anything else is sent to the model."
)

db = database_sync_to_async


def parse_command(text: str) -> tuple[str, str] | None:
    """``("/call", rest)`` for a console command, ``None`` for a message to the model."""
    stripped = text.strip()
    parts = stripped.split(None, 1)
    if parts and parts[0] in COMMANDS:
        return parts[0], parts[1].strip() if len(parts) > 1 else ""
    return None


async def run_command(
    command: str,
    rest: str,
    *,
    agent: Agent,
    conversation_id: int,
    user_id: int | None,
    message_id: int | None,
    emit: Emit,
    notice: Callable[[str], Awaitable[None]],
) -> None:
    """Run a stored command (``message_id``, for ``user_id``); answers go out as notices (``notice``)."""
    if command == "/help":
        await notice(CONSOLE_HELP)
        return
    # What the console lists and runs follows mcp.json and AGENTS.md as they are now.
    await prepare_hub(user_id, fresh=True)
    tools = agent_tools(agent, user_id=user_id)
    if command == "/tools":
        await notice(_tools_listing(agent.name, tools))
        return
    words = rest.split(None, 1)  # the tool's name, then its JSON arguments (default {})
    if not words:
        await notice('Usage: `/call <tool> {"argument": "value"}` — `/tools` lists the tools.')
        return
    name = words[0]
    arguments = words[1].strip() if len(words) > 1 else "{}"
    call = await db(conversations.add_tool_call)(
        message_id,
        call_id=f"console_{uuid.uuid4().hex[:12]}",
        name=name,
        arguments=arguments,
        identity=conversations.tool_identity(name, user_id),
        conversation_id=conversation_id,
    )
    await emit({"type": "tool_call", "call": call})
    started = time.monotonic()
    with call_scope(conversation_id, call, emit):
        result = await execute(
            name, arguments, tools, audit=AuditRecord("console", user_id, conversation_id, agent=agent.name)
        )
    duration = int((time.monotonic() - started) * 1000)
    final = await db(conversations.finish_tool_call)(call, result, duration)
    await emit({"type": "tool_result", "call": final})


def _tools_listing(agent_name: str, tools: Sequence[Tool]) -> str:
    if not tools:
        return f"Agent **{agent_name}** has no tools right now (check the status line for MCP servers)."
    lines = [f"Agent **{agent_name}** may use {len(tools)} tool{'s' if len(tools) != 1 else ''}:", ""]
    for tool in tools:
        description = " ".join((tool.description or "").split())
        if len(description) > 160:
            description = description[:157] + "..."
        lines.append(f"- `{tool.name}` ({tool.source}){': ' + description if description else ''}")
    return "\n".join(lines)
