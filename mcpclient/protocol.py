"""Which MCP revision a connection speaks (2026-07-28 or the 2025-11-25 handshake), and what follows.

The hub connects every server in the SDK's ``"auto"`` mode, through the SDK's public
:class:`mcp.Client`: it probes ``server/discover`` (2026-07-28, stateless: the version rides in
each request's ``_meta`` and the ``MCP-Protocol-Version`` / ``Mcp-Method`` / ``Mcp-Name``
headers) and falls back to the ``initialize`` handshake for older servers. ``Client`` also
drives multi-round-trip calls (``InputRequiredResult`` retried with ``inputResponses``), resends
a call once after a ``HEADER_MISMATCH`` and caches listings by the server's ``ttlMs`` /
``cacheScope`` hints.

Lifecycle
---------
:func:`open_client` only builds the ``Client``; the hub's owner task enters and exits it with
``async with`` (which enters and exits the transport it wraps, in that same task). Once in,
:func:`negotiated` reads the version and server info for either era.

Change notifications differ by era. On 2025-11-25 ``notifications/tools/list_changed`` reaches
the ``message_handler``. On 2026-07-28 it comes only to a ``subscriptions/listen`` stream:
:func:`watch_tool_changes` runs in a task the owner starts with ``TaskGroup.start``; it returns
control (``task_status.started()``) once the server acknowledged the subscription (or refused
it, or the server cannot announce changes), then calls ``on_change`` per event until it is
cancelled with the owner's task group. A stream the server drops is opened again, followed by
one ``on_change`` (the spec: no replay, re-listen and refetch).

Elicitation: the client is a :class:`HubClient`, which advertises form-mode elicitation, hands
requests to :func:`mcpclient.elicitation.answer` and runs each ``call_tool`` as a scope the
requests are attributed to (who is asked, and when a request is declined, is described there).

Results without ``resultType``: the 2026-07-28 spec (basic, "Result") tells clients to read an
absent ``resultType`` as ``"complete"``, but ``mcp`` 2.3 refuses such a result on a 2026-07-28
connection. :func:`open_client` reads the transport through :class:`CompleteByDefault`, which
fills the field in on responses of a 2026-07-28 session before the SDK validates them.

Caching: the ``Client``'s cache evicts ``tools/list`` before a change event reaches the
hub, so a re-list after a change is fresh; :func:`list_all_tools` with ``fresh=True``
(rediscovery asked for by an administrator) bypasses whatever the server allowed to cache.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import anyio.abc
import mcp.types as types
from mcp import Client, MCPError
from mcp.client.session import ClientSession
from mcp.client.subscriptions import SubscriptionLost
from mcp.shared.message import SessionMessage
from mcp_types import CONNECTION_CLOSED, JSONRPCResponse
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcpclient import elicitation

logger = logging.getLogger(__name__)

MAX_TOOL_PAGES = 1000
# A stream the server keeps dropping is not re-opened forever: change events stop, calls go on.
MAX_LISTEN_RESTARTS = 5

Streams = AbstractAsyncContextManager[tuple[Any, Any]]


class HubClient(Client):
    """The SDK's ``Client`` with the hub's elicitation (form mode only, see :mod:`mcpclient.elicitation`).

    Every ``call_tool`` runs inside :func:`~mcpclient.elicitation.tool_call`, so an elicitation
    the server sends during the call (2025-11-25) or returns as an ``InputRequiredResult``
    (2026-07-28) is attributed to it.
    """

    async def _build_session(self, exit_stack: AsyncExitStack) -> ClientSession:
        return elicitation.advertise_form_only(await super()._build_session(exit_stack))

    async def call_tool(self, name: str, *args: Any, **kwargs: Any) -> types.CallToolResult:
        """``Client.call_tool`` as a call whose elicitations reach the person who made it."""
        with elicitation.tool_call(self.session, tool=name):
            return await super().call_tool(name, *args, **kwargs)

    def speaks_modern(self) -> bool:
        """True once a 2026-07-28 (or later) version is negotiated; False before and on 2025."""
        try:
            return self.session.protocol_version in MODERN_PROTOCOL_VERSIONS
        except RuntimeError:  # not entered yet
            return False


class CompleteByDefault:
    """A transport's read stream whose 2026-07-28 results lack no ``resultType`` (see the module).

    Implements the SDK's ``ReadStream`` protocol around the transport's stream; ``modern`` says
    whether the session has negotiated a 2026-07-28 version (before that, and on 2025
    connections, messages pass untouched).
    """

    def __init__(self, stream: Any, modern: Callable[[], bool]) -> None:
        self._stream = stream
        self._modern = modern

    def _fill(self, item: Any) -> Any:
        if (
            isinstance(item, SessionMessage)
            and isinstance(item.message, JSONRPCResponse)
            and "resultType" not in item.message.result
            and self._modern()
        ):
            item.message.result["resultType"] = "complete"
        return item

    async def receive(self) -> Any:
        return self._fill(await self._stream.receive())

    async def aclose(self) -> None:
        await self._stream.aclose()

    def __aiter__(self) -> CompleteByDefault:
        return self

    async def __anext__(self) -> Any:
        return self._fill(await self._stream.__anext__())

    async def __aenter__(self) -> CompleteByDefault:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __getattr__(self, name: str) -> Any:  # e.g. ``last_context`` of context-carrying streams
        return getattr(self._stream, name)


@asynccontextmanager
async def _complete_by_default(
    streams: Streams, modern: Callable[[], bool]
) -> AsyncIterator[tuple[Any, Any]]:
    async with streams as (read, write):
        yield CompleteByDefault(read, modern), write


def open_client(
    streams: Streams, *, client_info: types.Implementation, message_handler: Callable[[Any], Any]
) -> Client:
    """A ``Client`` over ``streams`` (any context manager yielding read/write) in ``"auto"`` mode.

    It answers elicitations (form mode; :func:`mcpclient.elicitation.answer`). No sampling or
    roots callback: an input of those kinds a server asks for mid-call is refused by the SDK's
    defaults, so the call ends as a readable tool error.
    """
    client = HubClient(
        _complete_by_default(streams, lambda: client.speaks_modern()),
        mode="auto",
        client_info=client_info,
        message_handler=message_handler,
        elicitation_callback=elicitation.answer,
    )
    return client


def is_modern(client: Client) -> bool:
    """True when the connection speaks a stateless revision (2026-07-28 or later)."""
    return client.protocol_version in MODERN_PROTOCOL_VERSIONS


def negotiated(client: Client) -> tuple[str, dict[str, Any]]:
    """The negotiated protocol version and the server's name/version/title (either era)."""
    info = client.server_info
    server_info = info.model_dump(exclude_none=True, include={"name", "version", "title"}) if info else {}
    return str(client.protocol_version), server_info


async def list_all_tools(client: Client, *, fresh: bool = False) -> list[types.Tool]:
    """Every page of ``tools/list`` (a repeated cursor or too many pages is an error).

    ``fresh`` skips the response cache; otherwise a first page the server allowed to be cached
    (``ttlMs``) may be served from it, and a change event has already evicted it.
    """
    tools: list[types.Tool] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_TOOL_PAGES):
        page = await client.list_tools(cursor=cursor, cache_mode="refresh" if fresh else "use")
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools
        if cursor in seen:
            raise MCPError(code=-32603, message=f"tools/list repeated cursor {cursor!r}")
        seen.add(cursor)
    raise MCPError(code=-32603, message=f"tools/list returned more than {MAX_TOOL_PAGES} pages")


def announces_tool_changes(client: Client) -> bool:
    """True when a 2026-07-28 server says it can announce tool-list changes."""
    tools = client.server_capabilities.tools
    return is_modern(client) and bool(tools and tools.list_changed)


async def watch_tool_changes(
    client: Client,
    on_change: Callable[[], None],
    *,
    name: str,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Relay a 2026-07-28 server's tool-list changes to ``on_change`` (run with ``TaskGroup.start``).

    Started once the subscription is acknowledged, so a change after the hub's first listing
    is not missed. Does nothing on 2025 connections (changes come as notifications) or when the
    server announces no changes.
    """
    if not announces_tool_changes(client):
        task_status.started()
        return
    started = False
    try:
        for _ in range(MAX_LISTEN_RESTARTS + 1):
            try:
                async with client.listen(tools_list_changed=True) as subscription:
                    if started:
                        on_change()  # events may have been missed while the stream was down
                    else:
                        task_status.started()
                        started = True
                    if not subscription.honored.tools_list_changed:
                        logger.info('MCP server "%s" does not announce tool-list changes', name)
                        await anyio.sleep_forever()
                    async for _event in subscription:
                        on_change()
                return  # the server closed the stream gracefully: the connection is ending
            except MCPError as exc:
                if exc.error.code == CONNECTION_CLOSED:
                    return  # the hub sees the end of the connection itself
                if not started:
                    # Refused outright (e.g. method not found): the server cannot tell us.
                    logger.info('MCP server "%s" refused subscriptions/listen: %s', name, exc)
                    return
                logger.info('MCP server "%s": tool-change stream failed (%s); listening again', name, exc)
            except SubscriptionLost as exc:
                logger.info('MCP server "%s": tool-change stream lost (%s); listening again', name, exc)
        logger.warning('MCP server "%s": tool-change stream keeps dropping; no longer listening', name)
    finally:
        if not started:
            task_status.started()
