"""Deferred tools: the model gets a few tools and a search tool instead of every definition.

Per agent (AGENTS.md ``toolSearch``, docs/tools.md): ``never`` offers every tool as before;
``always`` defers; ``auto`` (the default) defers once the agent's tool definitions would pass
``BOOCODE_TOOL_SEARCH_TOKENS`` tokens (about 4 characters of their JSON each) or
``BOOCODE_TOOL_SEARCH_TOOLS`` tools, when the search ranks with the embedding model. Without it
(not installed, or turned off) ``auto`` defers only what cannot be offered whole: definitions past
their share of the model's window, or past what one request carries: the lexical ranker alone
put an acceptable tool in the top five for 0.71 of requests at 45 tools and 0.55 at 898
(bench/tool_search.py), where every tool offered lets the model read them all.

With search on, a model request carries the tools *loaded* for the conversation plus
:data:`SEARCH_TOOL`. Loaded are, in this order and at most :data:`MAX_LOADED`: the ``pinned:``
tools of the agent, then the tools the conversation used or found most recently (read from its
history: the calls the model made and what its searches returned; a regenerated or edited turn
forgets what it superseded). A search ranks the agent's tools as they are *now*
(:mod:`boocode.tools.ranking`; a tool changed or removed by its server is ranked as it now is, or
not at all) and what it returns is loaded for the model's next step of the same turn. The model
may still call any tool of the agent by name: deferral chooses which definitions it reads, not
what it may run; a tool it called is loaded for its next steps as well (:meth:`DeferredTools.called`).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

from django.conf import settings

from agents.policy import is_allowed
from boocode.tools import ranking
from boocode.tools.registry import available_tools
from boocode.tools.tool import NATIVE_SOURCE, Tool, within_model_bounds
from mcpclient.core.results import ToolResult
from mcpclient.core.words import counted
from mcpclient.runtime import get_hub

logger = logging.getLogger(__name__)

SEARCH_TOOL = "tool_search"
MAX_LOADED = 24  # tools loaded besides the search tool
MAX_RESULTS = 10
DEFAULT_RESULTS = 5
DESCRIPTION_CHARS = 300  # of a found tool's description in the search's answer
MAX_SERVERS_LISTED = 40


def estimated_tokens(tools: Sequence[Tool]) -> int:
    """About how many tokens the definitions of ``tools`` cost a model request (4 characters each)."""
    return sum(len(tool.definition_json) for tool in tools) // 4


def search_on(mode: str, tools: Sequence[Tool], tokens: int | None = None) -> bool:
    """Whether an agent with ``toolSearch: mode`` and these tools defers them behind the search.

    ``tokens``: the most their definitions may take in this request (a share of the model's
    window, docs/models.md), when less than ``BOOCODE_TOOL_SEARCH_TOKENS``. Without the
    embedding model only ``tokens`` and one request's bounds count (see the module docstring).
    """
    if mode == "always":
        return True
    if mode != "auto":
        return False
    if not ranking.by_meaning():  # lexical only: deferred when they cannot all be offered
        too_many = len(within_model_bounds(list(tools))[0]) < len(tools)
        return too_many or (tokens is not None and estimated_tokens(tools) > tokens)
    limit = settings.TOOL_SEARCH_TOKENS if tokens is None else min(tokens, settings.TOOL_SEARCH_TOKENS)
    return len(tools) > settings.TOOL_SEARCH_TOOLS or estimated_tokens(tools) > limit


def used_in(history: Sequence[dict[str, Any]]) -> list[str]:
    """The tool names a conversation's history used or found, most recent first (each once)."""
    searches: set[str] = set()
    seen: list[str] = []
    for message in history:
        for call in message.get("tool_calls") or ():
            name = call.get("function", {}).get("name")
            if name == SEARCH_TOOL:
                searches.add(call.get("id"))
            elif isinstance(name, str):
                seen.append(name)
        if message.get("role") == "tool" and message.get("tool_call_id") in searches:
            seen.extend(found_in(str(message.get("content") or "")))
    return list(dict.fromkeys(reversed(seen)))


def found_in(output: str) -> list[str]:
    """The tool names a search's answer (its JSON text) listed, in its order."""
    try:
        answer = json.loads(output)
    except ValueError:
        return []
    tools = answer.get("tools") if isinstance(answer, dict) else None
    if not isinstance(tools, list):
        return []
    return [tool["name"] for tool in tools if isinstance(tool, dict) and isinstance(tool.get("name"), str)]


def candidates(tools: Sequence[Tool]) -> list[ranking.Candidate]:
    """The ranker's view of ``tools``: each with its server's own tool name and what its server is for."""
    hub = get_hub()
    own: dict[str, str] = {}
    about: dict[str, str] = {}
    if hub is not None:
        user_id = next((tool.user_id for tool in tools if tool.user_id is not None), None)
        own = {tool.prefixed_name: tool.name for tool in hub.every_tool(user_id)}
        for snapshot in hub.snapshots():
            info = snapshot.server_info or {}
            about[snapshot.name] = " ".join(
                str(info.get(key) or "") for key in ("title", "description") if info.get(key)
            )
    return [
        ranking.Candidate(
            key=tool.name,
            server=tool.source,
            name=own.get(tool.name, tool.name),
            title=tool.title,
            description=tool.description,
            parameters=tool.parameters,
            about=about.get(tool.source, ""),
        )
        for tool in tools
    ]


class DeferredTools:
    """One turn's deferred tools: what is loaded, and the search tool that loads more."""

    def __init__(
        self,
        tools: Sequence[Tool],
        *,
        pinned: Sequence[str],
        history: Sequence[dict[str, Any]],
        current: Callable[[], list[Tool]],
    ) -> None:
        """``tools``: the agent's tools now; ``current``: the agent's tools at the time of a search.

        A tool of a server that would share the search tool's name (a server "tool" with a tool
        "search") is left out, as native tools' names win over MCP tools' in the registry.
        """
        tools = [tool for tool in tools if tool.name != SEARCH_TOOL]
        self.tools = tools
        self.current = current
        by_name = {tool.name: tool for tool in tools}
        pinned_names = [tool.name for tool in tools if pinned and is_allowed(list(pinned), tool.name)]
        recent = [name for name in used_in(history) if name in by_name]
        self.pinned = pinned_names
        self.loaded = list(dict.fromkeys([*pinned_names, *recent]))[:MAX_LOADED]
        self.tool = self._search_tool()
        self.warming: asyncio.Task[ranking.Index] | None = None

    def warm(self) -> None:
        """Start building the search's index now (embedding new tools takes a while), in the background."""
        warmer.searched = True
        self.warming = asyncio.ensure_future(_index(self.tools))
        self.warming.add_done_callback(lambda task: task.cancelled() or task.exception())

    def offered(self) -> list[Tool]:
        """The tools the next model request carries: the loaded ones, then the search tool."""
        by_name = {tool.name: tool for tool in self.tools}
        return [by_name[name] for name in self.loaded if name in by_name] + [self.tool]

    def load(self, names: Sequence[str]) -> None:
        """Load ``names`` for the next step (the most recent first; the pinned ones stay)."""
        rest = [name for name in [*names, *self.loaded] if name not in self.pinned]
        self.loaded = list(dict.fromkeys([*self.pinned, *rest]))[:MAX_LOADED]

    def called(self, names: Sequence[str]) -> None:
        """The model called ``names`` (loaded or not: a deferred tool may be called by name): those
        that are the agent's tools stay loaded for the rest of the turn, as the ones it found."""
        known = {tool.name for tool in self.tools}
        self.load([name for name in names if name in known])

    def _search_tool(self) -> Tool:
        servers = sorted({"BooCode" if tool.source == NATIVE_SOURCE else tool.source for tool in self.tools})
        shown = ", ".join(servers[:MAX_SERVERS_LISTED]) + (", …" if len(servers) > MAX_SERVERS_LISTED else "")
        description = (
            f"Find the tools for a task among the {counted(len(self.tools), 'tool')} you may use "
            f"(from {shown}). "
            "Only some tools are loaded; describe what you want to do in plain words (one task per "
            "search) and the best matching tools are loaded for your next step, by name. An empty "
            "list means no tool fits: do not guess a tool then."
        )
        parameters = {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What you want to do, in a sentence."},
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_RESULTS,
                    "description": f"How many tools to load (default {DEFAULT_RESULTS}).",
                },
            },
            "required": ["query"],
        }
        return Tool(
            name=SEARCH_TOOL,
            description=description,
            parameters=parameters,
            read_only=True,
            source=NATIVE_SOURCE,
            executor=self._search,
            title="Tool search",
        )

    async def _search(self, arguments: dict[str, Any]) -> ToolResult:
        query = str(arguments.get("query") or "")
        limit = arguments.get("limit", DEFAULT_RESULTS)
        if not isinstance(limit, int) or isinstance(limit, bool):
            limit = DEFAULT_RESULTS
        now = [tool for tool in self.current() if tool.name != SEARCH_TOOL]
        self.tools = now
        by_name = {tool.name: tool for tool in now}
        index = await _index(now)
        hits = await _rank(index, query, max(1, min(limit, MAX_RESULTS)), self.loaded)
        self.load([hit.key for hit in hits])
        found = [
            {
                "name": hit.key,
                "server": hit.server,
                "title": by_name[hit.key].title,
                "description": " ".join(by_name[hit.key].description.split())[:DESCRIPTION_CHARS],
                "score": round(hit.score, 3),
            }
            for hit in hits
        ]
        note = (
            "These tools are loaded for your next step; call them by name."
            if found
            else "No tool fits this request. Answer without a tool, or search again with other words."
        )
        answer = {"query": query, "tools": found, "note": note}
        return ToolResult(output=json.dumps(answer, ensure_ascii=False), structured=answer)


async def _index(tools: Sequence[Tool]) -> ranking.Index:
    """The ranker's index of ``tools`` (built in a worker thread: embedding new tools takes a while)."""
    return await asyncio.to_thread(ranking.index_for, candidates(tools))


async def _rank(index: ranking.Index, query: str, limit: int, recent: Sequence[str]) -> list[ranking.Hit]:
    """``index.rank`` in a worker thread (the query's embedding is a few milliseconds of numpy)."""
    return await asyncio.to_thread(index.rank, query, limit=limit, recent=recent)


class Warmer:
    """Indexes the shared servers' tools for search when they change (at discovery, on list changes).

    One build runs at a time, in a worker thread; changes during it start one more after it. A
    person's own servers and an agent's choice are indexed by the turn that needs them
    (:meth:`DeferredTools.warm`); what is built here is what makes those quick: the embeddings
    of every tool, kept on disk.

    Only where it saves time: while the shared tools are few and small enough that no agent
    defers them whatever its window (:func:`search_on` without a window's share), nothing is
    built here until a turn of this process has deferred tools (embedding a few tools takes
    well under a second), so a process whose agents never search does not load the embedding
    model (about 150 MB) at all.
    """

    def __init__(self) -> None:
        self.running: asyncio.Task[None] | None = None
        self.again = False
        self.searched = False  # a turn of this process deferred its tools

    def changed(self) -> None:
        """A server changed (called by the hub in its loop): index its tools soon."""
        if not settings.TOOL_SEARCH_SEMANTIC:
            return
        if self.running is not None and not self.running.done():
            self.again = True
            return
        self.running = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        while True:
            self.again = False
            tools = [tool for tool in available_tools() if tool.source != NATIVE_SOURCE]
            if not (self.searched or search_on("auto", tools)):
                return
            try:
                await _index(tools)
            except Exception:  # indexing is a speed-up: a failure leaves it to the next search
                logger.exception("could not index the tools for search")
            if not self.again:
                return


warmer = Warmer()
