"""The MCP hub: one persistent session per enabled server, their tools, and tool calls.

Lifecycle
---------
Each server is held by one *owner task* (:class:`ServerConnection`). The owner opens the
transport and the SDK's ``Client`` with ``async with``, negotiates the protocol revision
(``server/discover`` for 2026-07-28, else the ``initialize`` handshake: see
:mod:`mcpclient.protocol`), on 2026-07-28 starts a watcher task for tool-list changes in its
own task group, lists every page of tools, marks the server ready and then waits for
commands ("stop", "relist", "closed"). anyio requires a transport to be entered and exited in
the same task, so nothing but the owner ever opens or closes it; any other task may call
``call_tool`` on the ready client concurrently. Leaving, the owner cancels its watcher first.

Start: :meth:`Hub.start` (or :meth:`Hub.apply`) creates the owner tasks and waits until
each has settled (ready or failed). Servers connect concurrently; each connect +
negotiation + list is bounded by the server's ``initTimeout``.

Tool-list changes: a 2025 server's ``notifications/tools/list_changed`` and a 2026-07-28
server's ``subscriptions/listen`` event both ask the owner to list again (a burst costs one
listing); the SDK's response cache is evicted before the event arrives, so the listing is fresh.
The session's one stream (:func:`mcpclient.protocol.watch_changes`) carries the resource- and
prompt-list changes too; :meth:`Hub.rediscover` lists all three again.

Transports: stdio, Streamable HTTP and legacy SSE (:mod:`mcpclient.transports`). An entry
with ``sse_fallback`` (a ``url`` without a ``type``) tries Streamable HTTP first; when the
server answers the ``initialize`` POST (the ``server/discover`` probe before it does not
count) with HTTP 400, 404 or 405, or with something that is not a Streamable HTTP answer, the
owner closes that attempt and opens legacy SSE once, within the same ``initTimeout`` (the MCP
spec's backwards-compatibility procedure). The transport that worked is published as
``ServerSnapshot.transport``.

Tools: the entry's ``includeTools`` / ``excludeTools`` and the read-only guard are applied at
discovery. A tool they leave out is kept, ``filtered`` or ``rejected`` with the reason, so the
admin can show it, but it is never offered. With ``writeTools: "approve"`` (or ``trusted:
false``) a tool is offered with an ``approval_reason`` instead: the chat asks the person
before each call (:mod:`mcpclient.approval`).

Failure: a server that cannot start is ``failed`` with ``last_error`` and contributes no
tools; the others run. ``last_error`` ends with the last lines of the server's stderr, which
can hold secrets: it is for staff (admin, staff status line, logs). Users and the model read
``reason``, the same text without stderr, and URLs in both are redacted. The session's
incoming stream is relayed through the owner so an end of stream (child exited, connection
broken) is seen at once: the server becomes ``unavailable``, in-flight calls get
``MCP server "<name>" unreachable: ...`` and so do later ones. A failed HTTP exchange of one
call is that call's error, not the session's end (:class:`mcpclient.transports.DeliveryGuard`).

Healing (:mod:`mcpclient.healing`, with the hub's :attr:`Hub.healing` policy): while ready, the
owner pings the session on an interval; a failed or unanswered ping ends the session like an
end of stream. After a lost session or a failed start the owner stays alive: it waits for the
retry time (exponential backoff with jitter, then an open circuit), takes one of the hub's
reconnect slots, connects again and lists the tools again; calls meanwhile fail at once with the
retry plan in the error. Sign-in failures, configuration errors and stopped servers are not
retried. :meth:`Hub.reconnect` starts a fresh connection at once (attempts reset).

Stop: :meth:`Hub.stop` asks every owner to leave its ``async with`` blocks: the session
closes and stdio children get the SDK's shutdown (stdin closed, then SIGTERM, then SIGKILL
after :data:`mcpclient.transports.KILL_AFTER_SECONDS`). Cancelling a caller of
:meth:`Hub.call_tool` abandons the request and the SDK sends ``notifications/cancelled``.

The hub knows nothing of Django's models: listeners registered with :meth:`Hub.add_listener`
receive a :class:`ServerSnapshot` whenever a server's state or tools change (the runtime module
persists them); log listeners (:meth:`Hub.add_log_listener`) hear of the shared sessions'
``notifications/message`` (:mod:`mcpclient.server_logs`, which also applies each server's log
level). An entry that uses ``${input:ID}`` is resolved in the database thread
(``database_sync_to_async``): its values may come from the secret store.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import functools
import json
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp.types as types
import pydantic
from channels.db import database_sync_to_async
from django.conf import settings
from mcp import Client, MCPError
from mcp.client import InputRequiredRoundsExceededError
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

import boocode
from mcpclient import prompts, protocol, resources
from mcpclient.approval import approval_reason
from mcpclient.authorization import (
    AuthFailure,
    BrowserConsent,
    Consent,
    CredentialStore,
    HubOAuth,
    NoConsent,
    preregistered_client,
)
from mcpclient.config import (
    SSE,
    STDIO,
    STREAMABLE_HTTP,
    WRITE_TOOLS_APPROVE,
    WRITE_TOOLS_REJECT,
    ConfigError,
    ResolvedServer,
    ServerConfig,
    inputs_used,
    resolve_server,
)
from mcpclient.healing import Healer, HealPolicy, RetryState, ping_loop
from mcpclient.naming import assign_names
from mcpclient.patterns import glob_match
from mcpclient.redaction import redact_text
from mcpclient.resources import Completions, ReadResult, ResourceCatalog, keep_listed
from mcpclient.resources import refresh_now as resources_refresh_now
from mcpclient.results import ToolResult, extract_result
from mcpclient.secret_store import SecretStoreError
from mcpclient.server_logs import EntryListener, ServerLogs
from mcpclient.tool_metadata import safe_icons, tool_title
from mcpclient.transports import EndWatcher, FallbackFailed, FirstAnswer, open_streams

logger = logging.getLogger(__name__)

STDERR_LINES = 200
CLIENT_INFO = types.Implementation(name="boocode", version=boocode.__version__)


# How the SDK's RuntimeError begins when a tool's structured content breaks its outputSchema.
_OUTPUT_SCHEMA_ERRORS = ("Invalid structured content returned by tool", "Invalid schema for tool")


class Status(StrEnum):
    """The state of one server, as shown in the admin and the status line."""

    DISABLED = "disabled"
    CONNECTING = "connecting"
    READY = "ready"
    FAILED = "failed"
    UNAVAILABLE = "unavailable"
    # OAuth (see mcpclient.authorization): nobody has signed in yet, or the sign-in expired.
    AUTH_REQUIRED = "auth_required"
    # A "perUser" server: each person connects their own account (its sessions are per person).
    PER_USER = "per_user"


@dataclass(frozen=True)
class DiscoveredTool:
    """A tool as listed by its server: offered, rejected (read-only guard) or filtered (config).

    ``reject_reason`` says why a rejected or filtered tool is not offered. ``title`` and
    ``icons`` are cleaned by :mod:`mcpclient.tool_metadata` (untrusted, display only).
    ``approval_reason`` says why each call of an offered tool waits for the person's approval
    (``writeTools: "approve"``, ``trusted: false``; see :mod:`mcpclient.approval`).
    """

    name: str
    description: str
    input_schema: dict[str, Any]
    annotations: dict[str, Any] | None
    rejected: bool = False
    reject_reason: str = ""
    filtered: bool = False
    title: str = ""
    icons: tuple[dict[str, Any], ...] = ()
    output_schema: dict[str, Any] | None = None
    approval_reason: str = ""

    @property
    def needs_approval(self) -> bool:
        """True when the tool is offered and each call waits for the person's approval."""
        return self.offered and bool(self.approval_reason)

    @property
    def read_only(self) -> bool:
        """False only when ``readOnlyHint`` is explicitly false."""
        return not (self.annotations and self.annotations.get("readOnlyHint") is False)

    @property
    def offered(self) -> bool:
        """True when the model may be offered this tool (neither filtered nor rejected)."""
        return not (self.rejected or self.filtered)


@dataclass(frozen=True)
class HubTool:
    """An accepted tool of a ready server, under the name the model sees."""

    prefixed_name: str
    server: str
    name: str
    description: str
    input_schema: dict[str, Any]
    annotations: dict[str, Any] | None
    read_only: bool = True
    warning: str = ""
    title: str = ""
    icons: tuple[dict[str, Any], ...] = ()
    output_schema: dict[str, Any] | None = None
    approval_reason: str = ""  # why each call needs the person's approval ("" when it does not)


@dataclass(frozen=True)
class ServerSnapshot:
    """A copy of one server's state handed to listeners."""

    name: str
    status: Status
    last_error: str
    connected_at: dt.datetime | None
    protocol_version: str
    server_info: dict[str, Any]
    tools: tuple[DiscoveredTool, ...]
    prefixed_names: dict[str, str]  # tool name -> prefixed name
    warnings: dict[str, str]  # tool name -> naming warning
    stderr_tail: tuple[str, ...]
    transport: str = ""  # the transport the live session uses ("" while not connected)
    # Healing (mcpclient.healing): reconnect attempts in a row, when the next one starts (None:
    # none scheduled) and whether the circuit is open (the limit was reached).
    attempts: int = 0
    next_retry_at: dt.datetime | None = None
    circuit_open: bool = False
    log_note: str = ""  # what became of the log level on the live session (ServerLogs.note)

    @classmethod
    def disabled(cls, name: str, status: Status = Status.DISABLED) -> ServerSnapshot:
        """The state of a server without a session of its own (disabled, or one per person)."""
        return cls(
            name=name,
            status=status,
            last_error="",
            connected_at=None,
            protocol_version="",
            server_info={},
            tools=(),
            prefixed_names={},
            warnings={},
            stderr_tail=(),
        )


Listener = Callable[[ServerSnapshot], Awaitable[None] | None]


def filter_reason(name: str, include: Sequence[str] | None, exclude: Sequence[str]) -> str:
    """Why an entry's ``includeTools`` / ``excludeTools`` leave the tool ``name`` out ("" if kept).

    Gemini CLI's semantics: with ``includeTools`` a tool must match one of its patterns, and a
    tool that matches an ``excludeTools`` pattern is left out even then. Patterns are the agent
    globs (``*`` is the only wildcard) applied to the tool's name on its server.
    """
    excluded_by = [pattern for pattern in exclude if glob_match(pattern, name)]
    if excluded_by:
        return f'left out by "excludeTools": {json.dumps(excluded_by, ensure_ascii=False)}'
    if include is not None and not any(glob_match(pattern, name) for pattern in include):
        shown = json.dumps(list(include), ensure_ascii=False)
        return f'left out by "includeTools": it matches none of {shown}'
    return ""


def discover_tool(
    tool: types.Tool,
    *,
    include: Sequence[str] | None = None,
    exclude: Sequence[str] = (),
    write_tools: str = WRITE_TOOLS_REJECT,
    trusted: bool = True,
) -> DiscoveredTool:
    """Apply the entry's tool filters, then the read-only guard or approval, to one listed tool.

    With ``write_tools="approve"`` a tool whose ``readOnlyHint`` is false is offered and marked
    as needing approval instead of rejected; with ``trusted=False`` every offered tool is marked.
    """
    annotations = tool.annotations.model_dump(by_alias=True, exclude_none=True) if tool.annotations else None
    discovered = DiscoveredTool(
        name=tool.name,
        description=tool.description or "",
        input_schema=dict(tool.input_schema or {"type": "object"}),
        annotations=annotations,
        title=tool_title(tool),
        icons=safe_icons(tool.icons),
        output_schema=dict(tool.output_schema) if tool.output_schema is not None else None,
    )
    reason = filter_reason(tool.name, include, exclude)
    if reason:
        # The administrator left it out: the read-only verdict does not matter any more.
        return dataclasses.replace(discovered, filtered=True, reject_reason=reason)
    if not discovered.read_only and write_tools != WRITE_TOOLS_APPROVE:
        return dataclasses.replace(
            discovered,
            rejected=True,
            reject_reason="readOnlyHint is false: only read-only tools are offered to the model",
        )
    reason = approval_reason(annotations, write_tools=write_tools, trusted=trusted)
    return dataclasses.replace(discovered, approval_reason=reason) if reason else discovered


def _describe(exc: BaseException) -> str:
    """A one-line description of a connection failure, without secrets from URLs."""
    return redact_text(_description(exc))


def _description(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        inner = [e for e in exc.exceptions if not isinstance(e, anyio.get_cancelled_exc_class())]
        if inner:
            return _description(inner[0])
    if isinstance(exc, FileNotFoundError):
        return f"command not found: {exc.filename or exc}"
    if isinstance(exc, PermissionError):
        return f"permission denied: {exc.filename or exc}"
    if isinstance(exc, MCPError):
        return exc.error.message if hasattr(exc, "error") else str(exc)
    if isinstance(exc, httpx2.ConnectError):
        return f"connection refused or unreachable ({exc})"
    if isinstance(exc, httpx2.HTTPStatusError):
        return f"HTTP {exc.response.status_code} from the server"
    text = str(exc) or type(exc).__name__
    return text if len(text) < 500 else text[:500] + "..."


def per_user(config: ServerConfig) -> bool:
    """True for a server each person signs in to with their own account."""
    return config.oauth is not None and config.oauth.per_user


class ServerConnection:
    """The owner task of one server and the state it publishes."""

    def __init__(
        self,
        config: ServerConfig,
        *,
        base_dir: Path,
        allowed_commands: list[str] | None,
        notify: Callable[[ServerConnection], None],
        owner_id: int | None = None,
        consent: Consent | None = None,
        healer: Healer | None = None,
    ) -> None:
        self.config = config
        self.name = config.name
        # Whose session this is: None for everybody's, a user id for a "perUser" server.
        self.owner_id = owner_id
        # Who can sign in when the server asks (None: nobody now, the server waits for Connect).
        self.consent = consent
        self.auth: HubOAuth | None = None
        self.last_used = time.monotonic()
        self._base_dir = base_dir
        self._allowed_commands = allowed_commands
        self._notify = notify
        self.status = Status.CONNECTING
        # Why the server is not ready: ``reason`` is what users and the model may read; ``last_error``
        # adds the last lines of the server's stderr, which can hold secrets (staff and admin only).
        self.reason = ""
        self.last_error = ""
        self.connected_at: dt.datetime | None = None
        self.protocol_version = ""
        self.server_info: dict[str, Any] = {}
        self.transport = ""  # the transport the live session uses
        self.tools: list[DiscoveredTool] = []
        self.stderr_tail: deque[str] = deque(maxlen=STDERR_LINES)
        # notifications/message of this session and the log level asked for (mcpclient.server_logs).
        self.logs = ServerLogs(config.name)
        self.client: Client | None = None
        # Resources and templates of the live session (mcpclient.resources keeps them listed).
        self.resources = ResourceCatalog()
        self._commands: asyncio.Queue[str] = asyncio.Queue()
        self._settled = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._relist_pending = False
        # Healing (mcpclient.healing): the policy, the retry plan, and whether a reconnect slot is held.
        self._healer = healer
        self.retry = RetryState()
        self._holds_slot = False
        self._no_retry = False  # a failure that a reconnect cannot cure (sign-in, configuration)

    # -- control (any task) -------------------------------------------------------------
    async def start(self) -> None:
        """Start the owner task and wait until the server is ready or has failed."""
        self._task = asyncio.create_task(self._run(), name=f"mcp-server:{self.name}")
        # A task cancelled before its first step never runs _run's finally block.
        self._task.add_done_callback(self._on_owner_done)
        await self._settled.wait()

    def _on_owner_done(self, _: object = None) -> None:
        self.client = None
        self.logs.forget_client()
        if isinstance(self.consent, BrowserConsent):
            self.consent.fail(self.reason or "the connection attempt ended")
        if self.status is Status.CONNECTING:
            self.status = Status.DISABLED
        self._settled.set()

    async def stop(self) -> None:
        """Ask the owner to close the session and wait for it (the child is stopped)."""
        if self._task is None or self._task.done():
            return
        self._stopping = True
        if self.status is Status.CONNECTING:
            self._task.cancel()  # still starting: don't wait for initTimeout
        else:
            self._commands.put_nowait("stop")
        try:
            await asyncio.shield(self._task)
        except asyncio.CancelledError:
            if not self._task.done():
                raise

    async def wait_settled(self) -> None:
        """Wait until the server is ready or has failed (after :meth:`start` was called)."""
        await self._settled.wait()

    def cancel_start(self) -> None:
        """Give up a start still in progress (the server ends up disabled)."""
        if self._task is not None and not self._task.done() and self.status is Status.CONNECTING:
            self._stopping = True
            self._task.cancel()

    def request_relist(self) -> None:
        """Ask the owner to list the tools again (after a tool-list change of either era).

        A burst of notifications while a listing is pending costs one listing.
        """
        if not self._relist_pending:
            self._relist_pending = True
            self._commands.put_nowait("relist")

    async def relist(self) -> None:
        """List the tools again now and wait for the result (used by rediscovery)."""
        client = self.client
        if client is None or self.status is not Status.READY:
            return
        try:
            self._set_tools(await self._list_within_timeout(client, fresh=True))
        except MCPError as exc:
            self._mark_unavailable_if_closed(exc, client)

    @property
    def running(self) -> bool:
        """True while the owner task is alive."""
        return self._task is not None and not self._task.done()

    @property
    def reconnecting(self) -> bool:
        """True while an automatic reconnect attempt holds one of the hub's reconnect slots."""
        return self._holds_slot

    # -- calls (any task) ---------------------------------------------------------------
    async def call_tool(self, tool: str, arguments: dict[str, Any]) -> ToolResult:
        """Call ``tool`` on the live session, bounded by the server's timeout."""
        client = self.client
        if client is None or self.status is not Status.READY:
            return self.unreachable(self.reason or f"the server is {self.status.value}")
        self.last_used = time.monotonic()
        try:
            # Client.call_tool answers a 2026-07-28 InputRequiredResult itself (elicitation through
            # mcpclient.elicitation); an input the hub cannot give (sampling, roots) ends as an
            # MCPError below.
            result = await client.call_tool(
                tool, arguments, read_timeout_seconds=self.config.timeout, meta=self.logs.call_meta()
            )
        except MCPError as exc:
            if exc.error.code == REQUEST_TIMEOUT:
                return ToolResult.error(
                    f'MCP server "{self.name}": tool "{tool}" timed out after {self.config.timeout:g} s '
                    f'(the server\'s "timeout" in mcp.json)'
                )
            if self._mark_unavailable_if_closed(exc, client):
                return self.unreachable(self.reason)
            if self.auth is not None and self.auth.failure is not None:
                # The token was refused (revoked, expired and not refreshable): sign in again.
                self._set_auth_failure(self.auth.failure)
                return self.unreachable(self.reason)
            return ToolResult.error(f'MCP server "{self.name}": tool "{tool}" failed: {exc.error.message}')
        except pydantic.ValidationError as exc:
            # e.g. a 2026-07-28 result without ``resultType``: the server broke the protocol.
            first = str(exc).splitlines()[0]
            return ToolResult.error(
                f'MCP server "{self.name}": tool "{tool}" returned an invalid result '
                f"for protocol {self.protocol_version}: {first}"
            )
        except RuntimeError as exc:
            # The SDK checks structured content against the tool's outputSchema and raises a bare
            # RuntimeError when it does not match: the server broke its own contract.
            if not str(exc).startswith(_OUTPUT_SCHEMA_ERRORS) and "has an output schema" not in str(exc):
                raise
            first = str(exc).splitlines()[0]
            return ToolResult.error(
                f'MCP server "{self.name}": tool "{tool}" returned a result that does not match its '
                f"output schema: {first}"
            )
        except InputRequiredRoundsExceededError:
            return ToolResult.error(
                f'MCP server "{self.name}": tool "{tool}" failed: the server kept asking for more input'
            )
        except httpx2.TransportError as exc:
            # One HTTP exchange failed (the transport turns most of these into an error answer,
            # see mcpclient.transports.DeliveryGuard): the call fails, the session stays. A dead
            # session shows as the end of its stream or a failed ping instead.
            return ToolResult.error(
                f'MCP server "{self.name}": tool "{tool}" failed: the HTTP request failed ({_describe(exc)})'
            )
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as exc:
            self._set_unavailable(_describe(exc), client)
            return self.unreachable(self.reason)
        return extract_result(result)

    async def _list_within_timeout(self, client: Client, *, fresh: bool = False) -> list[types.Tool]:
        try:
            with anyio.fail_after(self.config.timeout):
                return await protocol.list_all_tools(client, fresh=fresh)
        except TimeoutError:
            raise MCPError(code=REQUEST_TIMEOUT, message="tools/list timed out") from None

    def unreachable(self, reason: str) -> ToolResult:
        """The error result a call to this server gets while it is not ready (with the retry plan)."""
        plan = self.retry_plan()
        return ToolResult.error(
            f'MCP server "{self.name}" unreachable: {reason}' + (f" ({plan})" if plan else "")
        )

    def retry_plan(self) -> str:
        """When the server is tried again, in a few words ("" when no reconnect is under way)."""
        if self._healer is None:
            return ""
        if self.status is Status.CONNECTING and self.retry.attempts:
            return "reconnecting now"
        return self.retry.describe(self._healer.policy)

    def _mark_unavailable_if_closed(self, exc: MCPError, client: Client | None = None) -> bool:
        if exc.error.code != CONNECTION_CLOSED:
            return False
        self._set_unavailable("connection closed", client)
        return True

    # -- state ---------------------------------------------------------------------------
    def snapshot(self) -> ServerSnapshot:
        """A copy of the state for listeners (names are filled in by the hub)."""
        return ServerSnapshot(
            name=self.name,
            status=self.status,
            last_error=self.last_error,
            connected_at=self.connected_at,
            protocol_version=self.protocol_version,
            server_info=dict(self.server_info),
            tools=tuple(self.tools),
            prefixed_names={},
            warnings={},
            stderr_tail=tuple(self.stderr_tail),
            transport=self.transport if self.status is Status.READY else "",
            attempts=self.retry.attempts,
            next_retry_at=self.retry.next_retry_at,
            circuit_open=self.retry.circuit_open,
            log_note=self.logs.note,
        )

    def _discover(self, tools: Iterable[types.Tool]) -> list[DiscoveredTool]:
        config = self.config
        return [
            discover_tool(
                tool,
                include=config.include_tools,
                exclude=config.exclude_tools,
                write_tools=config.write_tools,
                trusted=config.trusted,
            )
            for tool in tools
        ]

    def _set_tools(self, tools: Iterable[types.Tool]) -> None:
        self.tools = self._discover(tools)
        self._notify(self)

    def _set_unavailable(self, reason: str, client: Client | None = None) -> None:
        # ``client``: the session the failure was seen on; a late failure of an earlier session
        # must not end the one that replaced it.
        if (
            self.status is not Status.READY
            or self._stopping
            or (client is not None and client is not self.client)
        ):
            return
        self.status = Status.UNAVAILABLE
        self.reason = reason
        self.last_error = reason + self._stderr_hint()
        logger.warning('MCP server "%s" is unavailable: %s', self.name, self.last_error)
        self._commands.put_nowait("closed")
        self._notify(self)

    def _set_auth_failure(self, failure: AuthFailure) -> None:
        """A live session lost its authorization: it ends, and the server waits for a sign-in."""
        if self.status is not Status.READY or self._stopping:
            return
        self._no_retry = True  # a reconnect cannot sign in
        self.status = Status.AUTH_REQUIRED if failure.sign_in_required else Status.FAILED
        self.reason = self.last_error = failure.describe(self.name)
        logger.warning("%s", self.reason)
        self._commands.put_nowait("closed")
        self._notify(self)

    def _stderr_hint(self) -> str:
        lines = [line for line in list(self.stderr_tail)[-3:] if line.strip()]
        return f" (stderr: {' | '.join(lines)})" if lines else ""

    # -- the owner task ------------------------------------------------------------------
    async def _run(self) -> None:
        try:
            resolved = await self._resolve()
        except ConfigError as exc:
            self._fail(str(exc))
            return
        except SecretStoreError as exc:  # an ${input:} value the keys cannot decrypt
            self._fail(f'{self.config.source}: server "{self.name}": {exc}')
            return
        except Exception as exc:  # the owner is a top-level loop: e.g. the database is down
            prefix = f'{self.config.source}: server "{self.name}"'
            self._fail(f"{prefix}: cannot resolve the entry: {_describe(exc)}")
            return
        try:
            while True:
                await self._attempt(resolved)
                self._release_slot()
                self.client = None
                self.logs.forget_client()
                if not await self._wait_for_retry():
                    return
        finally:
            self._release_slot()
            self._on_owner_done()

    async def _attempt(self, resolved: ResolvedServer) -> None:
        """One connection: connect, serve until the session ends; any failure is recorded on the server."""
        self._relist_pending = False
        try:
            await self._serve(resolved)
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:  # the owner is a top-level loop: any failure is recorded on the server
            failure = self.auth.failure if self.auth is not None else None
            if failure is not None and self.status is Status.CONNECTING:
                self._no_retry = True  # a reconnect cannot sign in
                status = Status.AUTH_REQUIRED if failure.sign_in_required else None
                self._fail(failure.describe(self.name), status=status)
            elif self.status is Status.READY:
                self._set_unavailable(_describe(exc))
            elif self.status is Status.CONNECTING:
                self._fail(_describe(exc), self._stderr_hint())
            logger.debug('MCP server "%s" owner ended with %r', self.name, exc)

    async def _wait_for_retry(self) -> bool:
        """After a lost session or a failed attempt: wait for the retry time; False: do not retry.

        The wait listens to the command queue, so :meth:`stop` ends it at once. When the time has
        come the server is ``connecting`` again and holds one of the hub's reconnect slots (a
        bound on how many servers connect again at the same time).
        """
        healer = self._healer
        if (
            healer is None
            or not healer.policy.reconnects
            or self._stopping
            or self._no_retry
            or self.status not in (Status.FAILED, Status.UNAVAILABLE)
            # A first sign-in in a person's browser is theirs to try again (Connect), not ours.
            or (isinstance(self.consent, BrowserConsent) and self.connected_at is None)
        ):
            return False
        delay = self.retry.schedule(healer.policy)
        logger.info(
            'MCP server "%s": next connection attempt in %.1f s (%d attempts in a row so far)%s',
            self.name,
            delay,
            self.retry.attempts,
            "; the circuit is open" if self.retry.circuit_open else "",
        )
        self._notify(self)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + delay
        while (remaining := deadline - loop.time()) > 0:
            try:
                command = await asyncio.wait_for(self._commands.get(), remaining)
            except TimeoutError:
                break
            if command == "stop":
                return False
        while not self._commands.empty():  # what the ended session left ("closed", "relist")
            if self._commands.get_nowait() == "stop":
                return False
        self.retry.begin_attempt()
        self.status = Status.CONNECTING
        self._notify(self)
        await healer.slots.acquire()  # stop() cancels a connecting owner, waiting here included
        self._holds_slot = True
        return True

    def _release_slot(self) -> None:
        if self._holds_slot and self._healer is not None:
            self._holds_slot = False
            self._healer.slots.release()

    async def _resolve(self) -> ResolvedServer:
        """The entry with its placeholders expanded (see :func:`~mcpclient.config.resolve_server`)."""
        resolve = functools.partial(
            resolve_server, self.config, base_dir=self._base_dir, allowed_commands=self._allowed_commands
        )
        if inputs_used(self.config.raw):
            # ${input:} values may come from the secret store: the ORM runs in the database thread.
            return await database_sync_to_async(resolve)()
        return resolve()

    def _fail(self, message: str, stderr: str = "", *, status: Status | None = None) -> None:
        self._release_slot()
        healing = status is None and self.connected_at is not None and self.retry.attempts > 0
        if healing and not self._no_retry:
            # A reconnect of a server that was ready failed: it stays "unavailable" with its tools,
            # so a call of one of them says when the server is tried again (not "Unknown tool").
            self.status = Status.UNAVAILABLE
        else:
            self.status = status or Status.FAILED
            self.tools = []
        self.reason = message
        self.last_error = message + stderr
        logger.warning('MCP server "%s" failed to start: %s', self.name, self.last_error)
        self._settled.set()
        self._notify(self)

    async def _serve(self, resolved: ResolvedServer) -> None:
        with anyio.CancelScope() as scope:
            # One deadline for connect + initialize + list, a fallback to SSE included, plus the
            # time a person may take to sign in when one was asked to.
            waiting = settings.OAUTH_CONSENT_TIMEOUT if isinstance(self.consent, BrowserConsent) else 0.0
            scope.deadline = anyio.current_time() + self.config.init_timeout + waiting
            if self.config.transport == STREAMABLE_HTTP and self.config.sse_fallback:
                await self._serve_with_fallback(resolved, scope)
            else:
                await self._session(resolved, self.config.transport, scope)
        if scope.cancelled_caught and self.status is Status.CONNECTING:
            self._fail(
                f'no answer within {self.config.init_timeout:g} s (the server\'s "initTimeout")',
                self._stderr_hint(),
            )

    async def _serve_with_fallback(self, resolved: ResolvedServer, scope: anyio.CancelScope) -> None:
        """Streamable HTTP; when the server's answer says it does not speak it, legacy SSE once."""
        answer = FirstAnswer()
        try:
            await self._session(resolved, STREAMABLE_HTTP, scope, answer=answer)
            return
        except Exception as exc:  # any failure of the attempt; the answer decides what follows
            if self.status is not Status.CONNECTING or not answer.not_streamable_http:
                raise
            logger.info('MCP server "%s": %s; trying legacy SSE', self.name, answer.describe())
            logger.debug('MCP server "%s": the Streamable HTTP attempt ended with %r', self.name, exc)
        try:
            await self._session(resolved, SSE, scope, fell_back=answer.describe())
        except Exception as exc:
            if self.status is not Status.CONNECTING:
                raise
            message = f"{answer.describe()}, and legacy SSE failed too: {_describe(exc)}"
            raise FallbackFailed(message) from exc

    async def _session(
        self,
        resolved: ResolvedServer,
        transport: str,
        scope: anyio.CancelScope,
        *,
        answer: FirstAnswer | None = None,
        fell_back: str = "",
    ) -> None:
        """Open ``transport`` and the client, negotiate, list, serve until told to stop.

        The client negotiates the revision (see :mod:`mcpclient.protocol`); on 2026-07-28 a
        watcher task subscribes to tool-, resource- and prompt-list changes (one stream) before
        the first listings.
        """
        streams = self._watched_transport(resolved, transport, answer)
        client = protocol.open_client(streams, client_info=CLIENT_INFO, message_handler=self._on_message)
        async with client, anyio.create_task_group() as watchers:
            self.resources = ResourceCatalog()
            changes = {
                "tools": self.request_relist,
                "resources": self.resources.request_refresh,
                "prompts": functools.partial(prompts.changed, self),
            }
            # One subscriptions/listen stream for every list (2026-07-28), before the first listings.
            await watchers.start(functools.partial(protocol.watch_changes, client, changes, name=self.name))
            await watchers.start(keep_listed, self, client)
            await watchers.start(prompts.watch, self, client)  # mcpclient.prompts keeps them listed
            tools = await protocol.list_all_tools(client)
            await self.logs.apply(client)  # the log level, applied at every connect (server_logs)
            scope.deadline = float("inf")
            self._ready(client, tools, transport, fell_back)
            if self._healer is not None and self._healer.policy.ping_interval > 0:
                dead = functools.partial(self._set_unavailable, client=client)
                watchers.start_soon(ping_loop, client, self._healer.policy, dead)
            await self._wait_for_commands(client)
            watchers.cancel_scope.cancel()

    def _ready(self, client: Client, tools: list[types.Tool], transport: str, fell_back: str = "") -> None:
        self._release_slot()
        if self.retry.attempts:
            logger.info('MCP server "%s" reconnected after %d attempt(s)', self.name, self.retry.attempts)
        self.retry.reset()
        self.client = client
        self.protocol_version, self.server_info = protocol.negotiated(client)
        self.transport = transport
        self.status = Status.READY
        self.reason = self.last_error = ""
        self.connected_at = dt.datetime.now(dt.UTC)
        self.tools = self._discover(tools)
        logger.info(
            'MCP server "%s" ready over %s%s: %d tools (%d rejected, %d filtered), protocol %s',
            self.name,
            transport,
            f" ({fell_back})" if fell_back else "",
            len(self.tools),
            sum(t.rejected for t in self.tools),
            sum(t.filtered for t in self.tools),
            self.protocol_version,
        )
        self._settled.set()
        self._notify(self)

    async def _wait_for_commands(self, client: Client) -> None:
        while True:
            command = await self._commands.get()
            if command in ("stop", "closed"):
                return
            if command == "relist":
                self._relist_pending = False
                try:
                    self._set_tools(await self._list_within_timeout(client))
                except MCPError as exc:
                    if self._mark_unavailable_if_closed(exc, client):
                        return
                    logger.warning('MCP server "%s": re-listing tools failed: %s', self.name, exc)

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.request_relist()
        elif isinstance(message, types.ResourceListChangedNotification):
            self.resources.request_refresh()
        elif isinstance(message, types.PromptListChangedNotification):
            prompts.changed(self)
        elif isinstance(message, types.LoggingMessageNotification):
            self.logs.receive(message.params)
        elif isinstance(message, Exception):
            logger.debug('MCP server "%s" sent an unreadable message: %s', self.name, message)

    @contextlib.asynccontextmanager
    async def _watched_transport(
        self, resolved: ResolvedServer, transport: str, answer: FirstAnswer | None
    ) -> AsyncIterator[tuple[Any, Any]]:
        """The transport's streams, the receive side reporting its end (see :class:`EndWatcher`)."""
        async with self._transport(resolved, transport, answer) as (read, write):
            yield EndWatcher(read, lambda: self._set_unavailable("connection closed")), write

    @contextlib.asynccontextmanager
    async def _transport(
        self, resolved: ResolvedServer, transport: str, answer: FirstAnswer | None = None
    ) -> AsyncIterator[tuple[Any, Any]]:
        async with open_streams(
            resolved,
            transport,
            name=self.name,
            timeout=self.config.timeout,
            init_timeout=self.config.init_timeout,
            auth=self._authorization(resolved) if transport != STDIO else None,
            answer=answer,
            on_stderr=self.stderr_tail.append,
        ) as streams:
            yield streams

    def _authorization(self, resolved: ResolvedServer) -> HubOAuth | None:
        """The OAuth provider of this connection (None when the entry signs in by itself)."""
        oauth = self.config.oauth
        if oauth is None:
            self.auth = None
            return None
        credential_owner = self.owner_id if oauth.per_user else None
        store = CredentialStore(
            self.name,
            credential_owner,
            resolved.url or "",
            preregistered_client(oauth, resolved.oauth_secrets.client_secret),
        )
        consent = self.consent or NoConsent(
            "connect your account from the chat (Connect beside the server's name)"
            if oauth.per_user
            else "an administrator must connect it (Connect on the server's admin page)"
        )
        self.auth = HubOAuth(
            server=self.name,
            url=resolved.url or "",
            store=store,
            consent=consent,
            oauth=oauth,
            secrets=resolved.oauth_secrets,
        )
        return self.auth


def _catalog(
    order: Sequence[str], connections: dict[str, ServerConnection]
) -> tuple[dict[tuple[str, str], tuple[str, str]], list[HubTool]]:
    """Prefixed names over the tools of ``connections`` (in ``order``), and the offered tools.

    Returns ``{(server, tool): (prefixed, warning)}`` and the offered tools of ready servers,
    sorted by prefixed name.
    """
    names_in_order = [name for name in order if name in connections]
    names_in_order += [name for name in connections if name not in names_in_order]
    pairs = [(name, tool.name) for name in names_in_order for tool in connections[name].tools]
    names = {(n.server, n.tool): (n.prefixed, n.warning) for n in assign_names(pairs)}
    tools: list[HubTool] = []
    for name in names_in_order:
        connection = connections[name]
        if connection.status is not Status.READY:
            continue
        for tool in connection.tools:
            if not tool.offered:
                continue
            prefixed, warning = names[(name, tool.name)]
            tools.append(
                HubTool(
                    prefixed_name=prefixed,
                    server=name,
                    name=tool.name,
                    description=tool.description,
                    input_schema=tool.input_schema,
                    annotations=tool.annotations,
                    read_only=tool.read_only,
                    warning=warning,
                    title=tool.title,
                    icons=tool.icons,
                    output_schema=tool.output_schema,
                    approval_reason=tool.approval_reason,
                )
            )
    tools.sort(key=lambda tool: tool.prefixed_name)
    return names, tools


@dataclass
class Hub:
    """Every configured server's connection, their tools under prefixed names, and calls."""

    base_dir: Path = field(default_factory=Path.cwd)
    allowed_commands: list[str] | None = None
    _connections: dict[str, ServerConnection] = field(default_factory=dict)
    _configs: dict[str, ServerConfig] = field(default_factory=dict)
    _order: list[str] = field(default_factory=list)
    _index: dict[str, tuple[str, str]] = field(default_factory=dict)
    _tools: list[HubTool] = field(default_factory=list)
    _names: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    _listeners: list[Listener] = field(default_factory=list)
    _pending: set[asyncio.Task[Any]] = field(default_factory=set)  # listener calls (drain_listeners)
    # Sessions started by a sign-in: each waits for the person's callback, so it is no listener
    # call to drain (a drain would hold back the very reply that sends the person to sign in).
    _signins: set[asyncio.Task[Any]] = field(default_factory=set)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    # "perUser" servers: one session per (server, person), opened when that person needs it.
    _user_connections: dict[tuple[str, int], ServerConnection] = field(default_factory=dict)
    _user_views: dict[int, tuple[int, list[HubTool], dict[str, tuple[str, str]]]] = field(
        default_factory=dict
    )
    _reaper: asyncio.Task[None] | None = None
    # Who signs in when a server asks and no person was asked to (None: nobody, the server
    # waits for Connect). Non-interactive tools set it, e.g. the conformance client.
    consent_factory: Callable[[], Consent] | None = None
    generation: int = 0
    # The log level asked of each server (McpServer.log_level, filled by the runtime) and who
    # hears of the shared sessions' log messages (see mcpclient.server_logs).
    log_levels: dict[str, str] = field(default_factory=dict)
    _log_listeners: list[EntryListener] = field(default_factory=list)
    # How sessions heal (pings, reconnects; see mcpclient.healing). A bare hub does neither; the
    # process-wide hub (mcpclient.runtime.new_hub) takes the policy from the settings.
    healing: HealPolicy = field(default_factory=HealPolicy.off)
    _healer: Healer | None = None

    def healer(self) -> Healer:
        """The healer of :attr:`healing` (one bound on concurrent reconnects for the whole hub)."""
        if self._healer is None or self._healer.policy is not self.healing:
            self._healer = Healer(self.healing)
        return self._healer

    # -- lifecycle -----------------------------------------------------------------------
    async def start(self, configs: Iterable[ServerConfig]) -> None:
        """Connect every enabled server concurrently (same as :meth:`apply` from empty)."""
        await self.apply(configs)

    async def apply(self, configs: Iterable[ServerConfig]) -> None:
        """Reconcile with ``configs``: start new or changed enabled servers, stop the rest."""
        async with self._lock:
            wanted = {config.name: config for config in configs}
            self._order = list(wanted)
            to_stop = [
                name
                for name, conn in self._connections.items()
                if name not in wanted or not wanted[name].enabled or wanted[name] != conn.config
            ]
            stale_users = [
                key
                for key, conn in self._user_connections.items()
                if key[0] not in wanted or not wanted[key[0]].enabled or wanted[key[0]] != conn.config
            ]
            await asyncio.gather(
                *(self._stop_one(name) for name in to_stop), *(self._stop_user(key) for key in stale_users)
            )
            self._configs = wanted
            to_start = [
                c
                for c in wanted.values()
                if c.enabled and not per_user(c) and c.name not in self._connections
            ]
            await asyncio.gather(*(self._start_one(config) for config in to_start))
            for name, config in wanted.items():
                if not config.enabled:
                    self._emit_disabled(name)
                elif per_user(config):
                    self._dispatch(ServerSnapshot.disabled(name, Status.PER_USER))
            self._rebuild()

    async def connect(self, config: ServerConfig) -> None:
        """Add or replace one server's config and (re)connect it if enabled."""
        configs = dict(self._configs)
        configs[config.name] = config
        await self.apply(configs.values())

    async def reconnect(self, name: str) -> None:
        """Close and open one server's session again (no-op for a disabled server).

        A "perUser" server's sessions are closed; each opens again when its person needs it.
        """
        async with self._lock:
            config = self._configs.get(name)
            await self._stop_one(name)
            await asyncio.gather(
                *(self._stop_user(key) for key in list(self._user_connections) if key[0] == name)
            )
            if config is not None and config.enabled and not per_user(config):
                await self._start_one(config)
            self._rebuild()

    async def rediscover(self, name: str) -> None:
        """List a ready server's tools, resources and templates, and prompts again now (every session)."""
        connections = [self._connections.get(name)]
        connections += [conn for key, conn in list(self._user_connections.items()) if key[0] == name]
        await asyncio.gather(
            *(
                asyncio.gather(conn.relist(), resources_refresh_now(conn), prompts.refresh_now(conn))
                for conn in connections
                if conn is not None
            )
        )

    async def stop(self) -> None:
        """Close every session and stop every stdio child."""
        for connection in [*self._connections.values(), *self._user_connections.values()]:
            connection.cancel_start()  # a start in progress holds the lock for up to initTimeout
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None
        async with self._lock:
            await asyncio.gather(
                *(self._stop_one(name) for name in list(self._connections)),
                *(self._stop_user(key) for key in list(self._user_connections)),
            )
            self._rebuild()
        if self._pending or self._signins:
            await asyncio.gather(*self._pending, *self._signins, return_exceptions=True)

    async def _start_one(self, config: ServerConfig) -> None:
        await self._new_connection(config, None).start()

    def _new_connection(self, config: ServerConfig, consent: Consent | None) -> ServerConnection:
        """The shared session of ``config`` (not started), in place of the current one."""
        connection = ServerConnection(
            config,
            base_dir=self.base_dir,
            allowed_commands=self.allowed_commands,
            notify=self._on_change,
            consent=consent or self._default_consent(),
            healer=self.healer(),
        )
        connection.logs.level = self.log_levels.get(config.name, "")
        connection.logs.listener = self._on_log
        self._connections[config.name] = connection
        self._on_change(connection)
        return connection

    def _default_consent(self) -> Consent | None:
        return self.consent_factory() if self.consent_factory is not None else None

    # -- sign-in and per-person sessions (see mcpclient.authorization) --------------------
    async def authorize(self, name: str, *, user_id: int) -> tuple[ServerConnection, BrowserConsent]:
        """Start signing ``user_id`` in to server ``name`` in their browser (Connect).

        A "shared" server's session is replaced (``user_id`` is the administrator connecting it
        for everybody); a "perUser" server gets a session of that person's. The connection
        starts in the background: the caller awaits ``consent.url`` (where to send the
        browser) or the connection settling (it needed no sign-in, or failed first).
        """
        config = self._configs.get(name)
        if config is None or not config.enabled or config.oauth is None:
            raise ValueError(f'MCP server "{name}" is not an enabled server that signs in with OAuth')
        consent = BrowserConsent(server=name, user_id=user_id, owner_id=user_id if per_user(config) else None)
        async with self._lock:
            if per_user(config):
                await self._stop_user((name, user_id))
                connection = self._new_user_connection(config, user_id, consent)
            else:
                await self._stop_one(name)
                connection = self._new_connection(config, consent)
        task = asyncio.create_task(connection.start(), name=f"mcp-authorize:{name}")
        self._signins.add(task)
        task.add_done_callback(self._signins.discard)
        return connection, consent

    async def open_user_sessions(self, user_id: int, names: Iterable[str]) -> None:
        """Open ``user_id``'s sessions with the "perUser" servers in ``names`` (they signed in to).

        A session that is open, opening, or waiting for a sign-in is left alone: a refused
        sign-in is not retried until the person connects again.
        """
        starts = []
        async with self._lock:
            for name in names:
                config = self._configs.get(name)
                if config is None or not config.enabled or not per_user(config):
                    continue
                current = self._user_connections.get((name, user_id))
                if current is not None and (
                    current.running or current.status in (Status.AUTH_REQUIRED, Status.READY)
                ):
                    continue
                await self._stop_user((name, user_id))
                starts.append(self._new_user_connection(config, user_id, None).start())
        await asyncio.gather(*starts)

    async def close_user_session(self, name: str, user_id: int | None) -> None:
        """Close a person's session with a server (their own, or the shared one for ``None``)."""
        async with self._lock:
            if user_id is None:
                await self._stop_one(name)
                config = self._configs.get(name)
                if config is not None and config.enabled and not per_user(config):
                    await self._start_one(config)
                self._rebuild()
            else:
                await self._stop_user((name, user_id))

    def user_connection(self, name: str, user_id: int) -> ServerConnection | None:
        """``user_id``'s session with the "perUser" server ``name``, if one was opened."""
        return self._user_connections.get((name, user_id))

    def config(self, name: str) -> ServerConfig | None:
        """The configuration of server ``name``, if it is configured."""
        return self._configs.get(name)

    def per_user_servers(self) -> list[ServerConfig]:
        """The enabled "perUser" servers, in config order."""
        return [c for name in self._order if (c := self._configs.get(name)) and c.enabled and per_user(c)]

    # -- resources, completions and prompts as a person sees them -------------------------
    # One interface with the hub worker's stand-in (mcpclient.worker_client.RemoteHub), which
    # forwards these to the worker: callers never reach a session's client themselves.
    async def load_catalogs(self, user_id: int | None, *, wait: float = 0.0) -> None:
        """Nothing to load: the catalogs of a hub held here are live (the worker's stand-in fetches)."""

    async def read_resource(self, server: str, uri: str, user_id: int | None) -> ReadResult:
        """``resources/read`` of ``uri`` through the session ``user_id`` may use (capped)."""
        return await resources.read(self, server, uri, user_id)

    async def complete(
        self,
        server: str,
        ref: types.ResourceTemplateReference | types.PromptReference,
        argument: dict[str, str],
        context: dict[str, str] | None,
        user_id: int | None,
    ) -> Completions:
        """``completion/complete`` for one argument of a prompt or resource template."""
        return await resources.complete(self, server, ref, argument, context, user_id)

    async def get_prompt(
        self, server: str, name: str, arguments: dict[str, str], user_id: int | None
    ) -> tuple[prompts.HubPrompt, list[prompts.PromptMessage]]:
        """``prompts/get`` on ``user_id``'s session with ``server``: the prompt and its messages."""
        return await prompts.get(self, server, name, arguments, user_id)

    def _new_user_connection(
        self, config: ServerConfig, user_id: int, consent: Consent | None
    ) -> ServerConnection:
        connection = ServerConnection(
            config,
            base_dir=self.base_dir,
            allowed_commands=self.allowed_commands,
            notify=self._on_user_change,
            owner_id=user_id,
            consent=consent or self._default_consent(),
            healer=self.healer(),
        )
        connection.logs.level = self.log_levels.get(config.name, "")  # its messages stay in memory
        self._user_connections[(config.name, user_id)] = connection
        if self._reaper is None or self._reaper.done():
            self._reaper = asyncio.create_task(self._close_idle_sessions(), name="mcp-idle-sessions")
        return connection

    async def _stop_user(self, key: tuple[str, int]) -> None:
        connection = self._user_connections.pop(key, None)
        if connection is not None:
            await connection.stop()
            self.generation += 1

    def _on_user_change(self, connection: ServerConnection) -> None:
        # A person's session is nobody else's business: no listener hears of it.
        if (
            connection.owner_id is not None
            and self._user_connections.get((connection.name, connection.owner_id)) is connection
        ):
            self.generation += 1

    async def _close_idle_sessions(self) -> None:
        """Close per-person sessions unused for ``BOOCODE_OAUTH_IDLE_SECONDS`` (runs while any exist)."""
        idle = float(settings.OAUTH_IDLE_SECONDS)
        while self._user_connections:
            await asyncio.sleep(min(60.0, idle / 4))
            cutoff = time.monotonic() - idle
            stale = [
                key
                for key, conn in self._user_connections.items()
                if conn.last_used < cutoff and conn.status is not Status.CONNECTING
            ]
            if stale:
                logger.info("closing %d idle per-person MCP session(s)", len(stale))
                async with self._lock:
                    await asyncio.gather(*(self._stop_user(key) for key in stale))

    async def _stop_one(self, name: str) -> None:
        connection = self._connections.pop(name, None)
        if connection is not None:
            await connection.stop()

    def _emit_disabled(self, name: str) -> None:
        self._dispatch(ServerSnapshot.disabled(name))

    # -- state and listeners -------------------------------------------------------------
    def add_listener(self, listener: Listener) -> None:
        """Call ``listener(snapshot)`` whenever a server's state or tools change."""
        self._listeners.append(listener)

    def add_log_listener(self, listener: EntryListener) -> None:
        """Call ``listener(server, entries)`` whenever a shared session keeps a log message."""
        self._log_listeners.append(listener)

    def _on_log(self, name: str, entries: tuple[dict[str, str], ...]) -> None:
        for listener in self._log_listeners:
            listener(name, entries)

    async def set_log_level(self, name: str, level: str) -> str:
        """Ask server ``name`` for log messages at ``level`` and above ("" = its default), at once.

        Returns what became of it on the live session (see :meth:`ServerLogs.apply`).
        """
        self.log_levels[name] = level
        personal = [conn for key, conn in list(self._user_connections.items()) if key[0] == name]
        for connection in personal:
            connection.logs.level = level
            await connection.logs.apply()
        connection = self._connections.get(name)
        if connection is None:
            if personal:
                return f"applied to {len(personal)} personal session(s)"
            return "no live session: the level is applied when the server next connects"
        connection.logs.level = level
        return await connection.logs.apply()

    def remove_listener(self, listener: Listener) -> None:
        """Stop calling ``listener``."""
        if listener in self._listeners:
            self._listeners.remove(listener)

    async def wait_until(self, predicate: Callable[[], bool], timeout: float) -> None:
        """Wait (at most ``timeout`` seconds) until ``predicate()`` holds after a state change."""
        changed = asyncio.Event()

        def listener(_: ServerSnapshot) -> None:
            changed.set()

        self.add_listener(listener)
        try:
            async with asyncio.timeout(timeout):
                while not predicate():
                    changed.clear()
                    await changed.wait()
        finally:
            self.remove_listener(listener)

    def _on_change(self, connection: ServerConnection) -> None:
        if self._connections.get(connection.name) is not connection:
            return  # a replaced connection winding down
        self._rebuild()
        self._dispatch(self._snapshot(connection))

    def _snapshot(self, connection: ServerConnection) -> ServerSnapshot:
        snapshot = connection.snapshot()
        for tool in snapshot.tools:
            prefixed, warning = self._names.get((connection.name, tool.name), ("", ""))
            snapshot.prefixed_names[tool.name] = prefixed
            if warning:
                snapshot.warnings[tool.name] = warning
        return snapshot

    def _dispatch(self, snapshot: ServerSnapshot) -> None:
        for listener in self._listeners:
            outcome = listener(snapshot)
            if asyncio.iscoroutine(outcome):
                task = asyncio.ensure_future(outcome)
                self._pending.add(task)
                task.add_done_callback(self._pending.discard)

    async def drain_listeners(self) -> None:
        """Wait until every listener call started so far has finished."""
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)

    def _rebuild(self) -> None:
        """Recompute prefixed names over every server, in config order, and the tool index."""
        self._names, self._tools = _catalog(self._order, self._connections)
        self._index = {tool.prefixed_name: (tool.server, tool.name) for tool in self._tools}
        self.generation += 1

    # -- queries -------------------------------------------------------------------------
    def tools(self, user_id: int | None = None) -> list[HubTool]:
        """Accepted tools of ready servers, sorted by prefixed name; ``user_id``'s own sessions too."""
        return list(self._view(user_id)[0])

    def _view(self, user_id: int | None) -> tuple[list[HubTool], dict[str, tuple[str, str]]]:
        """The tools ``user_id`` sees (shared servers plus their own sessions) and their index."""
        if user_id is None or not any(key[1] == user_id for key in self._user_connections):
            return self._tools, self._index
        cached = self._user_views.get(user_id)
        if cached is not None and cached[0] == self.generation:
            return cached[1], cached[2]
        connections = dict(self._connections)
        connections.update(
            {name: conn for (name, owner), conn in self._user_connections.items() if owner == user_id}
        )
        _, tools = _catalog(self._order, connections)
        index = {tool.prefixed_name: (tool.server, tool.name) for tool in tools}
        self._user_views = {uid: view for uid, view in self._user_views.items() if view[0] == self.generation}
        self._user_views[user_id] = (self.generation, tools, index)
        return tools, index

    def connection(self, name: str) -> ServerConnection | None:
        """The live connection of a server, if it has one."""
        return self._connections.get(name)

    def snapshots(self) -> list[ServerSnapshot]:
        """The state of every configured server, in config order."""
        result = []
        for name in self._order:
            connection = self._connections.get(name)
            config = self._configs.get(name)
            if connection is not None:
                result.append(self._snapshot(connection))
            elif config is not None and config.enabled and per_user(config):
                result.append(ServerSnapshot.disabled(name, Status.PER_USER))
            else:
                result.append(ServerSnapshot.disabled(name))
        return result

    # -- calls ---------------------------------------------------------------------------
    async def call_tool(
        self, prefixed_name: str, arguments: dict[str, Any] | None = None, *, user_id: int | None = None
    ) -> ToolResult:
        """Call a tool by its prefixed name (as ``user_id`` sees them); trouble is an error result."""
        target = self._view(user_id)[1].get(prefixed_name)
        if target is None:
            return self._unknown_tool(prefixed_name)
        server, tool = target
        connection = self._connections.get(server)
        if connection is None and user_id is not None:
            connection = self._user_connections.get((server, user_id))
        if connection is None:
            return ToolResult.error(f'MCP server "{server}" unreachable: it is not connected')
        return await connection.call_tool(tool, arguments or {})

    def _unknown_tool(self, prefixed_name: str) -> ToolResult:
        # The tool may belong to a server that is down: say so rather than "unknown".
        for name, connection in self._connections.items():
            if connection.status is not Status.READY:
                for tool in connection.tools:
                    if self._names.get((name, tool.name), ("",))[0] == prefixed_name:
                        return connection.unreachable(connection.reason or connection.status.value)
        return ToolResult.error(f'Unknown tool "{prefixed_name}": it is not offered by any ready MCP server')
