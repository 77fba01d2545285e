"""The web process's side of the hub worker (``BOOCODE_HUB=worker``): a hub that lives elsewhere.

Invariants. :class:`RemoteHub` is held to :class:`~mcpclient.engine.api.HubApi` like the in-process
hub, so nothing above the runtime changes. :meth:`RemoteHub.start` subscribes (its reply channel,
the state group) before it sends anything: pub/sub drops what arrives for nobody. Every call has a
fresh id and is bounded by its caller's time budget, paused while the person answers a forwarded
form and, for a link they opened, until it ends on either side; a call given up on sends
``hub.cancel``. No call waits for a worker that is gone: before a call or a request waits for an
answer, Redis is asked whether anything listens on the hub channel (a killed worker's connection,
and its subscription, end with it), so the first call after a worker died is refused at once; a
new ``boot`` id fails the calls sent to the old worker at once, and after ``SILENT_AFTER`` seconds
of silence the calls in flight fail and new ones are refused. Reads, completions, prompts and
skills run in the worker on its live sessions: a session's ``client`` here is only :data:`IN_WORKER`.

The tour: docs/deployment.md (*What runs where*, *Messages between the processes*, *Calls,
cancellation and crashes*).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import mcp.types as types
from channels.db import database_sync_to_async
from django.conf import settings

from mcpclient.config.model import ServerConfig, per_user
from mcpclient.core.approval import granted
from mcpclient.core.elicitation import Answer, Link
from mcpclient.core.prompts import HubPrompt, PromptError, PromptMessage
from mcpclient.core.resources import Completions, ReadResult, ResourceError
from mcpclient.core.results import ToolResult, unknown_tool
from mcpclient.core.skills import Skill, SkillError, SkillText
from mcpclient.core.state import HubTool, ServerSnapshot, Status
from mcpclient.engine.api import HubApi, SessionReads
from mcpclient.engine.elicitation import current_asker, current_budget
from mcpclient.engine.progress import tool_call
from mcpclient.engine.serving import hidden_from, pick, refused, session_for, takes_name
from mcpclient.telemetry import tracing
from mcpclient.telemetry.metrics import tool_step_so_far
from mcpclient.worker import wire as worker_wire
from mcpclient.worker.remote_sessions import IN_WORKER, RemoteConnection

logger = logging.getLogger(__name__)

REQUEST_TIMEOUT = 30.0  # seconds an admin action or a query waits for the worker
SKILLS_FRESH = 5.0  # seconds a person's skills, fetched from the worker, are used without asking again


class WorkerUnavailable(RuntimeError):
    """The hub worker did not answer in time (not running, or Redis unreachable)."""


@dataclass
class _Call:
    future: asyncio.Future[ToolResult]
    boot: str
    reply_progress: Any
    asker: Any
    budget: Any
    asks: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    links: dict[str, Link] = field(default_factory=dict)  # consented links the worker still follows
    returned: bool = False  # the worker's answer came (links still open end "completed")


def _resource_unreachable(server: str) -> Any:
    def unreachable(exc: Exception) -> ResourceError:
        return ResourceError(f'MCP server "{server}" is unreachable: {exc}', 502)

    return unreachable


class RemoteHub(SessionReads[RemoteConnection]):
    """A hub held by the hub worker, reached over the channel layer (docs/deployment.md)."""

    def __init__(
        self,
        read_configs: Callable[[], list[ServerConfig]],
        person_groups: Callable[[int], Collection[str] | None] | None = None,
    ) -> None:
        # The servers' configurations as this process reads them (the runtime passes the
        # database's), read again in the database thread whenever the worker's version moves.
        self._read_configs = read_configs
        # The groups a person is in, as this process last read them (the worker checks again).
        self.person_groups = person_groups
        self.layer = worker_wire.hub_layer()
        self.channel = settings.MCP_HUB_CHANNEL
        self.reply = ""
        self.boot = ""
        self.version = -1
        self._tools: list[HubTool] = []  # the model's and the views' (MCP Apps), each once
        self._by_use: tuple[list[HubTool], list[HubTool]] = ([], [])  # ... the model's, the views'
        self._snapshots: list[ServerSnapshot] = []
        self._configs: dict[str, ServerConfig] = {}
        self._personal: dict[int, dict[str, ServerConfig]] = {}  # people's own servers (set_personal)
        # A person's own view (boot, McpState version, every tool, the model's, the views').
        self._user_tools: dict[int, tuple[str, int, list[HubTool], tuple[list[HubTool], list[HubTool]]]] = {}
        # The sessions as people last loaded them (load_catalogs): (server, None) for a shared
        # session, (server, user id) for a person's own.
        self._views: dict[tuple[str, int | None], RemoteConnection] = {}
        # The skills each person (None: nobody's own sessions) could use at their last load_skills.
        self._skills: dict[int | None, list[Skill]] = {}
        self._skills_at: dict[int | None, tuple[str, float]] = {}  # (boot, monotonic time) of each fetch
        self._calls: dict[str, _Call] = {}
        self._requests: dict[str, asyncio.Future[worker_wire.Reply]] = {}
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

    def _heard(self) -> str:
        silent = self.silence()
        return "not heard from yet" if silent == float("inf") else f"nothing heard for {silent:.0f} s"

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
        """Send ``op`` to the worker and wait for its reply (mirroring the state it carries).

        A worker that has been silent too long is not waited for (only the ``state`` a starting
        process asks for is): :class:`WorkerUnavailable` at once, saying so.
        """
        if (absent := await self._absent(quiet_ok=op == "state")) is not None:
            raise WorkerUnavailable(f"the MCP hub worker is not running ({absent})")
        request_id = uuid.uuid4().hex
        waiting: asyncio.Future[worker_wire.Reply] = asyncio.get_running_loop().create_future()
        self._requests[request_id] = waiting
        try:
            await self.layer.group_send(
                self.channel, worker_wire.Request(request_id, self.reply, op, args).out()
            )
            async with asyncio.timeout(timeout):
                reply = await waiting
        except TimeoutError:
            raise WorkerUnavailable(f"the MCP hub worker did not answer within {timeout:g} s") from None
        finally:
            self._requests.pop(request_id, None)
        if reply.error is not None:
            raise RuntimeError(f"the MCP hub worker could not {op}: {reply.error}")
        if reply.state is not None:  # not for queries (server.QUERIES): the state group brings changes
            await self._mirror(reply.state)
        if reply.refused is not None:
            raise worker_wire.refusal_in(reply.refused)
        return reply.result

    async def _absent(self, *, quiet_ok: bool = False) -> str | None:
        """Why the worker is known to be away now (None: it may answer, so its answer is awaited).

        First Redis's word: nothing subscribed to the hub channel means no worker runs (one killed
        a moment ago included, which no heartbeat has missed yet). Then the heartbeats: silent for
        ``SILENT_AFTER`` seconds (``quiet_ok``: a starting process asking for the state, which may
        not have heard anything yet, still asks when something listens).
        """
        count = getattr(self.layer, "group_listeners", None)
        if count is not None:
            from redis.exceptions import RedisError  # (Redis is there: the layer asks it)

            try:
                listening: int | None = await count(self.channel)
            except (RedisError, OSError) as exc:
                return f"Redis cannot be reached: {exc}"
            except (RuntimeError, TimeoutError) as exc:  # the probe itself failed: not the worker's word
                logger.warning("could not ask Redis who listens on %s: %r", self.channel, exc)
                listening = None
            if listening == 0:
                return f'nothing listens on its channel "{self.channel}"'
        if not quiet_ok and self.silence() > worker_wire.SILENT_AFTER:
            return self._heard()
        return None

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

    async def _dispatch(self, received: Any) -> None:
        self.heard = time.monotonic()
        message = worker_wire.from_worker(received)
        if isinstance(message, worker_wire.Alive):
            if message.boot != self.boot:  # its state never reached this process: ask for it
                self._in_background(self.refresh(op="state", timeout=5.0, quiet=True))
            return
        if isinstance(message, worker_wire.StateMessage):
            await self._mirror(message.state)
            return
        if isinstance(message, worker_wire.Reply) and message.id in self._requests:
            waiting = self._requests[message.id]
            if not waiting.done():
                waiting.set_result(message)
            return
        call = self._calls.get(message.id)
        if call is None:
            return  # a call given up on
        if isinstance(message, worker_wire.Reply):
            if not call.future.done():
                call.returned = True
                call.future.set_result(worker_wire.result_in(message.result))
        elif isinstance(message, worker_wire.Progress):
            await call.reply_progress(message.progress, message.total, message.message)
        elif isinstance(message, worker_wire.Ask):
            ask_id = message.ask
            task = asyncio.ensure_future(self._ask(call, message))
            call.asks[ask_id] = task
            task.add_done_callback(lambda _: call.asks.pop(ask_id, None))
        elif isinstance(message, worker_wire.AskEnd):
            asking = call.asks.get(message.ask)
            if asking is not None:
                asking.cancel()
        elif isinstance(message, worker_wire.LinkEnd):
            link = call.links.pop(message.ask, None)
            if link is not None:
                link.finish(cast(Any, message.outcome))  # (as the worker sent it)

    async def _ask(self, call: _Call, message: worker_wire.Ask) -> None:
        """Show a forwarded form or link to the person behind the call, off the clock; send the answer.

        A link the person consented to stays off the clock until it ends: the worker says when
        the server finished it (``hub.link_end``), and this side tells the worker when the person
        did, its time ran out or the turn stopped.
        """
        call_id, ask_id = message.id, message.ask
        link = worker_wire.link_in(message.link) if message.link is not None else None
        answer = Answer("cancel")
        if call.budget is not None:
            call.budget.pause()
        try:
            try:
                shown = link if link is not None else worker_wire.form_in(message.form or {})
                answer = await call.asker(shown)
            finally:
                if link is not None and answer.action == "accept":
                    call.links[ask_id] = link  # before the answer: the worker may end it at once
                self._send_soon(worker_wire.AnswerMessage(call_id, ask_id, answer.action, answer.content))
            if link is not None and answer.action == "accept":
                outcome = await asyncio.shield(link.finished)
                if call.links.pop(ask_id, None) is not None:  # ended here, not by the worker
                    self._send_soon(worker_wire.LinkEnd(call_id, ask_id, outcome))
        finally:
            if call.budget is not None:
                call.budget.resume()

    def _send_soon(self, message: worker_wire.ToWorker) -> None:
        """Send to the worker without waiting (also from a task being cancelled)."""
        self._in_background(self.layer.group_send(self.channel, message.out()))

    def _in_background(self, coroutine: Any) -> None:
        task = asyncio.ensure_future(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _mirror(self, state: worker_wire.WorkerState) -> None:
        """Take the worker's state as this process's (tools, snapshots, configs)."""
        if state.boot != self.boot:
            if self.boot:
                logger.warning("the MCP hub worker restarted: calls sent to it before are lost")
            self.boot = state.boot
            self._fail_calls(
                lambda call: call.boot != self.boot,
                "the MCP hub worker restarted during the call (its sessions were reopened); try again",
            )
        self._tools = [worker_wire.tool_in(tool) for tool in state.tools]
        self._by_use = _split(self._tools)
        self._snapshots = [worker_wire.snapshot_in(snapshot) for snapshot in state.snapshots]
        if state.version != self.version:
            configs = await database_sync_to_async(self._read_configs)()
            self._configs = {config.name: config for config in configs}
            self.version = state.version
        self.has_state = True

    def _fail_calls(self, which: Any, reason: str) -> None:
        for call in list(self._calls.values()):
            if which(call) and not call.future.done():
                call.future.set_result(ToolResult.error(f"MCP tool call failed: {reason}."))

    # -- the Hub interface -----------------------------------------------------------------
    def tools(self, user_id: int | None = None, *, views: bool = False) -> list[HubTool]:
        """The shared tools, or ``user_id``'s view when their own sessions were opened.

        The model's tools, or with ``views`` those its servers' views may call (MCP Apps).
        """
        model, for_views = self._mine(user_id)[1]
        return list(for_views if views else model)

    def every_tool(self, user_id: int | None = None) -> list[HubTool]:
        """The model's tools and the views' tools together, each once."""
        return list(self._mine(user_id)[0])

    def _mine(self, user_id: int | None) -> tuple[list[HubTool], tuple[list[HubTool], list[HubTool]]]:
        """Every tool ``user_id`` sees, and those split into the model's and the views' (less the
        servers whose ``groups`` they are not in)."""
        if user_id is None:
            return self._tools, self._by_use
        every, split, own = self._tools, self._by_use, frozenset[str]()
        cached = self._user_tools.get(user_id)
        if cached is not None and cached[0] == self.boot and cached[1] == self.version:
            # The worker's view of them: their own server under the name of a shared server hidden
            # from them is theirs to see (the shared tools alone hold only the hidden one's).
            every, split, own = cached[2], cached[3], self._own_names(user_id)
        hidden = self._hidden_from(user_id) - own
        if hidden:
            every = [tool for tool in every if tool.server not in hidden]
            split = _split(every)
        return every, split

    def _own_names(self, user_id: int) -> frozenset[str]:
        """The names of ``user_id``'s own servers, as last set (:meth:`set_personal`)."""
        return frozenset(self._personal.get(user_id, {}))

    def _hidden_from(self, user_id: int) -> frozenset[str]:
        """The servers with ``groups`` that ``user_id`` is in none of (mcpclient.core.access)."""
        return hidden_from(self, self._configs.values(), user_id)

    def groups_of(self, user_id: int) -> Collection[str] | None:
        """The groups ``user_id`` is in, as this process last read them (``None``: not known)."""
        return self.person_groups(user_id) if self.person_groups is not None else None

    def snapshots(self) -> list[ServerSnapshot]:
        """The state of every configured server as the worker last reported it."""
        return list(self._snapshots)

    def config(self, name: str, user_id: int | None = None) -> ServerConfig | None:
        """A server's configuration (from the database, as of the worker's McpState version), else
        ``user_id``'s own server's (as this process last read them; the worker reads them itself),
        also in place of a shared server hidden from them (:func:`~mcpclient.engine.serving.pick`)."""
        found = self._configs.get(name)
        if user_id is not None:
            found = pick(self, found, self._personal.get(user_id, {}).get(name), user_id)
        return found

    def personal_servers(self, user_id: int) -> list[ServerConfig]:
        """``user_id``'s own servers, as last set (:meth:`set_personal`)."""
        return list(self._personal.get(user_id, {}).values())

    async def set_personal(self, user_id: int, configs: Iterable[ServerConfig]) -> None:
        """Keep ``user_id``'s own servers for the lookups here; the worker reads them from the
        database itself when it opens the person's sessions (``open_user``)."""
        wanted = {
            config.name: config
            for config in configs
            if not takes_name(self, self._configs.get(config.name), user_id)
        }
        if wanted:
            self._personal[user_id] = wanted
        else:
            self._personal.pop(user_id, None)

    def per_user_servers(self) -> list[ServerConfig]:
        """The enabled "perUser" servers."""
        return [config for config in self._configs.values() if config.enabled and per_user(config)]

    def session_for(self, server: str, user_id: int | None) -> RemoteConnection | None:
        """The session that serves ``user_id`` for ``server`` (see :mod:`mcpclient.engine.serving`)."""
        return session_for(self, server, user_id)

    def connection(self, name: str) -> RemoteConnection | None:
        """A server's shared session as the worker last reported it (catalogs: see load_catalogs)."""
        config = self._configs.get(name)
        snapshot = next((s for s in self._snapshots if s.name == name), None)
        if config is None or snapshot is None or snapshot.status is Status.DISABLED:
            return None
        seen = self._views.get((name, None))
        if seen is None:
            seen = self._views[(name, None)] = RemoteConnection(name, config, snapshot.status, "")
        seen.config, seen.status, seen.tools = config, snapshot.status, snapshot.tools
        seen.reason = "" if snapshot.status is Status.READY else snapshot.last_error
        seen.client = IN_WORKER if snapshot.status is Status.READY else None
        seen.logs.note = snapshot.log_note
        return seen

    def user_connection(self, name: str, user_id: int) -> RemoteConnection | None:
        """``user_id``'s own session of ``name`` as their last :meth:`load_catalogs` found it."""
        return self._views.get((name, user_id))

    async def load_catalogs(self, user_id: int | None, *, wait: float = 0.0) -> None:
        """Fetch the resources and prompts of the sessions ``user_id`` uses from the worker.

        The worker waits up to ``wait`` seconds for a ready session's first listings. A worker
        that does not answer leaves the last picture (its calls then say why they fail).
        """
        try:
            views = await self.request("view", timeout=wait + REQUEST_TIMEOUT, user_id=user_id, wait=wait)
        except WorkerUnavailable as exc:
            logger.warning("could not load the resources and prompts of the MCP servers: %s", exc)
            return
        own = set()
        for view in views:
            config = self.config(view["name"], user_id)
            if config is None:
                continue
            key = (view["name"], user_id if view["own"] else None)
            own.add(key)
            status = Status(view["status"])
            seen = self._views.get(key) or RemoteConnection(view["name"], config, status, "")
            seen.config, seen.status, seen.reason = config, status, view["reason"]
            seen.client = IN_WORKER if status is Status.READY else None
            if view["own"]:
                seen.tools = tuple(worker_wire.discovered_in(tool) for tool in view["tools"])
            seen.resources = worker_wire.resources_in(view["resources"])
            listed = worker_wire.prompts_in(view["prompts"])
            if listed is not None:
                seen.prompts = listed
            self._views[key] = seen
        for key in [key for key in self._views if key[1] == user_id and user_id is not None]:
            if key not in own:  # closed in the worker since
                del self._views[key]

    async def _query(self, op: str, server: str, unreachable: Any, **args: Any) -> Any:
        """Ask the worker to run ``op`` on a session of ``server`` (its ``timeout``, then some).

        A worker that does not answer (or fails) raises ``unreachable(reason)``.
        """
        config = self._configs.get(server)
        timeout = (config.timeout if config is not None else 0.0) + REQUEST_TIMEOUT
        try:
            return await self.request(op, timeout=timeout, server=server, **args)
        except (WorkerUnavailable, RuntimeError) as exc:
            raise unreachable(exc) from None

    async def read_resource(
        self, server: str, uri: str, user_id: int | None, *, view: bool = False
    ) -> ReadResult:
        """``resources/read`` in the worker (capped there); a :class:`ResourceError` when it cannot."""
        found = await self._query(
            "read_resource", server, _resource_unreachable(server), uri=uri, user_id=user_id, view=view
        )
        return worker_wire.read_in(found)

    async def complete(
        self,
        server: str,
        ref: types.ResourceTemplateReference | types.PromptReference,
        argument: dict[str, str],
        context: dict[str, str] | None,
        user_id: int | None,
    ) -> Completions:
        """``completion/complete`` in the worker; a :class:`ResourceError` when it cannot."""
        kind, name = ("prompt", ref.name) if isinstance(ref, types.PromptReference) else ("resource", ref.uri)
        asked = {"ref": kind, "name": name, "argument": argument, "context": context, "user_id": user_id}
        found = await self._query("complete", server, _resource_unreachable(server), **asked)
        return Completions(values=tuple(found["values"]), total=found["total"], has_more=found["has_more"])

    async def get_prompt(
        self, server: str, name: str, arguments: dict[str, str], user_id: int | None
    ) -> tuple[HubPrompt, list[PromptMessage]]:
        """``prompts/get`` in the worker; a :class:`~mcpclient.core.prompts.PromptError` when it cannot."""

        def unreachable(exc: Exception) -> PromptError:
            return PromptError(f'MCP server "{server}" unreachable: {exc}')

        found = await self._query(
            "get_prompt", server, unreachable, name=name, arguments=arguments, user_id=user_id
        )
        messages = [PromptMessage(**message) for message in found["messages"]]
        return worker_wire.prompt_in(found["prompt"]), messages

    def skills(self, user_id: int | None) -> list[Skill]:
        """The skills ``user_id`` could use at their last :meth:`load_skills` (none before one)."""
        return list(self._skills.get(user_id, ()))

    async def load_skills(self, user_id: int | None, *, wait: float = 0.0) -> None:
        """Fetch the skills ``user_id`` may use from the worker (which waits up to ``wait`` seconds
        for first listings). A worker that does not answer (or fails) leaves the last picture.

        A fetch younger than :data:`SKILLS_FRESH` seconds (from the same worker) is used as it is:
        a turn does not pay a hop to the worker for skills that rarely change.
        """
        fetched = self._skills_at.get(user_id)
        if not wait and fetched is not None and fetched[0] == self.boot:
            if time.monotonic() - fetched[1] < SKILLS_FRESH:
                return
        try:
            found = await self.request("skills", timeout=wait + REQUEST_TIMEOUT, user_id=user_id, wait=wait)
        except (WorkerUnavailable, RuntimeError) as exc:  # a turn goes on without (new) skills
            logger.warning("could not load the skills of the MCP servers: %s", exc)
            return
        self._skills[user_id] = [worker_wire.skill_in(skill) for skill in found]
        self._skills_at[user_id] = (self.boot, time.monotonic())

    async def read_skill(self, server: str, skill: str, path: str, user_id: int | None) -> SkillText:
        """One verified file of a skill, read and checked in the worker; a :class:`SkillError` when not."""

        def unreachable(exc: Exception) -> SkillError:
            return SkillError(f'MCP server "{server}" is unreachable: {exc}', 502)

        found = await self._query("read_skill", server, unreachable, skill=skill, path=path, user_id=user_id)
        return worker_wire.skill_text_in(found)

    async def open_user_sessions(self, user_id: int, names: Iterable[str]) -> list[str]:
        """Open ``user_id``'s "perUser" sessions in the worker and keep the tools they see; what
        could not be opened, as the worker says it.

        A worker that does not answer leaves the tools as they were: the turn goes on, and a
        call of a tool then says why it fails.
        """
        try:
            opened = await self.request("open_user", user_id=user_id, names=list(names))
        except WorkerUnavailable as exc:
            logger.warning("could not open the sessions of user %s: %s", user_id, exc)
            return []
        every = [worker_wire.tool_in(tool) for tool in opened["tools"]]
        self._user_tools[user_id] = (self.boot, self.version, every, _split(every))
        return [str(sentence) for sentence in opened["refused"]]

    async def close_user_session(self, name: str, user_id: int | None) -> None:
        """Close a person's session of ``name`` in the worker."""
        await self.request("close_user", name=name, user_id=user_id)
        if user_id is not None:
            self._user_tools.pop(user_id, None)

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
        self,
        prefixed_name: str,
        arguments: dict[str, Any] | None = None,
        *,
        user_id: int | None = None,
        views: bool = False,
    ) -> ToolResult:
        """Call a tool in the worker; progress and forms come back to this context while it runs.

        ``views``: a call from a view (MCP Apps), among the tools views may call.
        """
        if (absent := await self._absent()) is not None:
            return ToolResult.error(
                f'MCP tool "{prefixed_name}" failed: the MCP hub worker is not running ({absent}); '
                "try again once it is back."
            )
        call_id = uuid.uuid4().hex
        loop = asyncio.get_running_loop()
        asker = current_asker()
        # The person's own tools first: one of their servers may have a hidden server's name.
        known = next((tool for tool in self._mine(user_id)[0] if tool.prefixed_name == prefixed_name), None)
        if known is None:
            known = next((tool for tool in self._tools if tool.prefixed_name == prefixed_name), None)
            if known is not None and refused(self, known.server, user_id):  # (engine.serving)
                return unknown_tool(prefixed_name)
        # Progress names the server's own tool name, as the in-process hub's does.
        with (
            tool_call(tool=known.name if known is not None else prefixed_name) as on_progress,
            tracing.span(
                f"hub.call {prefixed_name}", kind="client", attributes={"gen_ai.tool.name": prefixed_name}
            ),
        ):
            call = _Call(loop.create_future(), self.boot, on_progress, asker, current_budget())
            self._calls[call_id] = call
            # The trace context (W3C keys) and the tool step's time so far
            # (mcpclient.telemetry.metrics), which the worker goes on with, only when there are.
            message = worker_wire.Call(
                id=call_id,
                reply=self.reply,
                name=prefixed_name,
                arguments=arguments or {},
                user_id=user_id,
                ask=asker is not None,
                approval=granted(),  # the worker checks it again (core.approval)
                views=views,
                trace=tracing.carrier() or None,
                step=tool_step_so_far(),
            )
            try:
                await self.layer.group_send(self.channel, message.out())
                return await call.future
            except asyncio.CancelledError:
                self._send_soon(worker_wire.Cancel(call_id))
                raise
            finally:
                del self._calls[call_id]
                for link in call.links.values():  # as the worker's own links end with the call
                    link.finish("completed" if call.returned else "withdrawn")
                call.links.clear()
                for task in call.asks.values():
                    task.cancel()


def _split(every: list[HubTool]) -> tuple[list[HubTool], list[HubTool]]:
    """The model's tools and the views' tools (MCP Apps) among ``every``."""
    return [tool for tool in every if tool.model], [tool for tool in every if tool.app]


if TYPE_CHECKING:

    def _offers_the_hub_api(hub: RemoteHub) -> HubApi:
        return hub  # the type checker holds RemoteHub to the same Protocol as Hub
