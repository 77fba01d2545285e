"""Running a tool call from the model: :func:`execute_tool` is the one entry point.

It finds the tool in the agent's list, checks it against its current definition
(:func:`as_it_is_now`), parses and validates the arguments (:mod:`boocode.tools.arguments`),
waits for the approval gate when the tool needs it (:mod:`boocode.tools.approval_gate`), and
runs it within its time limit (:mod:`boocode.tools.runners`). Nothing here raises for a bad
call: every failure is an error :class:`ToolResult`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from boocode.tools.agent_rules import allowed_by, with_rule
from boocode.tools.approval_gate import check_approval
from boocode.tools.arguments import parse_arguments, validate_arguments
from boocode.tools.registry import available_tools, mcp_tool
from boocode.tools.tool import NATIVE_SOURCE, Tool
from mcpclient.core.approval import grant
from mcpclient.core.results import ToolResult
from mcpclient.runtime import held_for_review, hub_tools


def as_it_is_now(tool: Tool) -> Tool | None:
    """``tool`` as its server defines it now (None: no longer offered); a native tool as it is.

    A turn keeps the tool list it started with; a call is checked and approved against the
    current definition, so a tool re-announced as a write tool mid-turn, or a server set to
    ``trusted: false``, asks as it now should.
    """
    if tool.source == NATIVE_SOURCE:
        return tool
    now = hub_tools(tool.user_id, views=tool.views)
    current = next((t for t in now if t.prefixed_name == tool.name), None)
    if current is None:
        return None
    now_tool = with_rule(mcp_tool(current, tool.user_id, views=tool.views), tool.rule_reason)
    return allowed_by(now_tool, tool.allowed_by) if tool.allowed_by else now_tool


async def execute_tool(
    name: str,
    arguments: dict[str, Any] | str | None,
    *,
    allowed: Sequence[Tool] | None = None,
    user_id: int | None = None,
) -> ToolResult:
    """Run the tool ``name`` with ``arguments`` (a dict or the model's JSON string).

    ``allowed`` is the agent's tool list for this turn (of ``user_id``, whose call it is); a tool
    outside it is refused even if it exists. The answer for a tool that ``user_id`` may use but the
    agent does not offer says so; a tool of a server whose ``groups`` they are not in is, to them,
    a tool that does not exist: its answer is an unknown name's, word for word. The call is
    checked and approved against the tool as it is defined now (:func:`as_it_is_now`), and
    refused if the definition changed while it waited. Unknown
    tools, unparsable or invalid arguments come back as error results. A tool that needs
    approval waits for the gate in the context (:mod:`boocode.tools.approval_gate`).
    """
    pool = list(allowed) if allowed is not None else available_tools()
    tool = next((candidate for candidate in pool if candidate.name == name), None)
    if tool is None:
        # Held for an administrator's review (mcpclient.core.pinning): offered to nobody, but its
        # caller reads why, not "Unknown tool" (a tool of a server hidden from them stays unknown).
        if (held := held_for_review(name, user_id)) is not None:
            return held
        if allowed is not None and any(candidate.name == name for candidate in available_tools(user_id)):
            return ToolResult.error(f'Tool "{name}" is not available to this agent')
        offered = ", ".join(candidate.name for candidate in pool[:50]) or "none"
        return ToolResult.error(f'Unknown tool "{name}". Available tools: {offered}')
    tool = as_it_is_now(tool) or tool  # (gone: the hub answers why, e.g. "unreachable")
    parsed = parse_arguments(name, arguments)
    if isinstance(parsed, ToolResult):
        return parsed
    problem = validate_arguments(tool, parsed)
    if problem is not None:
        return ToolResult.error(problem)
    grant(None)  # the gate grants this call's approval, if it needs one (the hub worker checks it)
    refusal = await check_approval(tool, parsed)  # waits for the person when the tool needs it
    if refusal is not None:
        return refusal
    now = as_it_is_now(tool) if tool.approval_reason else None  # (only a call that waited)
    if now is not None and now.digest() != tool.digest():
        return ToolResult.error(
            f'Tool "{name}" changed while the call waited and was not called; call it again to use '
            "its new definition"
        )
    return await tool.execute(parsed)
