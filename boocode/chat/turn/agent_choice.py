"""Which agent answers a conversation: the agents it may pick, and the one it has picked.

Every read here first re-reads AGENTS.md if it changed (one ``stat()`` otherwise,
:mod:`agents.roster`). A conversation whose agent left the file is not answered by another
agent (:class:`AgentUnavailable`): that could give it more tools than its own agent allowed.
"""

from __future__ import annotations

from typing import Any

from agents.models import Agent
from agents.roster import default_agent, get_agent, list_agents, refresh_agents_if_changed
from boocode.chat.llm import windows
from boocode.chat.llm.request_budget import tools_limit
from boocode.chat.turn import conversations
from boocode.chat.wire.rendering import shorten
from boocode.tools.agent_rules import agent_tools
from boocode.tools.deferred import search_on
from boocode.tools.registry import available_tools
from mcpclient.config.model import STDIO, per_user
from mcpclient.core.access import may_use
from mcpclient.runtime import get_hub, hub_tools, people

TOOL_DESCRIPTION_CHARS = 1000  # of a tool's description in the agent picker


class AgentUnavailable(Exception):
    """The conversation's agent is no longer defined, or not for its person; ``str()`` is a
    message for the user."""


def may_pick(agent: Agent, user_id: int | None) -> bool:
    """Whether ``user_id`` may pick ``agent``: its ``groups:`` (none: everybody; docs/teams.md).

    The person's groups are read from the database at most every ``people.MAX_AGE`` seconds, the
    same read the MCP servers' ``groups`` are decided on; fails closed (no read, no group).
    """
    if not agent.groups or user_id is None:
        return True
    return may_use(agent.groups, user_id, people.load(user_id))


def agents_for(user_id: int | None) -> list[Agent]:
    """The agents ``user_id`` may pick, in file order (the first is their default)."""
    return [agent for agent in list_agents() if may_pick(agent, user_id)]


def agent_names(user_id: int | None = None) -> list[str]:
    """The agents a conversation of ``user_id`` can pick, in file order."""
    refresh_agents_if_changed()
    return [agent.name for agent in agents_for(user_id)]


def agents_info(user_id: int | None = None) -> list[dict[str, Any]]:
    """Every agent ``user_id`` may pick, with its description, model and the tools it may use now.

    Reads AGENTS.md again if it changed; the tools are the registry's current ones (the MCP
    servers' state in memory), filtered by each agent's patterns. The first agent is the default.
    ``searched``: its model gets a search over these tools rather than all of them (tool search
    on for them with the agent's own model's window, docs/tools.md).
    """
    refresh_agents_if_changed()
    if user_id is not None:
        people.load(user_id)  # the groups that decide the agents and the servers they see
    names = {tool.prefixed_name: tool for tool in hub_tools(user_id)}
    tools = available_tools(user_id)
    shared = shared_processes(user_id)
    result = []
    for position, agent in enumerate(agents_for(user_id)):
        entries = []
        allowed = agent_tools(agent, tools)
        for tool in allowed:
            hub_tool = names.get(tool.name)
            description = " ".join((tool.description or "").split())
            entries.append(
                {
                    "name": tool.name,
                    "server": hub_tool.server if hub_tool else "",
                    "tool": hub_tool.name if hub_tool else tool.name,
                    "title": tool.title,
                    "description": shorten(description, TOOL_DESCRIPTION_CHARS),
                    # One process for everybody: its files and state are the same for every person.
                    "shared": bool(hub_tool and hub_tool.server in shared),
                }
            )
        result.append(
            {
                "name": agent.name,
                "description": agent.description,
                "model": agent.model,
                "default": position == 0,
                "tools": entries,
                "searched": search_on(
                    agent.tool_search, allowed, tools_limit(windows.configured_window(agent, ""))
                ),
            }
        )
    return result


def shared_processes(user_id: int | None = None) -> set[str]:
    """The stdio servers that run one process for everybody (not ``"scope": "perUser"``), as
    ``user_id`` means their names (their own server under a hidden server's name is not one)."""
    hub = get_hub()
    if hub is None:
        return set()
    found = set()
    for snapshot in hub.snapshots():
        config = hub.config(snapshot.name, user_id)
        if config is not None and config.transport == STDIO and not per_user(config):
            found.add(snapshot.name)
    return found


def conversation_agent(conversation_id: int) -> Agent:
    """The conversation's agent (or its person's default), after re-reading AGENTS.md if it changed."""
    refresh_agents_if_changed()
    name, owner = conversations.conversation_agent_and_owner(conversation_id)
    return resolve_agent(name, owner)


def resolve_agent(name: str, user_id: int | None) -> Agent:
    """The agent row called ``name`` (``""``: the default agent of ``user_id``) for ``user_id``.

    Raises :class:`AgentUnavailable` when ``name`` is gone from AGENTS.md, or its ``groups:`` do
    not include ``user_id`` (any more): falling back to another agent could hand the
    conversation more tools than its own agent allowed. ``user_id`` ``None`` is no person (a
    management command).
    """
    if not name:
        default = default_agent()
        if may_pick(default, user_id):
            return default
        mine = agents_for(user_id)
        if not mine:
            raise AgentUnavailable(
                "No agent is available to you (each agent of AGENTS.md is for groups you are not in), "
                "so nothing was sent to the model and no tool ran. Ask an administrator."
            )
        return mine[0]
    agent = get_agent(name)
    if agent is None:
        raise AgentUnavailable(
            f'The agent "{name}" of this conversation is no longer defined in AGENTS.md, so nothing '
            "was sent to the model and no tool ran. Choose another agent to continue."
        )
    if not may_pick(agent, user_id):
        raise AgentUnavailable(
            f'The agent "{name}" of this conversation is not available to you (it is for groups you '
            "are not in), so nothing was sent to the model and no tool ran. Choose another agent to "
            "continue."
        )
    return agent
