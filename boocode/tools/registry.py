"""The tool registry: every tool the model may see, native and MCP, as one sorted list.

``available_tools()`` is rebuilt from the hub's current state on every call (it is in-memory
and cheap), so a server that comes up, goes down or sends ``tools/list_changed`` changes the
list at the next turn without a restart; ``agent_tools(agent)`` applies the agent's glob policy
to that list. Sorting by name keeps the prompt byte-stable between turns (prompt caching).

``execute_tool()`` is the one entry point for running a tool call from the model: it parses and
validates the arguments against the tool's JSON schema first, so the model gets a precise,
local error (``Invalid arguments for view_file: at 'start_line': ...``) instead of a server
round trip. Native tools run in a worker thread; MCP tools go to the hub by prefixed name.
Nothing here raises for a bad call: every failure is an error :class:`ToolResult`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache, partial
from typing import Any, Protocol

from django.core.exceptions import ImproperlyConfigured
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, ValidationError, relevance
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for
from referencing.exceptions import Unresolvable

from agents.policy import is_allowed
from boocode.tools.native import NATIVE_TOOLS, NativeTool
from boocode.tools.workspace import WorkspaceError
from mcpclient.results import ToolResult, cap_output
from mcpclient.runtime import hub_call, hub_tools

__all__ = [
    "NATIVE_SOURCE",
    "Tool",
    "agent_tools",
    "available_tools",
    "execute_tool",
    "native_tools",
    "openai_tools",
    "validate_arguments",
]

logger = logging.getLogger(__name__)

NATIVE_SOURCE = "native"
MAX_REPORTED_ERRORS = 5
_EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}

Executor = Callable[[dict[str, Any]], Awaitable[ToolResult]]


class HasToolPatterns(Protocol):
    """Anything with the agent's ``tools`` patterns: an ``Agent`` row or an ``AgentSpec``."""

    @property
    def tools(self) -> Sequence[str] | None: ...


@dataclass(frozen=True)
class Tool:
    """A tool as the model sees it, and how to run it."""

    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments (an MCP tool's inputSchema as-is)
    read_only: bool
    source: str  # "native" or the MCP server's name
    executor: Executor = field(repr=False, compare=False)

    async def execute(self, arguments: dict[str, Any]) -> ToolResult:
        """Run the tool with already-validated ``arguments``."""
        return await self.executor(arguments)

    def openai(self) -> dict[str, Any]:
        """The tool in the OpenAI Chat Completions ``tools`` format."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


async def _run_native(tool: NativeTool, arguments: dict[str, Any]) -> ToolResult:
    """Run a blocking native tool in a worker thread; refusals become error results."""
    try:
        output = await asyncio.to_thread(tool.function, **arguments)
    except (WorkspaceError, ImproperlyConfigured) as exc:
        if isinstance(exc, ImproperlyConfigured):
            logger.error("native tool %s: %s", tool.name, exc)
        return ToolResult.error(f"{tool.name}: {exc}")
    except OSError as exc:
        return ToolResult.error(f"{tool.name}: {exc.strerror or exc}")
    return ToolResult(output=cap_output(output))


def _native(tool: NativeTool) -> Tool:
    return Tool(
        name=tool.name,
        description=tool.description,
        parameters=tool.parameters,
        read_only=True,
        source=NATIVE_SOURCE,
        executor=partial(_run_native, tool),
    )


_NATIVE: tuple[Tool, ...] = tuple(_native(tool) for tool in NATIVE_TOOLS)
_warned_collisions: set[str] = set()


def native_tools() -> list[Tool]:
    """The native read-only tools (always available)."""
    return list(_NATIVE)


def available_tools() -> list[Tool]:
    """Native tools plus the accepted tools of ready MCP servers, sorted by name.

    A native tool's name wins over an MCP tool that would share it (the MCP tool is left out
    and a warning logged once), so two tools never silently share a name.
    """
    tools = {tool.name: tool for tool in _NATIVE}
    for hub_tool in hub_tools():
        name = hub_tool.prefixed_name
        if name in tools:
            if name not in _warned_collisions:
                _warned_collisions.add(name)
                logger.warning(
                    'MCP tool "%s" of server "%s" is hidden: its name "%s" is a native tool',
                    hub_tool.name, hub_tool.server, name,
                )
            continue
        tools[name] = Tool(
            name=name,
            description=hub_tool.description,
            parameters=hub_tool.input_schema or dict(_EMPTY_SCHEMA),
            read_only=hub_tool.read_only,
            source=hub_tool.server,
            executor=partial(hub_call, name),
        )
    return [tools[name] for name in sorted(tools)]


def agent_tools(agent: HasToolPatterns, tools: Iterable[Tool] | None = None) -> list[Tool]:
    """The tools ``agent`` may use now: its patterns applied to the current registry.

    ``tools`` defaults to :func:`available_tools`; pass a list to reuse one already built.
    """
    candidates = available_tools() if tools is None else list(tools)
    patterns = agent.tools
    return [tool for tool in candidates if is_allowed(patterns, tool.name)]


def openai_tools(tools: Iterable[Tool]) -> list[dict[str, Any]]:
    """``tools`` in the OpenAI ``tools`` request format, in the order given."""
    return [tool.openai() for tool in tools]


@lru_cache(maxsize=512)
def _validator(schema_json: str) -> Validator | None:
    """A compiled validator for a schema (by its canonical JSON), or None if the schema is broken."""
    schema = json.loads(schema_json)
    cls = validator_for(schema, default=Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        # The server will judge the arguments itself; a broken schema must not block the tool.
        logger.warning("tool schema is not valid JSON Schema, arguments are not checked: %s", exc.message)
        return None
    return cls(schema)


def _location(error: ValidationError) -> str:
    """``items[0].name`` style path of the failing value ('' at the top level)."""
    text = ""
    for part in error.absolute_path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _shorten(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def validate_arguments(tool: Tool, arguments: dict[str, Any]) -> str | None:
    """``None`` when ``arguments`` satisfy the tool's schema, else a message naming each field."""
    try:
        schema_json = json.dumps(tool.parameters, sort_keys=True)
    except (TypeError, ValueError):
        return None
    validator = _validator(schema_json)
    if validator is None:
        return None
    try:
        errors = sorted(validator.iter_errors(arguments), key=relevance, reverse=True)
    except Unresolvable as exc:
        # A $ref to another document (never fetched) or to nowhere: leave the check to the server.
        logger.warning("tool %s: unresolvable schema reference, arguments not checked: %s", tool.name, exc)
        return None
    if not errors:
        return None
    problems = []
    for error in errors[:MAX_REPORTED_ERRORS]:
        where = _location(error)
        message = _shorten(error.message)
        problems.append(f"at '{where}': {message}" if where else message)
    more = len(errors) - MAX_REPORTED_ERRORS
    if more > 0:
        problems.append(f"and {more} more")
    return f"Invalid arguments for {tool.name}: " + "; ".join(problems)


def _parse_arguments(name: str, arguments: dict[str, Any] | str | None) -> dict[str, Any] | ToolResult:
    """The arguments as a dict, or an error result the model can act on."""
    if arguments is None:
        return {}
    if isinstance(arguments, str):
        if not arguments.strip():
            return {}  # some models send "" for a tool without parameters
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as exc:
            return ToolResult.error(
                f"Invalid arguments for {name}: not valid JSON ({exc.msg} at line {exc.lineno} "
                f"column {exc.colno}); send a JSON object"
            )
    if not isinstance(arguments, dict):
        return ToolResult.error(
            f"Invalid arguments for {name}: expected a JSON object, got {type(arguments).__name__}"
        )
    return arguments


async def execute_tool(
    name: str,
    arguments: dict[str, Any] | str | None,
    *,
    allowed: Sequence[Tool] | None = None,
) -> ToolResult:
    """Run the tool ``name`` with ``arguments`` (a dict or the model's JSON string).

    ``allowed`` is the agent's tool list for this turn; a tool outside it is refused even if it
    exists. Unknown tools, unparsable or invalid arguments come back as error results.
    """
    pool = list(allowed) if allowed is not None else available_tools()
    tool = next((candidate for candidate in pool if candidate.name == name), None)
    if tool is None:
        if allowed is not None and any(candidate.name == name for candidate in available_tools()):
            return ToolResult.error(f'Tool "{name}" is not available to this agent')
        offered = ", ".join(candidate.name for candidate in pool[:50]) or "none"
        return ToolResult.error(f'Unknown tool "{name}". Available tools: {offered}')
    parsed = _parse_arguments(name, arguments)
    if isinstance(parsed, ToolResult):
        return parsed
    problem = validate_arguments(tool, parsed)
    if problem is not None:
        return ToolResult.error(problem)
    return await tool.execute(parsed)
