"""The tool registry: every tool the model may see, native and MCP, as one sorted list.

``available_tools()`` is rebuilt from the hub's current state on every call (it is in-memory
and cheap), so a server that comes up, goes down or sends ``tools/list_changed`` changes the
list at the next turn without a restart; :func:`boocode.tools.agent_rules.agent_tools` applies
the agent's glob policy to that list. Sorting by name keeps the prompt byte-stable between turns
(prompt caching). A tool runs through :func:`boocode.tools.execution.execute_tool`.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from boocode.tools import skills
from boocode.tools.native import NATIVE_TOOLS, NativeTool
from boocode.tools.runners import call_mcp, run_native
from boocode.tools.tool import NATIVE_SOURCE, Tool
from mcpclient.core.state import HubTool
from mcpclient.runtime import get_hub, hub_tools

logger = logging.getLogger(__name__)

_EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


def _native(tool: NativeTool) -> Tool:
    return Tool(
        name=tool.name,
        description=tool.description,
        parameters=tool.parameters,
        read_only=True,
        source=NATIVE_SOURCE,
        executor=partial(run_native, tool),
    )


_NATIVE: tuple[Tool, ...] = tuple(_native(tool) for tool in NATIVE_TOOLS)
_warned_collisions: set[str] = set()


def native_tools() -> list[Tool]:
    """The native read-only tools (always available)."""
    return list(_NATIVE)


def available_tools(user_id: int | None = None) -> list[Tool]:
    """Native tools plus the accepted tools of ready MCP servers, sorted by name.

    With ``user_id``, that person's own sessions ("perUser" servers they connected) count too,
    and their tools run in those sessions; nobody else's are ever listed.

    A native tool's name wins over an MCP tool that would share it (the MCP tool is left out
    and a warning logged once), so two tools never silently share a name; so does ``load_skill``
    (:func:`_skill_tool`), offered when the person has a skill to load.
    """
    tools = {tool.name: tool for tool in _NATIVE}
    if (skill_tool := _skill_tool(user_id)) is not None:
        tools[skill_tool.name] = skill_tool
    for hub_tool in hub_tools(user_id):
        name = hub_tool.prefixed_name
        if name in tools:
            if name not in _warned_collisions:
                _warned_collisions.add(name)
                logger.warning(
                    'MCP tool "%s" of server "%s" is hidden: its name "%s" is a native tool',
                    hub_tool.name,
                    hub_tool.server,
                    name,
                )
            continue
        tools[name] = mcp_tool(hub_tool, user_id)
    return [tools[name] for name in sorted(tools)]


def _skill_tool(user_id: int | None) -> Tool | None:
    """``load_skill`` (:mod:`boocode.tools.skills`) for ``user_id``, or None when no skill can be loaded."""
    loadable = skills.offered(get_hub(), user_id)
    if not loadable:
        return None
    return Tool(
        name=skills.LOAD_SKILL,
        description=skills.description(loadable),
        parameters=skills.parameters(loadable),
        read_only=True,
        source=NATIVE_SOURCE,
        executor=partial(skills.load, user_id),
        title="Load a skill",
        user_id=user_id,
    )


def view_tools(user_id: int | None, server: str) -> list[Tool]:
    """The tools of ``server`` its views may call for ``user_id`` (MCP Apps; never native tools)."""
    found = hub_tools(user_id, views=True)
    return [mcp_tool(tool, user_id, views=True) for tool in found if tool.server == server]


def mcp_tool(hub_tool: HubTool, user_id: int | None, *, views: bool = False) -> Tool:
    name = hub_tool.prefixed_name
    return Tool(
        name=name,
        description=hub_tool.description,
        parameters=hub_tool.input_schema or dict(_EMPTY_SCHEMA),
        read_only=hub_tool.read_only,
        source=hub_tool.server,
        executor=partial(call_mcp, name, hub_tool.server, hub_tool.name, user_id=user_id, views=views),
        title=hub_tool.title,
        output_schema=hub_tool.output_schema,
        approval_reason=hub_tool.approval_reason,
        annotations=hub_tool.annotations,
        user_id=user_id,
        views=views,
        remote_name=hub_tool.name,
        definition_digest=hub_tool.digest,
    )
