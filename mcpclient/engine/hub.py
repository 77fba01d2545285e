"""The hub: every configured server's connection, their tools under prefixed names, and calls.

Invariants. :meth:`Hub.apply` reconciles under one lock: new or changed enabled servers start, the rest
stop; servers connect concurrently and ``start`` returns when each has settled (ready or failed). The
catalog of prefixed names (:mod:`~mcpclient.engine.tool_catalog`) is rebuilt from every connection in
configuration order, so a name never changes while its server stays. ``perUser`` servers get one session
per (server, person), opened on first need and closed after ``OAUTH_IDLE_SECONDS`` idle; a person's own
server's session is keyed apart (``name@own``: :func:`~mcpclient.config.model.session_name`), so one
under the name of a shared server hidden from them never meets that server's session;
:func:`~mcpclient.engine.serving.session_for` answers "which session serves this person". Listeners
receive a :class:`~mcpclient.core.state.ServerSnapshot` on every change; the hub knows nothing of
Django's models. Cancelling a caller of :meth:`Hub.call_tool` abandons the request and the SDK sends
``notifications/cancelled``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import mcp.types as types

from mcpclient.config.model import (
    ServerConfig,
    per_user,
    per_user_process,
    same_session,
    session_name,
)
from mcpclient.config.resolve import InputLookup
from mcpclient.core import pinning
from mcpclient.core.pinning import PinBook
from mcpclient.core.prompts import HubPrompt, PromptMessage
from mcpclient.core.resources import Completions, ReadResult
from mcpclient.core.results import ToolResult, unknown_tool
from mcpclient.core.skills import Skill, SkillText
from mcpclient.core.state import HubTool, Listener, ServerSnapshot, Status
from mcpclient.engine import prompts, resources, skills
from mcpclient.engine.api import HubApi, SessionReads
from mcpclient.engine.authorization import BrowserConsent, Consent
from mcpclient.engine.connection import ServerConnection
from mcpclient.engine.healing import Healer, HealPolicy
from mcpclient.engine.resources import refresh_now as resources_refresh_now
from mcpclient.engine.server_logs import EntryListener
from mcpclient.engine.serving import allowed, hidden_from, pick, ready_servers, session_for, takes_name
from mcpclient.engine.tool_catalog import Catalog, tool_catalog

logger = logging.getLogger("mcpclient.hub")


@dataclass
class Hub(SessionReads[ServerConnection]):
    """Every configured server's connection, their tools under prefixed names, and calls."""

    base_dir: Path = field(default_factory=Path.cwd)
    allowed_commands: list[str] | None = None
    _connections: dict[str, ServerConnection] = field(default_factory=dict)
    _configs: dict[str, ServerConfig] = field(default_factory=dict)
    _order: list[str] = field(default_factory=list)
    _catalog: Catalog = field(default_factory=Catalog)
    _names: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    _listeners: list[Listener] = field(default_factory=list)
    _pending: set[asyncio.Task[Any]] = field(default_factory=set)  # listener calls (drain_listeners)
    # Sessions started by a sign-in: each waits for the person's callback, so it is no listener
    # call to drain (a drain would hold back the very reply that sends the person to sign in).
    _signins: set[asyncio.Task[Any]] = field(default_factory=set)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    # "perUser" servers: one session per (server, person), opened when that person needs it; a
    # person's own server's under (session_name(config), person), never a shared server's key.
    _user_connections: dict[tuple[str, int], ServerConnection] = field(default_factory=dict)
    _user_views: dict[int, tuple[int, frozenset[str], Catalog]] = field(default_factory=dict)
    # People's own servers (mcpclient.runtime.personal), by person and name: each opened as that
    # person's session; a shared server of the same name that the person may use wins (one hidden
    # from them leaves them the name: mcpclient.engine.serving.pick).
    _personal: dict[int, dict[str, ServerConfig]] = field(default_factory=dict)
    _reaper: asyncio.Task[None] | None = None
    # Who signs in when a server asks and no person was asked to (None: nobody, the server
    # waits for Connect). Non-interactive tools set it, e.g. the conformance client.
    consent_factory: Callable[[], Consent] | None = None
    generation: int = 0
    # The log level asked of each server (McpServer.log_level, filled by the runtime) and who
    # hears of the shared sessions' log messages (see mcpclient.engine.server_logs).
    log_levels: dict[str, str] = field(default_factory=dict)
    _log_listeners: list[EntryListener] = field(default_factory=list)
    # How sessions heal (pings, reconnects; see mcpclient.engine.healing). A bare hub does neither; the
    # process-wide hub (mcpclient.runtime.new_hub) takes the policy from the settings.
    healing: HealPolicy = field(default_factory=HealPolicy.off)
    # What the hub is handed instead of reading settings (mcpclient.runtime.new_hub fills them):
    # where ${input:} values come from (None: the environment only), how long a person may take
    # to sign in, after how long unused personal sessions close, the version it announces.
    input_value: InputLookup | None = None
    consent_timeout: float = 600.0
    idle_seconds: float = 900.0
    client_version: str = "0"
    # MCP Apps for the installation (BOOCODE_APPS): sessions advertise the extension only when
    # this and the server's own "apps" key allow it.
    apps: bool = True
    # Where accepted tool definitions are kept (mcpclient.core.pinning; None: nothing is pinned).
    pins: PinBook | None = None
    # "scope": "perUser" stdio servers: a person's username by id (for ${user.name}), and how many
    # people's processes one such server may run at once.
    person_name: Callable[[int], str] | None = None
    per_user_processes: int = 20
    # "perUser" identity_assertion servers: a person's ID token from their sign-in to BooCode.
    person_id_token: Callable[[int], str | None] | None = None
    # The groups a person is in, as the process last read them (None: not known), for the servers
    # with "groups" (mcpclient.core.access); without it such servers serve no person.
    person_groups: Callable[[int], Collection[str] | None] | None = None
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
                if name not in wanted
                or not wanted[name].enabled
                or not same_session(wanted[name], conn.config)
            ]
            stale_users = [
                key
                for key, conn in self._user_connections.items()
                if (
                    # A person's own: shadowed by a shared server of its name that they may use.
                    takes_name(self, wanted.get(conn.name), key[1])
                    if conn.config.owner_id is not None
                    else key[0] not in wanted
                    or not wanted[key[0]].enabled
                    or not same_session(wanted[key[0]], conn.config)
                )
            ]
            for key, conn in [*self._connections.items(), *self._user_connections.items()]:
                name = key if isinstance(key, str) else key[0]
                if name in wanted and conn.config != wanted[name] and same_session(wanted[name], conn.config):
                    conn.config = wanted[name]  # who may use it changed, not the session
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
        """List a ready server's tools, resources and templates, prompts and skills again (every session)."""
        connections = [self._connections.get(name)]
        connections += [conn for key, conn in list(self._user_connections.items()) if key[0] == name]
        await asyncio.gather(
            *(
                asyncio.gather(
                    conn.relist(),
                    resources_refresh_now(conn),
                    prompts.refresh_now(conn),
                    skills.refresh_now(conn),
                )
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
            input_value=self.input_value,
            consent_timeout=self.consent_timeout,
            client_version=self.client_version,
            apps=self.apps,
            pins=self.pins,
        )
        connection.logs.level = self.log_levels.get(config.name, "")
        connection.logs.listener = self._on_log
        self._connections[config.name] = connection
        self._on_change(connection)
        return connection

    def _default_consent(self) -> Consent | None:
        return self.consent_factory() if self.consent_factory is not None else None

    # -- sign-in and per-person sessions (see mcpclient.engine.authorization) --------------------
    async def authorize(self, name: str, *, user_id: int) -> tuple[ServerConnection, BrowserConsent]:
        """Start signing ``user_id`` in to server ``name`` in their browser (Connect).

        A "shared" server's session is replaced (``user_id`` is the administrator connecting it
        for everybody); a "perUser" server gets a session of that person's. The connection
        starts in the background: the caller awaits ``consent.url`` (where to send the
        browser) or the connection settling (it needed no sign-in, or failed first).
        """
        config = self.config(name, user_id)
        if config is None or not config.enabled or config.oauth is None:
            raise ValueError(f'MCP server "{name}" is not an enabled server that signs in with OAuth')
        consent = BrowserConsent(server=name, user_id=user_id, owner_id=user_id if per_user(config) else None)
        async with self._lock:
            if per_user(config):
                await self._stop_user((session_name(config), user_id))
                connection = self._new_user_connection(config, user_id, consent)
            else:
                await self._stop_one(name)
                connection = self._new_connection(config, consent)
        task = asyncio.create_task(connection.start(), name=f"mcp-authorize:{name}")
        self._signins.add(task)
        task.add_done_callback(self._signins.discard)
        return connection, consent

    async def open_user_sessions(self, user_id: int, names: Iterable[str]) -> list[str]:
        """Open ``user_id``'s sessions with the "perUser" servers in ``names`` (they signed in to, or
        run once per person); what could not be opened for them, as sentences for the person.

        A session that is open, opening, or waiting for a sign-in is left alone: a refused
        sign-in is not retried until the person connects again. A ``"scope": "perUser"`` stdio
        server runs at most :attr:`per_user_processes` people's processes at once: past that, a
        person without one is told so, and the others' processes go on.
        """
        starts, refused = [], []
        async with self._lock:
            for name in names:
                config = self.config(name, user_id)
                if config is None or not config.enabled or not per_user(config):
                    continue
                key = (session_name(config), user_id)
                current = self._user_connections.get(key)
                if current is not None and (
                    current.running or current.status in (Status.AUTH_REQUIRED, Status.READY)
                ):
                    continue
                if per_user_process(config) and current is None:
                    running = sum(1 for (server, _) in self._user_connections if server == name)
                    if running >= self.per_user_processes:
                        refused.append(
                            f'The MCP server "{name}" runs one process per person and already runs '
                            f"{running}, its limit (BOOCODE_STDIO_PER_USER_MAX): its tools are left out "
                            "for you until others' processes close after their idle time."
                        )
                        continue
                await self._stop_user(key)
                starts.append(self._new_user_connection(config, user_id, None).start())
        await asyncio.gather(*starts)
        return refused

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
                await self._stop_user(self._user_key(name, user_id))

    async def set_personal(self, user_id: int, configs: Iterable[ServerConfig]) -> None:
        """``user_id``'s own servers are ``configs`` (mcpclient.runtime.personal) from now on: the
        sessions of servers removed or changed close (each opens again at the person's next need).

        One under the name of a shared server the person may use is left out (a shared server
        hidden from them leaves them its name: :func:`~mcpclient.engine.serving.pick`)."""
        async with self._lock:
            wanted = {
                config.name: config
                for config in configs
                if not takes_name(self, self._configs.get(config.name), user_id)
            }
            current = self._personal.get(user_id, {})
            stale = [config for name, config in current.items() if wanted.get(name) != config]
            await asyncio.gather(*(self._stop_user((session_name(config), user_id)) for config in stale))
            if wanted:
                self._personal[user_id] = wanted
            else:
                self._personal.pop(user_id, None)
            if stale:
                self._rebuild()

    def personal_servers(self, user_id: int) -> list[ServerConfig]:
        """``user_id``'s own servers, as last set (:meth:`set_personal`)."""
        return list(self._personal.get(user_id, {}).values())

    def user_connection(self, name: str, user_id: int) -> ServerConnection | None:
        """``user_id``'s session with the "perUser" server ``name`` (their own server of that name
        when the shared one is hidden from them), if one was opened."""
        return self._user_connections.get(self._user_key(name, user_id))

    def _user_key(self, name: str, user_id: int) -> tuple[str, int]:
        """Where ``user_id``'s session with what ``name`` means to them is kept."""
        config = self.config(name, user_id)
        return (session_name(config) if config is not None else name, user_id)

    def per_user_servers(self) -> list[ServerConfig]:
        """The enabled "perUser" servers, in config order."""
        return [c for name in self._order if (c := self._configs.get(name)) and c.enabled and per_user(c)]

    # -- resources, completions and prompts as a person sees them -------------------------
    # One interface with the hub worker's stand-in (mcpclient.worker.client.RemoteHub), which
    # forwards these to the worker: callers never reach a session's client themselves.
    async def load_catalogs(self, user_id: int | None, *, wait: float = 0.0) -> None:
        """Wait up to ``wait`` seconds (all at once) for the first prompt and resource listings of
        the ready sessions ``user_id`` uses: a server is ready once its tools are listed, and its
        prompts and resources may still be on their way (the catalogs here are live; the worker's
        stand-in fetches them)."""
        if wait <= 0:
            return
        listings = []
        for _, session in ready_servers(self, user_id):
            listings.append(session.resources.wait_listed(wait))
            if session.prompts is not None:
                listings.append(session.prompts.wait_listed(wait))
        await asyncio.gather(*listings)

    async def read_resource(
        self, server: str, uri: str, user_id: int | None, *, view: bool = False
    ) -> ReadResult:
        """``resources/read`` of ``uri`` through the session ``user_id`` may use (capped).

        ``view``: an MCP Apps view, kept by the session until its resources are listed again.
        """
        return await resources.read(self, server, uri, user_id, view=view)

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
    ) -> tuple[HubPrompt, list[PromptMessage]]:
        """``prompts/get`` on ``user_id``'s session with ``server``: the prompt and its messages."""
        return await prompts.get(self, server, name, arguments, user_id)

    def skills(self, user_id: int | None) -> list[Skill]:
        """The skills ``user_id`` may use now (ready shared sessions and their own), in server order."""
        return skills.skills_for(self, user_id)

    async def load_skills(self, user_id: int | None, *, wait: float = 0.0) -> None:
        """Wait up to ``wait`` seconds for the first skill listings of ``user_id``'s sessions (the
        catalogs here are live; the worker's stand-in fetches them)."""
        await skills.wait_listed(self, user_id, wait)

    async def read_skill(self, server: str, skill: str, path: str, user_id: int | None) -> SkillText:
        """One verified file of a skill (``path`` "" for its SKILL.md) through ``user_id``'s session."""
        return await skills.read(self, server, skill, path, user_id)

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
            input_value=self.input_value,
            consent_timeout=self.consent_timeout,
            client_version=self.client_version,
            apps=self.apps,
            pins=self.pins,
            person_name=self.person_name,
            person_id_token=self.person_id_token,
        )
        # Its messages stay in memory; the level set for a shared server is not a person's own server's.
        connection.logs.level = self.log_levels.get(config.name, "") if config.owner_id is None else ""
        self._user_connections[(session_name(config), user_id)] = connection
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
        owner = connection.owner_id
        if owner is None:
            return
        if self._user_connections.get((session_name(connection.config), owner)) is connection:
            self.generation += 1

    async def _close_idle_sessions(self) -> None:
        """Close per-person sessions unused for ``BOOCODE_OAUTH_IDLE_SECONDS`` (runs while any exist)."""
        idle = self.idle_seconds
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
        shared = self._connections.get(name)
        if shared is None:
            if personal:
                return f"applied to {len(personal)} personal session(s)"
            return "no live session: the level is applied when the server next connects"
        shared.logs.level = level
        return await shared.logs.apply()

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
        self._names, self._catalog = tool_catalog(self._order, self._connections)
        self.generation += 1

    # -- queries -------------------------------------------------------------------------
    def tools(self, user_id: int | None = None, *, views: bool = False) -> list[HubTool]:
        """Accepted tools of ready servers, sorted by prefixed name; ``user_id``'s own sessions too.

        The model's tools, or with ``views`` those its servers' views may call (MCP Apps).
        """
        catalog = self._view(user_id)
        return list(catalog.view_tools if views else catalog.tools)

    def every_tool(self, user_id: int | None = None) -> list[HubTool]:
        """The model's tools and the views' tools together, each once (what the hub worker sends)."""
        return list(self._view(user_id).every)

    def _view(self, user_id: int | None) -> Catalog:
        """The tools ``user_id`` sees: shared servers and their own sessions, less the servers
        whose ``groups`` they are not in."""
        if user_id is None:
            return self._catalog
        hidden = self._hidden_from(user_id)
        own = any(key[1] == user_id for key in self._user_connections)
        if not own and not hidden:
            return self._catalog
        cached = self._user_views.get(user_id)
        if cached is not None and cached[0] == self.generation and cached[1] == hidden:
            return cached[2]
        if own:
            connections = dict(self._connections)
            mine = [conn for (_, owner), conn in self._user_connections.items() if owner == user_id]
            connections.update({conn.name: conn for conn in mine if conn.config.owner_id is None})
            # Their own servers last: one under the name of a shared server hidden from them takes
            # that name's place (it is theirs; the hidden one they cannot know of).
            theirs = [conn for conn in mine if conn.config.owner_id is not None]
            own_names = {
                conn.name for conn in theirs if not takes_name(self, self._configs.get(conn.name), user_id)
            }
            connections.update({conn.name: conn for conn in theirs if conn.name in own_names})
            _, catalog = tool_catalog(self._order, connections)
        else:
            catalog, own_names = self._catalog, set()
        if hidden - own_names:
            catalog = Catalog.of([tool for tool in catalog.every if tool.server not in hidden - own_names])
        self._user_views = {uid: view for uid, view in self._user_views.items() if view[0] == self.generation}
        self._user_views[user_id] = (self.generation, hidden, catalog)
        return catalog

    def _hidden_from(self, user_id: int) -> frozenset[str]:
        """The servers with ``groups`` that ``user_id`` is in none of (mcpclient.core.access)."""
        return hidden_from(self, self._configs.values(), user_id)

    def groups_of(self, user_id: int) -> Collection[str] | None:
        """The groups ``user_id`` is in, as the process last read them (``None``: not known)."""
        return self.person_groups(user_id) if self.person_groups is not None else None

    def session_for(self, server: str, user_id: int | None) -> ServerConnection | None:
        """The session that serves ``user_id`` for ``server`` (see :mod:`mcpclient.engine.serving`)."""
        return session_for(self, server, user_id)

    def connection(self, name: str) -> ServerConnection | None:
        """The live connection of a server, if it has one."""
        return self._connections.get(name)

    def config(self, name: str, user_id: int | None = None) -> ServerConfig | None:
        """The configuration of server ``name``: mcp.json's, else ``user_id``'s own server's (also in
        place of a shared server hidden from them: :func:`~mcpclient.engine.serving.pick`)."""
        found = self._configs.get(name)
        if user_id is not None:
            found = pick(self, found, self._personal.get(user_id, {}).get(name), user_id)
        return found

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
        self,
        prefixed_name: str,
        arguments: dict[str, Any] | None = None,
        *,
        user_id: int | None = None,
        views: bool = False,
    ) -> ToolResult:
        """Call a tool by its prefixed name (as ``user_id`` sees them); trouble is an error result.

        ``views``: a call from a view (MCP Apps), among the tools views may call.
        """
        catalog = self._view(user_id)
        target = (catalog.view_index if views else catalog.index).get(prefixed_name)
        if target is None:
            return self._unknown_tool(prefixed_name, user_id)
        server, tool = target
        # The one answer to which session serves them (their own server, when the name is a
        # hidden shared server's too, never the shared session).
        connection = session_for(self, server, user_id)
        if connection is None:
            return ToolResult.error(f'MCP server "{server}" unreachable: it is not connected')
        return await connection.call_tool(tool, arguments or {})

    def _unknown_tool(self, prefixed_name: str, user_id: int | None) -> ToolResult:
        # The tool may belong to a server that is down, or be held for an administrator's review:
        # say so rather than "unknown" (of the servers the person may use: the others' names and
        # states are none of their business).
        for name, connection in self._connections.items():
            if not allowed(self, connection.config, user_id):
                continue
            for tool in connection.tools:
                if self._names.get((name, tool.name), ("",))[0] != prefixed_name:
                    continue
                if connection.status is not Status.READY:
                    return connection.unreachable(connection.reason or connection.status.value)
                if pinning.held_count([tool]):
                    return pinning.held_call(prefixed_name)
        return unknown_tool(prefixed_name)


if TYPE_CHECKING:

    def _offers_the_hub_api(hub: Hub) -> HubApi:
        return hub  # the type checker holds Hub to the Protocol the worker's RemoteHub also meets
