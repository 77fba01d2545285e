"""One server's session: the owner task that opens, heals and closes it, and the state it publishes.

Invariants. Only the owner task enters and leaves the transport and the SDK ``Client`` (anyio
requires both in one task); any task may call ``call_tool`` on a ready client concurrently.
The owner lists tools again on a change notification (a burst costs one listing). Each connect,
negotiation and listing is bounded by the entry's ``initTimeout``. ``last_error`` ends with the
last lines of the server's stderr, which can hold secrets: it is for staff; users and the model
read ``reason``, the same text without stderr, URLs redacted in both. An end of stream makes the
server ``unavailable`` at once and every call in flight gets ``MCP server "<name>" unreachable``.
After a lost session or a failed start the owner waits for its retry time (backoff, jitter, then
an open circuit: :mod:`mcpclient.engine.healing`); sign-in failures, configuration errors, a
package its launcher's registry does not have (:mod:`mcpclient.engine.server_stderr`) and
stopped servers are not retried. Stop: the owner leaves its ``async with`` blocks (stdio
children get stdin closed, SIGTERM, then SIGKILL).

What the owner delegates, one job a module: the entry for this session
(:mod:`mcpclient.engine.session_entry`), its sign-in (:mod:`mcpclient.engine.connection_auth`),
what ended an attempt (:mod:`mcpclient.engine.connection_failures`), the stderr and exit record
(:mod:`mcpclient.engine.stderr_record`), the tool listings' review against the pins
(:mod:`mcpclient.engine.tool_review`) and one ``tools/call`` with what its failure means
(:mod:`mcpclient.engine.tool_calls`).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import functools
import logging
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
from mcp import Client, MCPError
from mcp_types import CONNECTION_CLOSED

from mcpclient.config.model import (
    SSE,
    STDIO,
    STREAMABLE_HTTP,
    ConfigError,
    ResolvedServer,
    ServerConfig,
)
from mcpclient.config.resolve import InputLookup
from mcpclient.core.egress import OWN_SERVER_REFUSED
from mcpclient.core.pinning import PinBook
from mcpclient.core.results import ToolResult, extract_result
from mcpclient.core.state import DiscoveredTool, ServerSnapshot, Status
from mcpclient.core.words import counted
from mcpclient.engine import prompts, protocol, skills, tool_calls, tool_review
from mcpclient.engine.authorization.consent import BrowserConsent, Consent
from mcpclient.engine.authorization.failures import AuthFailure
from mcpclient.engine.authorization.provider import HubOAuth
from mcpclient.engine.catalog import KeptFresh
from mcpclient.engine.connection_auth import connection_auth
from mcpclient.engine.connection_failures import PACKAGE_NOT_FOUND, describe, egress_refused
from mcpclient.engine.healing import Healer, RetryState, ping_loop
from mcpclient.engine.prompts import Catalog as PromptCatalog
from mcpclient.engine.resources import ResourceCatalog, keep_listed
from mcpclient.engine.server_logs import ServerLogs
from mcpclient.engine.session_entry import resolve_entry
from mcpclient.engine.skills import SkillCatalog
from mcpclient.engine.stderr_record import StderrRecord
from mcpclient.engine.transports import EndWatcher, FallbackFailed, FirstAnswer, ServerStream, open_streams
from mcpclient.secrets.store import SecretStoreError

logger = logging.getLogger("mcpclient.hub")

# How long a ready session waits for its server-message stream to be answered (transports.ServerStream).
SERVER_STREAM_WAIT = 2.0


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
        input_value: InputLookup | None = None,
        consent_timeout: float = 600.0,
        client_version: str = "0",
        apps: bool = True,
        pins: PinBook | None = None,
        person_name: Callable[[int], str] | None = None,
        person_id_token: Callable[[int], str | None] | None = None,
    ) -> None:
        self.config = config
        # A person's ID token from their sign-in to BooCode ("perUser" identity_assertion; database).
        self._person_id_token = person_id_token
        # A person's username by id, for ${user.name} (reads the database: run in its thread).
        self._person_name = person_name
        # Handed down by the hub (mcpclient.runtime.new_hub fills them from the settings): where
        # ${input:} values come from, how long a person may take to sign in, what the hub calls itself.
        self._input_value = input_value
        self._consent_timeout = consent_timeout
        self._client_info = types.Implementation(name="boocode", version=client_version)
        # Whether this session says it renders MCP Apps views (the installation's and the entry's say).
        self.apps = apps and config.apps
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
        # The review of each listing against the pins (mcpclient.engine.tool_review) and its note.
        self.review = tool_review.ToolReview(config, pins)
        self.stderr = StderrRecord()  # the server's stderr lines and exit (mcpclient.engine.stderr_record)
        self._resolved: ResolvedServer | None = None
        # notifications/message of this session and the log level asked for (mcpclient.engine.server_logs).
        self.logs = ServerLogs(config.name)
        self.client: Client | None = None
        # Resources and templates of the live session (mcpclient.engine.resources keeps them listed).
        self.resources = ResourceCatalog()
        # The prompts of the current session (mcpclient.engine.prompts.watch sets them).
        self.prompts: PromptCatalog | None = None
        # The skills of the live session (mcpclient.engine.skills keeps them listed).
        self.skills = SkillCatalog()
        self._commands: asyncio.Queue[str] = asyncio.Queue()
        self._settled = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        # The tool list of the current session, kept fresh like its prompts and resources
        # (mcpclient.engine.catalog); its first listing is part of connecting.
        self.tool_list = KeptFresh(supported=True)
        # Healing (mcpclient.engine.healing): the policy, the retry plan, whether a reconnect slot is held.
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
        """List the tools again soon (after a tool-list change of either era); bursts coalesce."""
        self.tool_list.request_refresh()

    async def relist(self) -> None:
        """List the tools again and wait for the result (an administrator's rediscovery)."""
        if self.client is not None and self.status is Status.READY:
            self.review.wanted = True  # (accepted pins change verdicts, not digests)
            await self.tool_list.refresh_now(2 * self.config.timeout + 1)

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
        """Call ``tool`` on the live session, bounded by the server's timeout: the MCP request span,
        counted (:func:`mcpclient.engine.tool_calls.traced`)."""
        call = functools.partial(self._call_tool, tool, arguments)
        stdio = self.config.transport == STDIO
        return await tool_calls.traced(
            call, server=self.name, tool=tool, protocol_version=self.protocol_version, stdio=stdio
        )

    async def _call_tool(self, tool: str, arguments: dict[str, Any]) -> tuple[ToolResult, str]:
        """The call and its outcome (one of :data:`mcpclient.telemetry.metrics.MCP_OUTCOMES`)."""
        client = self.client
        if client is None or self.status is not Status.READY:
            return self.unreachable(self.reason or f"the server is {self.status.value}"), "unreachable"
        self.last_used = time.monotonic()
        try:
            meta, timeout = self.logs.call_meta(), self.config.timeout
            result = await tool_calls.send(client, tool, arguments, meta=meta, timeout=timeout)
        except tool_calls.CALL_ERRORS as exc:
            failure = tool_calls.call_failure(
                exc,
                server=self.name,
                tool=tool,
                timeout=self.config.timeout,
                protocol_version=self.protocol_version,
            )
            if failure is None:
                raise
            return self._call_failed(failure, client)
        extracted = extract_result(result)
        return extracted, "tool_error" if extracted.is_error else "ok"

    def _call_failed(self, failure: tool_calls.CallFailure, client: Client) -> tuple[ToolResult, str]:
        """Record what a failed call says of the session and answer the call."""
        if failure.outcome == "unreachable":  # the session is lost (its stream closed, its pipe broke)
            self._set_unavailable(failure.message, client)
            return self.unreachable(self.reason), "unreachable"
        if failure.refused_token and self.auth is not None and self.auth.failure is not None:
            # The token was refused (revoked, expired and not refreshable): sign in again.
            self._set_auth_failure(self.auth.failure)
            return self.unreachable(self.reason), "unreachable"
        return ToolResult.error(failure.message), failure.outcome

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

    def mark_unavailable_if_closed(self, exc: MCPError, client: Client | None = None) -> bool:
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
            stderr_tail=tuple(self.stderr.tail),
            transport=self.transport if self.status is Status.READY else "",
            attempts=self.retry.attempts,
            next_retry_at=self.retry.next_retry_at,
            circuit_open=self.retry.circuit_open,
            log_note=self.logs.note,
            tools_note=self.review.note,
        )

    def _set_tools(self, tools: list[DiscoveredTool]) -> None:
        self.tools = tools
        self._notify(self)

    def _person_reason(self, exc: BaseException) -> str:
        """What the person reads instead of the operator's wording ("" when it is the same).

        A person's own server refused by the egress policy: the setting that would allow it is
        the operator's (``last_error`` and the log name it); the person reads a sentence for them.
        """
        if self.config.owner_id is not None and egress_refused(exc):
            return OWN_SERVER_REFUSED
        return ""

    def _set_unavailable(self, reason: str, client: Client | None = None, *, person: str = "") -> None:
        # ``client``: the session the failure was seen on; a late failure of an earlier session
        # must not end the one that replaced it.
        if (
            self.status is not Status.READY
            or self._stopping
            or (client is not None and client is not self.client)
        ):
            return
        self.status = Status.UNAVAILABLE
        self.reason = person or reason
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

    def _package_not_found(self) -> bool:
        """Whether this attempt's stderr says the stdio server's launcher found no such package."""
        return self.config.transport == STDIO and self.stderr.package_not_found()

    def _stderr_hint(self, *, timed_out: bool = False) -> str:
        return self.stderr.hint(self._resolved, timed_out=timed_out)

    def _exited(self, status: int) -> None:
        """The server's process is over (its stderr read): a session that ended before its exit
        was known gets what the sandbox did added to its last error."""
        self.stderr.exit_status = status
        if self.status is not Status.UNAVAILABLE or not self.last_error:
            return
        why = self.stderr.sandbox_hint(self._resolved, timed_out=False)
        if why and why not in self.last_error:
            self.last_error = self.reason + self._stderr_hint()
            logger.warning('MCP server "%s": %s', self.name, why)
            self._notify(self)

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
            self._fail(f"{prefix}: cannot resolve the entry: {describe(exc)}")
            return
        self._resolved = resolved
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
        self.stderr.begin_attempt()
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
                self._set_unavailable(describe(exc), person=self._person_reason(exc))
            elif self.status is Status.CONNECTING and self._package_not_found():
                self._no_retry = True  # the registry will not have it in a few seconds either
                self._fail(PACKAGE_NOT_FOUND, self._stderr_hint())
            elif self.status is Status.CONNECTING:
                self._fail(describe(exc), self._stderr_hint(), person=self._person_reason(exc))
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
        while not self._commands.empty():  # what the ended session left ("closed")
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
        """The entry for this session (:func:`mcpclient.engine.session_entry.resolve_entry`)."""
        return await resolve_entry(
            self.config,
            owner_id=self.owner_id,
            person_name=self._person_name,
            base_dir=self._base_dir,
            allowed_commands=self._allowed_commands,
            input_value=self._input_value,
        )

    def _fail(
        self, message: str, stderr: str = "", *, status: Status | None = None, person: str = ""
    ) -> None:
        """Record a failed attempt: ``message`` (and ``stderr``) for the log and the admin, ``person``
        (when given) as what the people who use the server read."""
        self._release_slot()
        healing = status is None and self.connected_at is not None and self.retry.attempts > 0
        if healing and not self._no_retry:
            # A reconnect of a server that was ready failed: it stays "unavailable" with its tools,
            # so a call of one of them says when the server is tried again (not "Unknown tool").
            self.status = Status.UNAVAILABLE
        else:
            self.status = status or Status.FAILED
            self.tools = []
        self.reason = person or message
        self.last_error = message + stderr
        logger.warning('MCP server "%s" failed to start: %s', self.name, self.last_error)
        self._settled.set()
        self._notify(self)

    async def _serve(self, resolved: ResolvedServer) -> None:
        with anyio.CancelScope() as scope:
            # One deadline for connect + initialize + list, a fallback to SSE included, plus the
            # time a person may take to sign in when one was asked to.
            waiting = self._consent_timeout if isinstance(self.consent, BrowserConsent) else 0.0
            scope.deadline = anyio.current_time() + self.config.init_timeout + waiting
            if self.config.transport == STREAMABLE_HTTP and self.config.sse_fallback:
                await self._serve_with_fallback(resolved, scope)
            else:
                await self._session(resolved, self.config.transport, scope)
        if scope.cancelled_caught and self.status is Status.CONNECTING:
            self._fail(
                f'no answer within {self.config.init_timeout:g} s (the server\'s "initTimeout")',
                self._stderr_hint(timed_out=True),
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
            message = f"{answer.describe()}, and legacy SSE failed too: {describe(exc)}"
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

        The client negotiates the revision (see :mod:`mcpclient.engine.protocol`); on 2026-07-28 a
        watcher task subscribes to tool-, resource- and prompt-list changes (one stream) before
        the first listings.
        """
        server_stream = ServerStream()
        streams = self._watched_transport(resolved, transport, answer, server_stream)
        client = protocol.open_client(
            streams, client_info=self._client_info, message_handler=self._on_message, apps=self.apps
        )
        async with client, anyio.create_task_group() as watchers:
            self.tool_list = KeptFresh(supported=True)
            self.resources = ResourceCatalog()
            self.skills = SkillCatalog()
            changes: dict[str, Callable[[], None]] = {
                "tools": self.request_relist,
                "resources": self._resources_changed,
                "prompts": functools.partial(prompts.changed, self),
            }
            # One subscriptions/listen stream for every list (2026-07-28), before the first listings.
            await watchers.start(functools.partial(protocol.watch_changes, client, changes, name=self.name))
            await watchers.start(keep_listed, self, client)
            await watchers.start(prompts.watch, self, client)  # mcpclient.engine.prompts keeps them listed
            await watchers.start(skills.keep_listed, self, client)  # and mcpclient.engine.skills these
            tools = await self.review.reviewed(await protocol.list_all_tools(client), client)
            await self.logs.apply(client)  # the log level, applied at every connect (server_logs)
            if not await server_stream.settled(SERVER_STREAM_WAIT):
                logger.info(
                    'MCP server "%s": its message stream did not answer within %g s',
                    self.name,
                    SERVER_STREAM_WAIT,
                )
            scope.deadline = float("inf")
            self._ready(client, tools, transport, fell_back)
            relist = functools.partial(self._relist_tools, client)
            watchers.start_soon(functools.partial(self.tool_list.keep_fresh, relist, now=False))
            if self._healer is not None and self._healer.policy.ping_interval > 0:
                dead = functools.partial(self._set_unavailable, client=client)
                watchers.start_soon(ping_loop, client, self._healer.policy, dead)
            await self._wait_for_commands()
            watchers.cancel_scope.cancel()

    def _ready(
        self, client: Client, tools: list[DiscoveredTool], transport: str, fell_back: str = ""
    ) -> None:
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
        self.tools = tools
        logger.info(
            'MCP server "%s" ready over %s%s: %s (%d rejected, %d filtered, %d not for the model), '
            "protocol %s",
            self.name,
            transport,
            f" ({fell_back})" if fell_back else "",
            counted(len(self.tools), "tool"),
            sum(t.rejected for t in self.tools),
            sum(t.filtered for t in self.tools),
            sum(t.usable and not t.offered for t in self.tools),
            self.protocol_version,
        )
        self._settled.set()
        self._notify(self)

    async def _wait_for_commands(self) -> None:
        while await self._commands.get() not in ("stop", "closed"):
            pass

    async def _relist_tools(self, client: Client) -> bool:
        """List the tools again into :attr:`tools`; False once the session has ended.

        A listing identical to the last reviewed one (every digest, the notes) changes nothing
        and costs nothing more: no review, no snapshot (so no write and no re-index).
        """
        try:
            tools = await self.review.relist(client)
            if tools is not None:
                self._set_tools(tools)
            self.tool_list.error = ""
        except MCPError as exc:
            if self.mark_unavailable_if_closed(exc, client):
                return False
            self.tool_list.error = f"tools/list failed: {exc.error.message}"
            logger.warning('MCP server "%s": re-listing tools failed: %s', self.name, exc)
        self.tool_list.finish_listing()
        return True

    def _resources_changed(self) -> None:
        """List the resources again, and the skills, whose files are resources (either era)."""
        self.resources.request_refresh()
        skills.changed(self)

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.request_relist()
        elif isinstance(message, types.ResourceListChangedNotification):
            self._resources_changed()
        elif isinstance(message, types.PromptListChangedNotification):
            prompts.changed(self)
        elif isinstance(message, types.LoggingMessageNotification):
            self.logs.receive(message.params)
        elif isinstance(message, Exception):
            logger.debug('MCP server "%s" sent an unreadable message: %s', self.name, message)

    @contextlib.asynccontextmanager
    async def _watched_transport(
        self,
        resolved: ResolvedServer,
        transport: str,
        answer: FirstAnswer | None,
        server_stream: ServerStream | None = None,
    ) -> AsyncIterator[tuple[Any, Any]]:
        """The transport's streams, the receive side reporting its end (see :class:`EndWatcher`)."""
        async with self._transport(resolved, transport, answer, server_stream) as (read, write):
            yield EndWatcher(read, lambda: self._set_unavailable("connection closed")), write

    @contextlib.asynccontextmanager
    async def _transport(
        self,
        resolved: ResolvedServer,
        transport: str,
        answer: FirstAnswer | None = None,
        server_stream: ServerStream | None = None,
    ) -> AsyncIterator[tuple[Any, Any]]:
        self.stderr.exit_status = None
        async with open_streams(
            resolved,
            transport,
            name=self.name,
            timeout=self.config.timeout,
            init_timeout=self.config.init_timeout,
            auth=self._authorization(resolved) if transport != STDIO else None,
            answer=answer,
            server_stream=server_stream,
            on_stderr=self.stderr.line,
            on_exit=self._exited,
        ) as streams:
            yield streams

    def _authorization(self, resolved: ResolvedServer) -> HubOAuth | None:
        """The OAuth provider of this connection (None when the entry signs in by itself)."""
        self.auth = connection_auth(
            self.config,
            resolved,
            owner_id=self.owner_id,
            consent=self.consent,
            person_id_token=self._person_id_token,
        )
        return self.auth
