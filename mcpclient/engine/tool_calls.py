"""One ``tools/call`` on a live session: its span and count, the request (its ``_meta`` carrying the
trace context and the log-level opt-in), and what its failure means (:func:`call_failure`).

Nothing here touches a connection: :class:`~mcpclient.engine.connection.ServerConnection` records
what a failure says of its session (ends it, asks for a sign-in) and answers the call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast

import anyio
import httpx2
import mcp.types as types
import pydantic
from mcp import Client, MCPError
from mcp.client import InputRequiredRoundsExceededError
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

from mcpclient.core.results import ToolResult
from mcpclient.engine.connection_failures import describe
from mcpclient.telemetry import metrics, tracing

# How the SDK's RuntimeError begins when a tool's structured content breaks its outputSchema.
_OUTPUT_SCHEMA_ERRORS = ("Invalid structured content returned by tool", "Invalid schema for tool")


async def traced(
    call: Callable[[], Awaitable[tuple[ToolResult, str]]],
    *,
    server: str,
    tool: str,
    protocol_version: str,
    stdio: bool,
) -> ToolResult:
    """Run ``call`` as the MCP request span (``tools/call <tool>``) and count its outcome in
    ``boocode_mcp_tool_calls_total`` (:mod:`mcpclient.telemetry`); a cancelled call counts too."""
    attributes = {
        "mcp.method.name": "tools/call",
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "boocode.mcp.server": server,
        "mcp.protocol.version": protocol_version,
        "network.transport": "pipe" if stdio else "tcp",
    }
    outcome = "cancelled"
    with tracing.span(f"tools/call {tool}", kind="client", attributes=attributes) as span:
        try:
            result, outcome = await call()
        finally:
            metrics.MCP_TOOL_CALLS.labels(server, outcome).inc()
            tracing.outcome(span, "" if outcome == "ok" else outcome, **{"boocode.outcome": outcome})
    return result


async def send(
    client: Client, tool: str, arguments: dict[str, Any], *, meta: dict[str, Any] | None, timeout: float
) -> types.CallToolResult:
    """The request itself, bounded by ``timeout``; what it raises is the caller's (:data:`CALL_ERRORS`).

    Client.call_tool answers a 2026-07-28 InputRequiredResult itself (elicitation through
    mcpclient.engine.elicitation); an input the hub cannot give (sampling, roots) ends as an
    MCPError. The _meta carries the trace context (MCP reserves traceparent, tracestate and
    baggage there) beside the log-level opt-in.
    """
    with_context = tracing.meta_with_context(meta)
    metrics.tool_step_reached()
    typed_meta = cast("types.RequestParamsMeta | None", with_context)
    return await client.call_tool(tool, arguments, read_timeout_seconds=timeout, meta=typed_meta)


# What a tool call may raise that is the call's failure (anything else propagates).
CALL_ERRORS = (
    MCPError,
    pydantic.ValidationError,
    RuntimeError,
    InputRequiredRoundsExceededError,
    httpx2.TransportError,
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
    OSError,
)


@dataclass(frozen=True)
class CallFailure:
    """How a failed call ends: its outcome (one of :data:`mcpclient.telemetry.metrics.MCP_OUTCOMES`)
    and its text: the error the model reads, or for ``"unreachable"`` why the session is lost."""

    outcome: str
    message: str
    # An error answer of the server: when the connection's sign-in failed meanwhile, the token was
    # refused (revoked, expired and not refreshable) and the server waits for a sign-in instead.
    refused_token: bool = False


def call_failure(
    exc: BaseException, *, server: str, tool: str, timeout: float, protocol_version: str
) -> CallFailure | None:
    """What ``exc``, raised by ``tools/call`` of ``tool`` on ``server``, means; None: not a failure
    of the call (the caller raises it again). The arms are tried in order."""
    if isinstance(exc, MCPError):
        if exc.error.code == REQUEST_TIMEOUT:
            return CallFailure(
                "timeout",
                f'MCP server "{server}": tool "{tool}" timed out after {timeout:g} s '
                f'(the server\'s "timeout" in mcp.json)',
            )
        if exc.error.code == CONNECTION_CLOSED:
            return CallFailure("unreachable", "connection closed")
        message = f'MCP server "{server}": tool "{tool}" failed: {exc.error.message}'
        return CallFailure("failed", message, refused_token=True)
    if isinstance(exc, pydantic.ValidationError):
        # e.g. a 2026-07-28 result without ``resultType``: the server broke the protocol.
        first = str(exc).splitlines()[0]
        return CallFailure(
            "failed",
            f'MCP server "{server}": tool "{tool}" returned an invalid result '
            f"for protocol {protocol_version}: {first}",
        )
    if isinstance(exc, RuntimeError):
        # The SDK checks structured content against the tool's outputSchema and raises a bare
        # RuntimeError when it does not match: the server broke its own contract.
        if not str(exc).startswith(_OUTPUT_SCHEMA_ERRORS) and "has an output schema" not in str(exc):
            return None
        first = str(exc).splitlines()[0]
        return CallFailure(
            "failed",
            f'MCP server "{server}": tool "{tool}" returned a result that does not match its '
            f"output schema: {first}",
        )
    if isinstance(exc, InputRequiredRoundsExceededError):
        return CallFailure(
            "failed", f'MCP server "{server}": tool "{tool}" failed: the server kept asking for more input'
        )
    if isinstance(exc, httpx2.TransportError):
        # One HTTP exchange failed (the transport turns most of these into an error answer,
        # see mcpclient.engine.transports.DeliveryGuard): the call fails, the session stays. A dead
        # session shows as the end of its stream or a failed ping instead.
        return CallFailure(
            "failed",
            f'MCP server "{server}": tool "{tool}" failed: the HTTP request failed ({describe(exc)})',
        )
    if isinstance(exc, anyio.ClosedResourceError | anyio.BrokenResourceError | OSError):
        return CallFailure("unreachable", describe(exc))
    return None
