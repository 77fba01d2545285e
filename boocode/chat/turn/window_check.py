"""At start: each agent whose model's window cannot hold BooCode's system prompt and its tools.

:func:`warn_small_windows` runs once this process's MCP hub (Daphne's, or the hub worker's
with ``BOOCODE_HUB=worker``) has started its servers, so that the agents' tools are known
(:func:`mcpclient.runtime.on_hub_started`). For each agent it weighs the window of the agent's
model against its system prompt, the tool definitions its first request offers (the deferred
set when its tools are deferred) and the space kept for the answer, by the rule the admin and
each turn use (:func:`boocode.chat.llm.windows.window_problem`), and logs a WARNING that names the
agent, the model, the figures and what to change.

The window is the one a turn would use (:func:`boocode.chat.llm.windows.configured_window`): the
model server is asked first, for at most :data:`WINDOW_QUERY_SECONDS` in all; a server that
does not answer in time leaves the configured figure, and the warning names where it came from
(``agent context:``, ``BOOCODE_LLM_CONTEXT_TOKENS`` or ``default``). It runs in a task of its
own (nothing waits for it) and never raises.
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial

from channels.db import database_sync_to_async
from django.db import DatabaseError

from agents.models import Agent
from agents.roster import list_agents, refresh_agents_if_changed
from boocode.chat.llm import windows
from boocode.chat.llm.model_windows import server_window
from boocode.chat.llm.types import LLMSettings
from boocode.chat.turn.context import fixed_tokens

__all__ = ["WINDOW_QUERY_SECONDS", "agent_window_problems", "warn_small_windows"]

logger = logging.getLogger(__name__)

WINDOW_QUERY_SECONDS = 3.0  # the most the check waits for the model server to say a window

db_read = partial(database_sync_to_async, thread_sensitive=False)


def _agents() -> list[Agent]:
    """The agents as AGENTS.md has them now (synced first if it changed)."""
    refresh_agents_if_changed()
    return list_agents()


async def _asked(llm: LLMSettings) -> int | None:
    """The window the model server says, or ``None`` (it does not say, or not in time)."""
    if not llm.configured:
        return None
    try:
        async with asyncio.timeout(WINDOW_QUERY_SECONDS):
            return await server_window(llm, llm.model)
    except TimeoutError:
        return None


async def agent_window_problems() -> list[tuple[str, str]]:
    """``(agent, problem)`` for each agent whose model's window is too small (see the module docstring)."""
    problems = []
    agents = await db_read(_agents)()
    for agent in agents:
        llm = LLMSettings.from_settings(agent.model)
        window = windows.configured_window(agent, llm.model, await _asked(llm))
        prompt, tools = fixed_tokens(agent, window)
        problem = windows.window_problem(llm.model or "(no model set)", window, prompt, tools, agent.name)
        if problem:
            problems.append((agent.name, problem))
    plural = "" if len(agents) == 1 else "s"
    logger.info("context windows weighed for %d agent%s: %d too small", len(agents), plural, len(problems))
    return problems


async def warn_small_windows() -> None:
    """Log a WARNING for each agent whose model's window is too small (a start-up hook: never raises)."""
    try:
        problems = await agent_window_problems()
    except DatabaseError as exc:
        logger.warning("could not read the agents to weigh their models' context windows: %s", exc)
        return
    for _agent, problem in problems:
        logger.warning("%s", problem)
