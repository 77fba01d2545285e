"""Which MCP revision a connection speaks (2026-07-28 or the 2025-11-25 handshake), and the hub's Client.

Invariants. :func:`open_client` only builds the :class:`HubClient`; the session's owner task enters
and exits it with ``async with`` (and so the transport it wraps), in that one task. Every
``call_tool`` runs as an elicitation :class:`~mcpclient.engine.elicitation.CallScope` with a progress
token, and is retried at most once after a ``-32042``. ``notifications/elicitation/complete`` is
taken before the owner's message handler sees the message. :class:`CompleteByDefault` fills in
``resultType`` only on responses of a session that negotiated 2026-07-28. :func:`watch_changes`
opens ONE ``subscriptions/listen`` stream per session and lets its starter go on only once the
server acknowledged (or refused) it, so no change after the first listings is missed; a dropped
stream is re-opened at most :data:`MAX_LISTEN_RESTARTS` times, each time followed by one call of
every handler (no replay). :func:`list_all_tools` with ``fresh=True`` bypasses the SDK's cache.

The tour: docs/architecture.md, "The MCP hub" (*Two protocol revisions*, *Elicitation*, *List changes*).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any, Literal

import anyio
import anyio.abc
import mcp.types as types
from mcp import Client, MCPError
from mcp.client.extension import advertise
from mcp.client.session import ClientSession
from mcp.client.subscriptions import (
    PromptsListChanged,
    ResourcesListChanged,
    SubscriptionLost,
    ToolsListChanged,
)
from mcp.shared.message import SessionMessage
from mcp_types import CONNECTION_CLOSED, URL_ELICITATION_REQUIRED, JSONRPCResponse
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcpclient.core import mcp_apps
from mcpclient.engine import elicitation, listing, progress

logger = logging.getLogger(__name__)

MAX_TOOL_PAGES = 1000
# Tools kept per server: past it the listing stops, and the tools left out are named in the admin.
MAX_TOOLS = 1000
# A stream the server keeps dropping is not re-opened forever: change events stop, calls go on.
MAX_LISTEN_RESTARTS = 5
# The skills extension (SEP-2640; mcpclient.engine.skills): every session says it loads skills
# itself, so a server that offers plain hosts a skill-loading tool of its own may leave it out.
SKILLS_EXTENSION = "io.modelcontextprotocol/skills"

Streams = AbstractAsyncContextManager[tuple[Any, Any]]


class HubClient(Client):
    """The SDK's ``Client`` with the hub's elicitation (forms and links: :mod:`mcpclient.engine.elicitation`).

    Every ``call_tool`` runs inside :func:`~mcpclient.engine.elicitation.tool_call`, so an elicitation
    the server sends during the call (2025-11-25) or returns as an ``InputRequiredResult``
    (2026-07-28) is attributed to it.
    """

    async def _build_session(self, exit_stack: AsyncExitStack) -> ClientSession:
        session = elicitation.advertise(await super()._build_session(exit_stack))
        # Tool lists read tool by tool (mcpclient.engine.listing); what that changed, by page.
        self.listing_notes: dict[str | None, listing.PageNotes] = {}
        listing.install(session, self.listing_notes, lambda: session._negotiated_version or "2025-11-25")
        return session

    async def call_tool(self, name: str, *args: Any, **kwargs: Any) -> types.CallToolResult:
        """``Client.call_tool`` as a call whose elicitations and progress reach the person who made it."""
        with (
            elicitation.tool_call(self.session, tool=name) as scope,
            progress.tool_call(tool=name) as on_progress,
        ):
            if len(args) < 3:  # (arguments, read_timeout_seconds, progress_callback) may be positional
                kwargs.setdefault("progress_callback", on_progress)
            return await self._call_completing_links(scope, name, *args, **kwargs)

    async def _call_completing_links(
        self, scope: elicitation.CallScope, name: str, *args: Any, **kwargs: Any
    ) -> types.CallToolResult:
        """``Client.call_tool``; after a ``-32042`` error (URL elicitation required) the person
        completes its links and the call is retried once (a second ``-32042`` is a readable error)."""
        try:
            return await super().call_tool(name, *args, **kwargs)
        except MCPError as exc:
            if exc.error.code != URL_ELICITATION_REQUIRED:
                raise
            await elicitation.complete_required(scope, exc.error)
        try:
            return await super().call_tool(name, *args, **kwargs)
        except MCPError as exc:
            if exc.error.code != URL_ELICITATION_REQUIRED:
                raise
            message = f"the server still requires a web page to be opened after a retry: {exc.error.message}"
            raise MCPError(code=URL_ELICITATION_REQUIRED, message=message) from None

    def speaks_modern(self) -> bool:
        """True once a 2026-07-28 (or later) version is negotiated; False before and on 2025."""
        try:
            return self.session.protocol_version in MODERN_PROTOCOL_VERSIONS
        except RuntimeError:  # not entered yet
            return False


class CompleteByDefault:
    """A transport's read stream whose 2026-07-28 results lack no ``resultType`` (absent: ``"complete"``).

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
    streams: Streams,
    *,
    client_info: types.Implementation,
    message_handler: Callable[[Any], Any],
    apps: bool = False,
) -> Client:
    """A ``Client`` over ``streams`` (any context manager yielding read/write) in ``"auto"`` mode.

    It answers elicitations (form and URL mode; :func:`mcpclient.engine.elicitation.answer`) and
    refuses sampling with a reason (:func:`mcpclient.engine.elicitation.refuse_sampling`). No roots
    callback: roots a server asks for mid-call are refused by the SDK's default, so the call
    ends as a readable tool error. ``notifications/elicitation/complete`` is taken here, before
    ``message_handler`` sees the message. With ``apps`` the client advertises the MCP Apps
    extension (:mod:`mcpclient.core.mcp_apps`) on every revision, so the server may list its views.
    The skills extension (:data:`SKILLS_EXTENSION`, no settings) is advertised always.
    """

    async def handle(message: Any) -> None:
        if isinstance(message, types.ElicitCompleteNotification):
            elicitation.completed(client.session, message.params.elicitation_id)
        await message_handler(message)

    client = HubClient(
        _complete_by_default(streams, lambda: client.speaks_modern()),
        mode="auto",
        client_info=client_info,
        message_handler=handle,
        elicitation_callback=elicitation.answer,
        extensions=[
            *([advertise(mcp_apps.EXTENSION, mcp_apps.settings())] if apps else []),
            advertise(SKILLS_EXTENSION),
        ],
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

    The listing stops once it holds more than :data:`MAX_TOOLS` (the caller keeps that many).
    ``fresh`` skips the response cache; otherwise a first page the server allowed to be cached
    (``ttlMs``) may be served from it, and a change event has already evicted it.
    """
    mode: CacheMode = "refresh" if fresh else "use"
    fetch = lambda cursor: client.list_tools(cursor=cursor, cache_mode=mode)  # noqa: E731
    return await all_pages(fetch, "tools", "tools/list", MAX_TOOL_PAGES, enough=MAX_TOOLS)


def listing_note(client: Client) -> str:
    """What the last tool listing repaired or left out ("" when it read every tool as it was)."""
    return listing.describe(getattr(client, "listing_notes", {}))


def oversized_tools(client: Client) -> dict[str, str]:
    """The tools of the last listing held for their size (name -> why; :mod:`mcpclient.engine.listing`)."""
    return listing.oversized(getattr(client, "listing_notes", {}))


def parameters_unknown(client: Client) -> set[str]:
    """The tools of the last listing whose repaired schema names no parameter
    (:mod:`mcpclient.engine.listing`)."""
    return listing.parameters_unknown(getattr(client, "listing_notes", {}))


def tools_over_limit(tools: list[types.Tool]) -> str:
    """What the admin is told about the tools past :data:`MAX_TOOLS` ("" when there are none)."""
    left_out = tools[MAX_TOOLS:]
    if not left_out:
        return ""
    names = ", ".join(tool.name for tool in left_out[:5]) + (", …" if len(left_out) > 5 else "")
    return (
        f"The server lists more than {MAX_TOOLS:,} tools: the first {MAX_TOOLS:,} are kept and "
        f"{len(left_out):,} or more were left out ({names})."
    )


async def all_pages(
    fetch: Callable[[str | None], Any],
    items: str,
    method: str,
    max_pages: int,
    *,
    enough: int | None = None,
    at_most: int | None = None,
) -> list[Any]:
    """Every page of a paginated listing: ``fetch(cursor)`` gives a page whose ``items`` it collects.

    A repeated cursor or more than ``max_pages`` pages is an :class:`MCPError` naming ``method``;
    so are more than ``at_most`` entries. With ``enough``, the listing stops (no error) once it
    holds more than that many entries.
    """
    collected: list[Any] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(max_pages):
        page = await fetch(cursor)
        collected.extend(getattr(page, items))
        if at_most is not None and len(collected) > at_most:
            raise MCPError(code=-32603, message=f"{method} returned more than {at_most} entries")
        cursor = page.next_cursor
        if not cursor or (enough is not None and len(collected) > enough):
            return collected
        if cursor in seen:
            raise MCPError(code=-32603, message=f"{method} repeated cursor {cursor!r}")
        seen.add(cursor)
    raise MCPError(code=-32603, message=f"{method} returned more than {max_pages} pages")


# Which list a ``subscriptions/listen`` event says has changed (the SDK's typed events).
# The SDK's cache modes of a list request.
CacheMode = Literal["use", "refresh", "bypass"]

CHANGE_KINDS: dict[type, str] = {
    ToolsListChanged: "tools",
    ResourcesListChanged: "resources",
    PromptsListChanged: "prompts",
}


def announced_changes(client: Client) -> frozenset[str]:
    """The lists ("tools", "resources", "prompts") a 2026-07-28 server says it announces changes for."""
    if not is_modern(client):
        return frozenset()
    capabilities = client.server_capabilities
    return frozenset(
        kind
        for kind in CHANGE_KINDS.values()
        if (capability := getattr(capabilities, kind)) is not None and capability.list_changed
    )


async def watch_changes(
    client: Client,
    on_change: Mapping[str, Callable[[], None]],
    *,
    name: str,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Relay a 2026-07-28 server's list changes to ``on_change[kind]`` (run with ``TaskGroup.start``).

    One ``subscriptions/listen`` stream per session asks for every list in ``on_change`` the
    server announces changes for; each event goes to the handler of the list it names. Started
    once the subscription is acknowledged, so a change after the first listings is not missed.
    A dropped stream is opened again and every handler is called once (no replay: refetch).
    Does nothing on 2025 connections (changes come as notifications) or when the server
    announces no changes.
    """
    kinds = announced_changes(client) & on_change.keys()
    if not kinds:
        task_status.started()
        return
    started = False
    try:
        for _ in range(MAX_LISTEN_RESTARTS + 1):
            try:
                listening = client.listen(
                    tools_list_changed="tools" in kinds,
                    prompts_list_changed="prompts" in kinds,
                    resources_list_changed="resources" in kinds,
                )
                async with listening as subscription:
                    if started:
                        for kind in sorted(kinds):
                            on_change[kind]()  # events may have been missed while the stream was down
                    else:
                        task_status.started()
                        started = True
                    accepted = subscription.honored
                    honored = {kind for kind in kinds if getattr(accepted, f"{kind}_list_changed")}
                    if missing := ", ".join(sorted(kinds - honored)):
                        logger.info('MCP server "%s" does not announce changes of: %s', name, missing)
                    if not honored:
                        await anyio.sleep_forever()
                    async for event in subscription:
                        changed = CHANGE_KINDS.get(type(event))
                        if changed in honored:
                            on_change[changed]()
                return  # the server closed the stream gracefully: the connection is ending
            except MCPError as exc:
                if exc.error.code == CONNECTION_CLOSED:
                    return  # the hub sees the end of the connection itself
                if not started:
                    # Refused outright (e.g. method not found): the server cannot tell us.
                    logger.info('MCP server "%s" refused subscriptions/listen: %s', name, exc)
                    return
                logger.info('MCP server "%s": change stream failed (%s); listening again', name, exc)
            except SubscriptionLost as exc:
                logger.info('MCP server "%s": change stream lost (%s); listening again', name, exc)
        logger.warning('MCP server "%s": change stream keeps dropping; no longer listening', name)
    finally:
        if not started:
            task_status.started()
