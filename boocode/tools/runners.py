"""How a tool runs within its time limit: nothing a tool does can block the event loop or outlast it.

- A native tool runs in a daemon thread of its own with a deadline ``BOOCODE_TOOL_TIMEOUT``
  seconds away, which the tool checks as it goes and answers with what it found so far. The
  runner stops waiting :data:`NATIVE_GRACE` seconds after the deadline in any case, returns
  an error naming the limit, and lets the thread finish its last step unobserved. Daemon
  threads are not joined at interpreter exit, so a running tool never delays a shutdown, and
  they leave the loop's default executor (the chat's database reads, DNS lookups) alone.
- An MCP call is bounded by its server's ``timeout`` (the hub's own limit, with the server's
  message); the runner adds :data:`MCP_GRACE` seconds on top for every other path (starting
  the hub, a transport that stops reading) and abandons the call after that. Neither limit
  runs while the server waits on the person behind the call (an elicitation form, see
  :mod:`mcpclient.engine.elicitation`); the form has its own limit.

Cancelling a run (a stopped turn) cancels the MCP request or stops waiting for the native
thread, which ends at its deadline. Nothing here raises for a failed run: it is an error
:class:`~mcpclient.core.results.ToolResult`.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
from collections.abc import Callable
from functools import partial
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from boocode.tools.native import Deadline, NativeTool, ToolTimeoutError, time_limit_message
from boocode.tools.workspace import WorkspaceError
from mcpclient.config.model import DEFAULT_TIMEOUT_MS
from mcpclient.core.results import ToolResult, cap_output
from mcpclient.engine.elicitation import TimeBudget, timed_by
from mcpclient.runtime import get_hub, hub_call

logger = logging.getLogger(__name__)

# Seconds the runner waits past a native tool's deadline for the tool's own answer (with its
# partial results) before it gives up on the thread.
NATIVE_GRACE = 0.5
# Seconds past a server's "timeout" before the runner abandons an MCP call: the hub's own
# timeout, with its clearer message, comes first whenever the session still works.
MCP_GRACE = 2.0


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


async def run_native(tool: NativeTool, arguments: dict[str, Any]) -> ToolResult:
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


async def call_mcp(
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
