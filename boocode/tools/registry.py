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

Time limits: nothing a tool does can block the event loop or outlast its limit.

- A native tool runs in a daemon thread of its own with a deadline ``BOOCODE_TOOL_TIMEOUT``
  seconds away, which the tool checks as it goes and answers with what it found so far. The
  registry stops waiting :data:`NATIVE_GRACE` seconds after the deadline in any case, returns
  an error naming the limit, and lets the thread finish its last step unobserved. Daemon
  threads are not joined at interpreter exit, so a running tool never delays a shutdown, and
  they leave the loop's default executor (the chat's database reads, DNS lookups) alone.
- An MCP call is bounded by its server's ``timeout`` (the hub's own limit, with the server's
  message); the registry adds :data:`MCP_GRACE` seconds on top for every other path (starting
  the hub, a transport that stops reading) and abandons the call after that. Neither limit
  runs while the server waits on the person behind the call (an elicitation form, see
  :mod:`mcpclient.engine.elicitation`); the form has its own limit.
- Argument validation never runs a regular expression of a tool's schema: jsonschema would use
  Python's backtracking ``re`` on the loop, where ``"^(a+)+$"`` and a crafted argument stall
  every user. ``pattern`` and ``patternProperties`` are left to the server.

Cancelling ``execute_tool()`` (a stopped turn) cancels the MCP request or stops waiting for the
native thread, which ends at its deadline.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import hashlib
import json
import logging
import threading
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache, partial
from typing import Any, Protocol

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, ValidationError, relevance
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for
from referencing.exceptions import Unresolvable

from agents.policy import ALLOW, ASK, DENY, approval_rule, is_allowed
from boocode.tools import skills
from boocode.tools.approval_gate import check_approval
from boocode.tools.native import NATIVE_TOOLS, Deadline, NativeTool, ToolTimeoutError, time_limit_message
from boocode.tools.workspace import WorkspaceError
from mcpclient.config.model import DEFAULT_TIMEOUT_MS
from mcpclient.core.approval import UNDECLARED_OWN_REASON, UNDECLARED_REASON, grant
from mcpclient.core.results import ToolResult, cap_output
from mcpclient.core.state import HubTool
from mcpclient.engine.elicitation import TimeBudget, timed_by
from mcpclient.runtime import get_hub, held_for_review, hub_call, hub_tools

__all__ = [
    "NATIVE_SOURCE",
    "Tool",
    "agent_tools",
    "available_tools",
    "execute_tool",
    "native_tools",
    "openai_tools",
    "validate_arguments",
    "view_tools",
    "within_model_bounds",
]

logger = logging.getLogger(__name__)

# The reasons an agent's ``approve: allow`` may vouch for: the tool said nothing (it did not
# declare readOnlyHint: true), as opposed to what its server's settings demand.
UNDECLARED_REASONS = (UNDECLARED_REASON, UNDECLARED_OWN_REASON)

NATIVE_SOURCE = "native"
MAX_REPORTED_ERRORS = 5
# Seconds the registry waits past a native tool's deadline for the tool's own answer (with its
# partial results) before it gives up on the thread.
NATIVE_GRACE = 0.5
# Seconds past a server's "timeout" before the registry abandons an MCP call: the hub's own
# timeout, with its clearer message, comes first whenever the session still works.
MCP_GRACE = 2.0
_EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}

Executor = Callable[[dict[str, Any]], Awaitable[ToolResult]]


class HasToolPatterns(Protocol):
    """Anything with the agent's ``tools`` patterns: an ``Agent`` row or an ``AgentSpec``."""

    @property
    def tools(self) -> Sequence[str] | None: ...


@dataclass(frozen=True)
class Tool:
    """A tool as the model sees it, and how to run it.

    ``title`` (the MCP tool's display name) and ``output_schema`` are for pages, not the model:
    :meth:`openai` leaves them out. A native tool has neither.
    """

    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments (an MCP tool's inputSchema as-is)
    read_only: bool
    source: str  # "native" or the MCP server's name
    executor: Executor = field(repr=False, compare=False)
    title: str = ""
    output_schema: dict[str, Any] | None = None
    # Why each call waits for the person's approval ("" when it does not; boocode.tools.approval_gate),
    # and the annotations the approval card shows.
    approval_reason: str = ""
    annotations: dict[str, Any] | None = None
    user_id: int | None = None  # whose sessions an MCP tool's calls run in
    views: bool = False  # a tool its server's views may call (MCP Apps), not the model's
    # The MCP tool's name on its server, and the SHA-256 of its accepted definition
    # (mcpclient.core.pinning); "" for a native tool.
    remote_name: str = ""
    definition_digest: str = ""
    # Why the agent's approval rules ask for each call ("" when they do not; :func:`agent_tools`).
    rule_reason: str = ""
    # The agent's ``approve: allow`` pattern that vouches for a tool whose only reason to ask is
    # that it does not declare ``readOnlyHint: true`` ("" for none): its calls are allowed, on the
    # record, without a card (boocode.chat.calls.approvals).
    allowed_by: str = ""

    async def execute(self, arguments: dict[str, Any]) -> ToolResult:
        """Run the tool with already-validated ``arguments``."""
        return await self.executor(arguments)

    def digest(self) -> str:
        """A digest of what the person and the model are shown and what decides the tool's safety."""
        shown = [
            self.name,
            self.source,
            self.title,
            self.description,
            self.parameters,
            self.output_schema,
            self.annotations,
            self.approval_reason,
            self.definition_digest,
        ]
        return hashlib.sha256(json.dumps(shown, sort_keys=True, default=str).encode()).hexdigest()[:32]

    def openai(self) -> dict[str, Any]:
        """The tool in the OpenAI Chat Completions ``tools`` format."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }

    @cached_property
    def definition_json(self) -> str:
        """:meth:`openai` as the JSON a request carries; made once per tool (a turn's checks weigh
        every definition: whether to defer them, what one request may carry, their tokens)."""
        return json.dumps(self.openai(), ensure_ascii=False)


def _in_daemon_thread(function: Callable[[], str]) -> asyncio.Future[str]:
    """Start ``function`` in a new daemon thread; the returned future gets its outcome.

    Not ``asyncio.to_thread``: the default executor's threads are joined at interpreter exit (a
    tool still running would keep a stopped server alive), and its few workers also serve the
    chat's database reads and DNS lookups, which slow tools must not hold up. Cancelling the
    future only stops the waiting; the function ends at its own deadline.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[str] = loop.create_future()
    context = contextvars.copy_context()  # as asyncio.to_thread does (settings overrides, logging)

    def settle(result: str | None, error: BaseException | None) -> None:
        if future.done():  # the caller stopped waiting (time limit, cancelled turn)
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result or "")

    def work() -> None:
        error: BaseException | None = None
        result: str | None = None
        try:
            result = context.run(function)
        except BaseException as exc:  # handed to the waiting task, as concurrent.futures does
            error = exc
        try:
            loop.call_soon_threadsafe(settle, result, error)
        except RuntimeError:
            pass  # the loop is closed (server shut down): nobody waits for this result any more

    threading.Thread(target=work, name="boocode-native-tool", daemon=True).start()
    return future


async def _run_native(tool: NativeTool, arguments: dict[str, Any]) -> ToolResult:
    """Run a blocking native tool in its own thread within the time limit; failures are error results."""
    limit = float(settings.TOOL_TIMEOUT)
    deadline = Deadline.after(limit)
    waiting = asyncio.timeout(limit + NATIVE_GRACE)
    try:
        async with waiting:
            output = await _in_daemon_thread(partial(tool.function, **arguments, deadline=deadline))
    except ToolTimeoutError as exc:
        message = f"{tool.name}: {exc}"
        if exc.partial:
            message += f"\nFound before the limit:\n{exc.partial}"
        return ToolResult.error(cap_output(message))
    except (WorkspaceError, ImproperlyConfigured) as exc:
        if isinstance(exc, ImproperlyConfigured):
            logger.error("native tool %s: %s", tool.name, exc)
        return ToolResult.error(f"{tool.name}: {exc}")
    except OSError as exc:  # TimeoutError is an OSError: the file system's, or ours
        if waiting.expired():
            logger.warning("native tool %s overran its time limit of %g s", tool.name, limit)
            return ToolResult.error(
                f"{tool.name}: {time_limit_message(limit)}; the call was abandoned, narrow the request"
            )
        return ToolResult.error(f"{tool.name}: {exc.strerror or exc}")
    return ToolResult(output=cap_output(output))


def _server_timeout(server: str) -> float:
    """The server's ``timeout`` from mcp.json, in seconds (the default when it is not connected)."""
    hub = get_hub()
    connection = hub.connection(server) if hub is not None else None
    return connection.config.timeout if connection is not None else DEFAULT_TIMEOUT_MS / 1000


# Calls given up on, still finishing their cleanup; kept so the tasks are not garbage-collected.
_abandoned: set[asyncio.Task[ToolResult]] = set()


def _abandon(task: asyncio.Task[ToolResult]) -> None:
    """Cancel ``task`` without waiting: the SDK's shielded cleanup can take seconds more."""
    task.cancel()
    _abandoned.add(task)
    task.add_done_callback(_abandoned.discard)
    # Read the outcome when it comes, so asyncio logs no "exception was never retrieved".
    task.add_done_callback(lambda done: done.cancelled() or done.exception())


async def _call_mcp(
    prefixed_name: str,
    server: str,
    tool: str,
    arguments: dict[str, Any],
    *,
    user_id: int | None = None,
    views: bool = False,
) -> ToolResult:
    """Call an MCP tool through the hub, abandoned :data:`MCP_GRACE` s after the server's timeout.

    The call runs as its own task and is abandoned rather than awaited to its end: cancelling an
    SDK request sends a courtesy ``notifications/cancelled`` under a shield, which waits up to
    5 s more when the transport is stuck.
    """
    limit = _server_timeout(server)
    # Eager: the request goes out now, without waiting a loop iteration for the task to start.
    request = hub_call(prefixed_name, arguments, user_id=user_id, views=views)
    # The limit does not run while the server waits on the person who made the call (elicitation).
    budget = TimeBudget(limit + MCP_GRACE)
    with timed_by(budget):
        call = asyncio.eager_task_factory(asyncio.get_running_loop(), request)
    try:
        finished = await budget.wait(call)
    except asyncio.CancelledError:
        _abandon(call)
        raise
    if finished:
        return call.result()
    _abandon(call)
    logger.warning('MCP tool "%s" of server "%s" gave no result within %g s', tool, server, limit)
    return ToolResult.error(
        f'MCP server "{server}": tool "{tool}" gave no result within {limit:g} s (the server\'s '
        '"timeout" in mcp.json); the call was abandoned'
    )


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
        tools[name] = _mcp_tool(hub_tool, user_id)
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
    return [_mcp_tool(tool, user_id, views=True) for tool in found if tool.server == server]


def _mcp_tool(hub_tool: HubTool, user_id: int | None, *, views: bool = False) -> Tool:
    name = hub_tool.prefixed_name
    return Tool(
        name=name,
        description=hub_tool.description,
        parameters=hub_tool.input_schema or dict(_EMPTY_SCHEMA),
        read_only=hub_tool.read_only,
        source=hub_tool.server,
        executor=partial(_call_mcp, name, hub_tool.server, hub_tool.name, user_id=user_id, views=views),
        title=hub_tool.title,
        output_schema=hub_tool.output_schema,
        approval_reason=hub_tool.approval_reason,
        annotations=hub_tool.annotations,
        user_id=user_id,
        views=views,
        remote_name=hub_tool.name,
        definition_digest=hub_tool.digest,
    )


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
    now_tool = _with_rule(_mcp_tool(current, tool.user_id, views=tool.views), tool.rule_reason)
    return _allowed_by(now_tool, tool.allowed_by) if tool.allowed_by else now_tool


def _allowed_by(tool: Tool, pattern: str) -> Tool:
    """``tool`` vouched for by the agent's ``approve: allow`` ``pattern``, when the only reason it
    asks is that it does not declare ``readOnlyHint: true``; an approval its server's settings
    demand (``writeTools``, ``trusted: false``) or the agent's own ``ask`` stays."""
    if tool.rule_reason or tool.approval_reason not in UNDECLARED_REASONS:
        return tool
    return dataclasses.replace(tool, allowed_by=pattern)


def _with_rule(tool: Tool, reason: str) -> Tool:
    """``tool`` asked for by the agent's rules (``reason``); the server's own reason, if any, stays."""
    if not reason:
        return tool
    return dataclasses.replace(tool, approval_reason=tool.approval_reason or reason, rule_reason=reason)


def rule_reason(pattern: str) -> str:
    """What the approval card says of a call asked for by the agent's ``approve: ask`` rule."""
    return f'the agent\'s approval rules ask for each call ("approve: ask" matches "{pattern}")'


def agent_tools(
    agent: HasToolPatterns, tools: Iterable[Tool] | None = None, *, user_id: int | None = None
) -> list[Tool]:
    """The tools ``agent`` may use now (for ``user_id``): its patterns applied to the registry.

    Its approval rules (``approve:``, :func:`agents.policy.approval_rule`) apply too: a denied
    tool is left out, a tool the rules ask for needs the person's approval for each call, and
    ``allow`` vouches for a tool that asks only because it does not declare ``readOnlyHint: true``.
    ``tools`` defaults to :func:`available_tools`; pass a list to reuse one already built.
    """
    candidates = available_tools(user_id) if tools is None else list(tools)
    patterns = agent.tools
    rules = getattr(agent, "approve", None)
    allowed = []
    for tool in candidates:
        if not is_allowed(patterns, tool.name):
            continue
        rule, pattern = approval_rule(rules, tool.name)
        if rule == DENY:
            continue
        if rule == ASK:
            tool = _with_rule(tool, rule_reason(pattern))
        elif rule == ALLOW:
            tool = _allowed_by(tool, pattern)
        allowed.append(tool)
    return allowed


def openai_tools(tools: Iterable[Tool]) -> list[dict[str, Any]]:
    """``tools`` in the OpenAI ``tools`` request format, in the order given."""
    return [tool.openai() for tool in tools]


# What one model request may carry: at most this many tools and this many bytes of their
# definitions (as JSON). Past either, the rest of the agent's tools are left out of the request.
MAX_MODEL_TOOLS = 512
MAX_MODEL_TOOL_BYTES = 1024 * 1024


def within_model_bounds(tools: list[Tool]) -> tuple[list[Tool], list[dict[str, Any]]]:
    """The first of ``tools`` that fit one model request (:data:`MAX_MODEL_TOOLS`), with their definitions."""
    kept: list[Tool] = []
    definitions: list[dict[str, Any]] = []
    size = 0
    for tool in tools[:MAX_MODEL_TOOLS]:
        size += len(tool.definition_json.encode())
        if size > MAX_MODEL_TOOL_BYTES:
            break
        kept.append(tool)
        definitions.append(tool.openai())
    return kept, definitions


# Keywords whose value is a map of names to subschemas: the names are data, never keywords.
_SCHEMA_MAPS = frozenset({"properties", "$defs", "definitions", "dependentSchemas"})
# Keywords whose value is data to compare, not a schema.
_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})


def _without_regexes(schema: Any) -> Any:
    """``schema`` without the keywords that would run its regular expressions.

    jsonschema evaluates ``pattern`` and ``patternProperties`` with Python's ``re``, which
    backtracks and holds the GIL; validation runs on the event loop, so a schema pattern such as
    ``"^(a+)+$"`` and a crafted argument would stall every user. The server checks them anyway.
    Where ``patternProperties`` goes, ``additionalProperties`` and ``unevaluatedProperties`` go
    too: names the patterns allowed must not be refused as additional.
    """
    if isinstance(schema, list):
        return [_without_regexes(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    result: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _DATA_KEYWORDS:
            result[key] = value
        elif (key == "pattern" and isinstance(value, str)) or (
            key == "patternProperties" and isinstance(value, dict)
        ):
            continue
        elif key in _SCHEMA_MAPS and isinstance(value, dict):
            result[key] = {name: _without_regexes(sub) for name, sub in value.items()}
        else:
            result[key] = _without_regexes(value)
    if isinstance(schema.get("patternProperties"), dict):
        result.pop("additionalProperties", None)
        result.pop("unevaluatedProperties", None)
    return result


@lru_cache(maxsize=512)
def _validator(schema_json: str) -> Validator | None:
    """A compiled validator for a schema (by its canonical JSON), or None if the schema is broken."""
    schema = _without_regexes(json.loads(schema_json))
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
        except RecursionError:
            return ToolResult.error(
                f"Invalid arguments for {name}: JSON nested too deeply; send a flat object"
            )
    if not isinstance(arguments, dict):
        return ToolResult.error(
            f"Invalid arguments for {name}: expected a JSON object, got {type(arguments).__name__}"
        )
    try:  # a "\ud800" escape decodes to text no server can receive (and one crashed on it)
        json.dumps(arguments, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        return ToolResult.error(
            f"Invalid arguments for {name}: an unpaired surrogate (U+{ord(exc.object[exc.start]):04X}) "
            "is not valid Unicode text"
        )
    return arguments


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
    parsed = _parse_arguments(name, arguments)
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
