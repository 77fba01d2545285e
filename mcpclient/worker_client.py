"""The web process's side of the hub worker (``BOOCODE_HUB=worker``): a hub that lives elsewhere.

:class:`RemoteHub` offers the part of :class:`~mcpclient.hub.Hub`'s interface the chat, the
registry and the admin use (``tools``, ``snapshots``, ``call_tool``, ``reconnect``,
``rediscover``, ``set_log_level``, ``config``, ``connection``, per-person sessions), so
:mod:`mcpclient.runtime` hands it out where it would hand out a local hub and nobody above
changes. Every web process mirrors the worker's state (tools and server snapshots, sent after
each change to :func:`~mcpclient.worker_wire.state_group`): all of them offer the same tools.

Lifecycle
---------
:func:`RemoteHub.start` (first request or websocket, through ``runtime.ensure_hub``) opens a
reply channel of this process, joins the state group, starts the task that reads the reply
channel and asks the worker for its state (a worker that is not up yet leaves the mirror empty;
its first state arrives when it starts). :meth:`RemoteHub.stop` (server shutdown) ends it.

Calls and cancellation
----------------------
A call is a ``hub.call`` message with a fresh id; the reply channel's reader resolves the call's
future with ``hub.reply``, hands ``hub.progress`` to the progress callback of the calling context
(:func:`mcpclient.progress.tool_call`) and ``hub.ask`` to its asker (with the registry's time
budget paused while the person answers). The caller's time budget (the registry's) bounds the
wait: a cancelled or abandoned call sends ``hub.cancel`` so the worker cancels it too. When a
state with a new ``boot`` id arrives (the worker was restarted), calls sent to the old worker
are answered at once with an error saying so. The worker sends ``hub.alive`` every
``worker_wire.HEARTBEAT`` seconds: after ``SILENT_AFTER`` seconds without a word from it (killed,
Redis gone) calls in flight fail and new ones are refused at once, each with a message saying so.

Resources, prompts, completions and OAuth sign-in
need the live session object and are not forwarded (see docs/deployment.md): the connections
handed out here have no client, so those features say the server is unreachable.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings

from mcpclient import worker_wire
from mcpclient.config import ServerConfig
from mcpclient.elicitation import Answer, current_asker, current_budget
from mcpclient.hub import HubTool, ServerSnapshot, Status, per_user
from mcpclient.progress import tool_call
from mcpclient.results import ToolResult

logger = logging.getLogger(__name__)

REQUEST_TIMEOUT = 30.0  # seconds an admin action or a query waits for the worker
NOT_FORWARDED = "resources, prompts and sign-in are not served through the hub worker"


class WorkerUnavailable(RuntimeError):
    """The hub worker did not answer in time (not running, or Redis unreachable)."""


@dataclass
class _Logs:
    note: str = ""


@dataclass(eq=False)  # hashable by identity, as a ServerConnection is (catalogs are keyed by it)
class RemoteConnection:
    """What the web process knows of one server's session in the worker (no live client)."""

    name: str
    config: ServerConfig
    status: Status
    reason: str
    tools: tuple[Any, ...] = ()
    client: None = None
    logs: _Logs = field(default_factory=_Logs)


@dataclass
class _Call:
    future: asyncio.Future[ToolResult]
    boot: str
    reply_progress: Any
    asker: Any
    budget: Any
    asks: dict[str, asyncio.Task[None]] = field(default_factory=dict)


class RemoteHub:
    """A hub held by the hub worker, reached over the channel layer (see the module docstring)."""

    def __init__(self) -> None:
        self.layer = worker_wire.hub_layer()
        self.channel = settings.MCP_HUB_CHANNEL
        self.reply = ""
        self.boot = ""
        self.version = -1
        self._tools: list[HubTool] = []
        self._snapshots: list[ServerSnapshot] = []
        self._configs: dict[str, ServerConfig] = {}
        self._user_tools: dict[int, tuple[str, int, list[HubTool]]] = {}
        self._calls: dict[str, _Call] = {}
        self._requests: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._reader: asyncio.Task[None] | None = None
        self._watchdog: asyncio.Task[None] | None = None
        self.heard = -float("inf")  # time.monotonic() of the worker's last message
        self._background: set[asyncio.Task[Any]] = set()
        self.has_state = False

    # -- lifecycle -----------------------------------------------------------------------
    async def start(self) -> None:
        """Open the reply channel, join the state group, read replies, ask for the state."""
        # Subscribed before anything is sent: pub/sub drops what arrives for nobody.
        self.reply = await self.layer.new_channel(prefix=f"{self.channel}.reply.")
        await self.layer.group_add(worker_wire.state_group(), self.reply)
        self._reader = asyncio.ensure_future(self._read())
        self._watchdog = asyncio.ensure_future(self._watch())
        await self.refresh(op="state", timeout=5.0, quiet=True)

    async def stop(self) -> None:
        """Stop reading (server shutdown); calls still waiting end with an error."""
        for task in (self._reader, self._watchdog):
            if task is not None:
                task.cancel()
        with contextlib.suppress(Exception):
            await self.layer.group_discard(worker_wire.state_group(), self.reply)
        self._fail_calls(lambda call: True, "the web process is stopping")

    def silence(self) -> float:
        """Seconds since the worker was last heard from (its heartbeat, a reply, a state)."""
        return time.monotonic() - self.heard

    async def _watch(self) -> None:
        """Fail the calls in flight once the worker has been silent too long (killed, Redis gone)."""
        while True:
            await asyncio.sleep(worker_wire.HEARTBEAT)
            if self._calls and self.silence() > worker_wire.SILENT_AFTER:
                self._fail_calls(
                    lambda call: True,
                    f"the MCP hub worker stopped answering during the call (nothing heard for "
                    f"{self.silence():.0f} s); try again once it is back",
                )

    async def refresh(
        self, *, op: str = "apply", timeout: float = REQUEST_TIMEOUT, quiet: bool = False
    ) -> None:
        """Ask the worker to apply changes (``apply``) or just for its ``state``, and mirror it."""
        try:
            await self.request(op, timeout=timeout)
        except WorkerUnavailable:
            if not quiet:
                raise
            logger.warning("the MCP hub worker does not answer yet; its tools appear when it starts")

    async def request(self, op: str, *, timeout: float = REQUEST_TIMEOUT, **args: Any) -> Any:
        """Send ``op`` to the worker and wait for its reply (mirroring the state it carries)."""
        request_id = uuid.uuid4().hex
        waiting: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._requests[request_id] = waiting
        try:
            await self.layer.group_send(
                self.channel,
                {"type": "hub.request", "id": request_id, "reply": self.reply, "op": op, "args": args},
            )
            async with asyncio.timeout(timeout):
                reply = await waiting
        except TimeoutError:
            raise WorkerUnavailable(f"the MCP hub worker did not answer within {timeout:g} s") from None
        finally:
            self._requests.pop(request_id, None)
        if "error" in reply:
            raise RuntimeError(f"the MCP hub worker could not {op}: {reply['error']}")
        await self._mirror(reply["state"])
        return reply.get("result")

    # -- the reply channel -----------------------------------------------------------------
    async def _read(self) -> None:
        while True:
            try:
                message = await self.layer.receive(self.reply)
            except asyncio.CancelledError:
                raise
            except Exception:  # Redis gone for a moment: try again, the calls have their budgets
                logger.exception("could not read the MCP hub worker's replies")
                await asyncio.sleep(1.0)
                continue
            try:
                await self._dispatch(message)
            except Exception:
                logger.exception("could not handle a message of the MCP hub worker")

    async def _dispatch(self, message: dict[str, Any]) -> None:
        self.heard = time.monotonic()
        kind = message.get("type")
        if kind == "hub.alive":
            if message["boot"] != self.boot:  # its state never reached this process: ask for it
                self._in_background(self.refresh(op="state", timeout=5.0, quiet=True))
            return
        if kind == "hub.state":
            await self._mirror(message["state"])
            return
        if kind == "hub.reply" and message["id"] in self._requests:
            waiting = self._requests[message["id"]]
            if not waiting.done():
                waiting.set_result(message)
            return
        call = self._calls.get(message.get("id", ""))
        if call is None:
            return  # a call given up on
        if kind == "hub.reply":
            if not call.future.done():
                call.future.set_result(worker_wire.result_in(message["result"]))
        elif kind == "hub.progress":
            await call.reply_progress(message["progress"], message["total"], message["message"])
        elif kind == "hub.ask":
            task = asyncio.ensure_future(self._ask(message["id"], call, message["ask"], message["form"]))
            call.asks[message["ask"]] = task
            task.add_done_callback(lambda _: call.asks.pop(message["ask"], None))
        elif kind == "hub.ask_end":
            task = call.asks.get(message["ask"])
            if task is not None:
                task.cancel()

    async def _ask(self, call_id: str, call: _Call, ask_id: str, form: dict[str, Any]) -> None:
        """Show a forwarded form to the person behind the call, off the clock; send the answer."""
        answer = Answer("cancel")
        if call.budget is not None:
            call.budget.pause()
        try:
            answer = await call.asker(worker_wire.form_in(form))
        finally:
            if call.budget is not None:
                call.budget.resume()
            message = {"type": "hub.answer", "id": call_id, "ask": ask_id, "action": answer.action}
            self._send_soon({**message, "content": answer.content})

    def _send_soon(self, message: dict[str, Any]) -> None:
        """Send to the worker without waiting (also from a task being cancelled)."""
        self._in_background(self.layer.group_send(self.channel, message))

    def _in_background(self, coroutine: Any) -> None:
        task = asyncio.ensure_future(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _mirror(self, state: dict[str, Any]) -> None:
        """Take the worker's state as this process's (tools, snapshots, configs)."""
        if state["boot"] != self.boot:
            if self.boot:
                logger.warning("the MCP hub worker restarted: calls sent to it before are lost")
            self.boot = state["boot"]
            self._fail_calls(
                lambda call: call.boot != self.boot,
                "the MCP hub worker restarted during the call (its sessions were reopened); try again",
            )
        self._tools = [worker_wire.tool_in(tool) for tool in state["tools"]]
        self._snapshots = [worker_wire.snapshot_in(snapshot) for snapshot in state["snapshots"]]
        if state["version"] != self.version:
            from mcpclient.sync import server_configs

            configs = await database_sync_to_async(server_configs)()
            self._configs = {config.name: config for config in configs}
            self.version = state["version"]
        self.has_state = True

    def _fail_calls(self, which: Any, reason: str) -> None:
        for call in list(self._calls.values()):
            if which(call) and not call.future.done():
                call.future.set_result(ToolResult.error(f"MCP tool call failed: {reason}."))

    # -- the Hub interface -----------------------------------------------------------------
    def tools(self, user_id: int | None = None) -> list[HubTool]:
        """The shared tools, or ``user_id``'s view when their own sessions were opened."""
        if user_id is not None:
            cached = self._user_tools.get(user_id)
            if cached is not None and cached[0] == self.boot and cached[1] == self.version:
                return list(cached[2])
        return list(self._tools)

    def snapshots(self) -> list[ServerSnapshot]:
        """The state of every configured server as the worker last reported it."""
        return list(self._snapshots)

    def config(self, name: str) -> ServerConfig | None:
        """A server's configuration (from the database, as of the worker's McpState version)."""
        return self._configs.get(name)

    def per_user_servers(self) -> list[ServerConfig]:
        """The enabled "perUser" servers."""
        return [config for config in self._configs.values() if config.enabled and per_user(config)]

    def connection(self, name: str) -> RemoteConnection | None:
        """What is known of a server's shared session (no client: see the module docstring)."""
        config = self._configs.get(name)
        snapshot = next((s for s in self._snapshots if s.name == name), None)
        if config is None or snapshot is None or snapshot.status is Status.DISABLED:
            return None
        reason = snapshot.last_error if snapshot.status is not Status.READY else NOT_FORWARDED
        return RemoteConnection(name, config, snapshot.status, reason, snapshot.tools)

    def user_connection(self, name: str, user_id: int) -> None:
        """Per-person sessions live in the worker only."""
        return None

    async def open_user_sessions(self, user_id: int, names: list[str]) -> None:
        """Open ``user_id``'s "perUser" sessions in the worker and keep the tools they see."""
        tools = await self.request("open_user", user_id=user_id, names=list(names))
        self._user_tools[user_id] = (self.boot, self.version, [worker_wire.tool_in(tool) for tool in tools])

    async def close_user_session(self, name: str, user_id: int | None) -> None:
        """Close a person's session of ``name`` in the worker."""
        await self.request("close_user", name=name, user_id=user_id)
        if user_id is not None:
            self._user_tools.pop(user_id, None)

    async def authorize(self, name: str, *, user_id: int) -> Any:
        """OAuth sign-in needs the live session: not through the hub worker."""
        raise RuntimeError(f'Signing in to "{name}": {NOT_FORWARDED}; run BOOCODE_HUB=inprocess to sign in')

    async def reconnect(self, name: str) -> None:
        """Close and reopen a server's session in the worker."""
        await self.request("reconnect", name=name)

    async def rediscover(self, name: str) -> None:
        """List a server's tools again in the worker."""
        await self.request("rediscover", name=name)

    async def set_log_level(self, name: str, level: str) -> str:
        """Ask the worker's session of ``name`` for log messages at ``level``."""
        return str(await self.request("set_log_level", name=name, level=level))

    async def drain_listeners(self) -> None:
        """Nothing to wait for: the worker drains its listeners before it replies."""

    async def call_tool(
        self, prefixed_name: str, arguments: dict[str, Any] | None = None, *, user_id: int | None = None
    ) -> ToolResult:
        """Call a tool in the worker; progress and forms come back to this context while it runs."""
        if self.silence() > worker_wire.SILENT_AFTER:
            silent = self.silence()
            heard = "not heard from yet" if silent == float("inf") else f"nothing heard for {silent:.0f} s"
            return ToolResult.error(
                f'MCP tool "{prefixed_name}" failed: the MCP hub worker is not running ({heard}); '
                "try again once it is back."
            )
        call_id = uuid.uuid4().hex
        loop = asyncio.get_running_loop()
        asker = current_asker()
        known = next((tool for tool in self._tools if tool.prefixed_name == prefixed_name), None)
        # Progress names the server's own tool name, as the in-process hub's does.
        with tool_call(tool=known.name if known is not None else prefixed_name) as on_progress:
            call = _Call(loop.create_future(), self.boot, on_progress, asker, current_budget())
            self._calls[call_id] = call
            try:
                await self.layer.group_send(
                    self.channel,
                    {
                        "type": "hub.call",
                        "id": call_id,
                        "reply": self.reply,
                        "name": prefixed_name,
                        "arguments": arguments or {},
                        "user_id": user_id,
                        "ask": asker is not None,
                    },
                )
                return await call.future
            except asyncio.CancelledError:
                self._send_soon({"type": "hub.cancel", "id": call_id})
                raise
            finally:
                del self._calls[call_id]
                for task in call.asks.values():
                    task.cancel()
