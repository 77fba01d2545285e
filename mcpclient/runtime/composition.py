"""The composition root of mcpclient: the process-wide hub, and the glue between it and Django.

Owns: the process-wide hub (:func:`ensure_hub`, :func:`get_hub`, :func:`new_hub` wires it from the
settings: healing, stored log levels, listeners that persist and broadcast its state), what the
chat asks of it (:func:`hub_tools`, :func:`hub_call`, :func:`held_for_review`,
:func:`hub_statuses`), the hooks the application registers (:func:`on_tools_changed`,
:func:`on_hub_started`, :func:`id_tokens_from`), and the servers' states for ``/metrics``
(registered on import).

Invariants. The hub starts lazily on the running loop behind one lock (Daphne has no lifespan: the
first request or websocket starts it). Every :func:`ensure_hub` stats mcp.json; ``McpState.version``
is read at most once per ``max_age`` (:data:`TURN_CHECK_INTERVAL` for a turn), and a change made
elsewhere is applied to the running hub. With ``BOOCODE_HUB=worker`` a web process gets a
:class:`~mcpclient.worker.client.RemoteHub`, the same :class:`~mcpclient.engine.api.HubApi`.
Under Daphne the hub stops before the reactor does, so no stdio child outlives the server. Once
a hub held here has started its servers, the hooks given to :func:`on_hub_started` run in tasks of
their own (the chat weighs its agents' windows against their tools then).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import Future
from functools import partial
from typing import Any

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings

from mcpclient.config.model import ConfigError
from mcpclient.config.writeback import WritebackError, remove_stale_temp_files
from mcpclient.core import pinning
from mcpclient.core.pinning import PinBook
from mcpclient.core.results import ToolResult
from mcpclient.core.state import HubTool, ServerSnapshot, Status
from mcpclient.engine.api import HubApi
from mcpclient.engine.healing import HealPolicy, retry_fields
from mcpclient.engine.hub import Hub
from mcpclient.engine.serving import allowed
from mcpclient.runtime import people
from mcpclient.runtime.log_store import LogTailWriter, read_log_levels
from mcpclient.runtime.pins import DatabasePins
from mcpclient.runtime.shutdown import on_server_shutdown
from mcpclient.runtime.sync import (
    config_mtime_ns,
    current_state,
    persist_snapshot,
    server_configs,
    sync_servers,
)
from mcpclient.secrets.inputs import input_value
from mcpclient.telemetry import metrics
from mcpclient.worker.client import RemoteHub
from mcpclient.worker.client import WorkerUnavailable as WorkerUnavailable  # for the chat: the worker is away

logger = logging.getLogger(__name__)

_hub: Hub | RemoteHub | None = None  # RemoteHub in a web process of the hub-worker setup
_hub_loop: asyncio.AbstractEventLoop | None = None
_seen_version: int = -1
_checked_at: float = float("-inf")  # time.monotonic() of the last read of McpState
_seen_mtime_ns: int | None = None  # mcp.json's mtime as synced into McpState at that read
_lock: asyncio.Lock | None = None
_lock_loop: asyncio.AbstractEventLoop | None = None
_persist_lock: asyncio.Lock | None = None
_persist_lock_loop: asyncio.AbstractEventLoop | None = None
_serving = False  # True in the hub worker: the hub is local and its state goes to web processes
# In the hub worker: how each new state reaches the web processes (mcpclient.worker.server).
_state_sender: Callable[[Hub], Awaitable[None]] | None = None


def serve_for_web_processes(send_state: Callable[[Hub], Awaitable[None]]) -> None:
    """Run the hub here for every web process; ``send_state(hub)`` tells them of each change.

    The hub worker calls this before starting its hub, with its own broadcast.
    """
    global _serving, _state_sender
    _serving, _state_sender = True, send_state


def remote() -> bool:
    """Whether this process reaches a hub worker instead of holding a hub (BOOCODE_HUB=worker)."""
    return settings.MCP_HUB == "worker" and not _serving


def _held_servers() -> list[ServerSnapshot]:
    """The servers' states for ``/metrics`` where this process holds the hub (else the worker's say)."""
    hub = _hub
    if hub is None or isinstance(hub, RemoteHub):
        return []
    return hub.snapshots()


metrics.watch_servers(_held_servers)


def seen_version() -> int:
    """The McpState version the running hub last applied."""
    return _seen_version


def get_hub() -> HubApi | None:
    """The process-wide hub, if one is running on the current loop."""
    return _hub


def set_hub(hub: Hub | None, *, version: int = -1) -> None:
    """Install ``hub`` as the process-wide hub (tests and ``mcp_*`` commands)."""
    global _hub, _hub_loop, _seen_version, _checked_at, _seen_mtime_ns
    _hub = hub
    _seen_version = version
    _checked_at, _seen_mtime_ns = float("-inf"), None
    try:
        _hub_loop = asyncio.get_running_loop() if hub is not None else None
    except RuntimeError:
        _hub_loop = None


def _loop_lock() -> asyncio.Lock:
    global _lock, _lock_loop
    loop = asyncio.get_running_loop()
    if _lock is None or _lock_loop is not loop:
        _lock, _lock_loop = asyncio.Lock(), loop
    return _lock


def heal_policy() -> HealPolicy:
    """How the process-wide hub heals, from the settings (``MCP_PING_*``, ``MCP_RECONNECT_*``)."""
    return HealPolicy(
        ping_interval=float(settings.MCP_PING_INTERVAL),
        ping_timeout=float(settings.MCP_PING_TIMEOUT),
        base=float(settings.MCP_RECONNECT_BASE),
        cap=float(settings.MCP_RECONNECT_CAP),
        attempts=int(settings.MCP_RECONNECT_ATTEMPTS),
        circuit_seconds=float(settings.MCP_RECONNECT_CIRCUIT_SECONDS),
        concurrency=int(settings.MCP_RECONNECT_CONCURRENCY),
    )


# Called (in the hub's loop, without waiting) whenever a server's state or tools change in this
# process's hub: the chat's tool search indexes new tools then (boocode.tools.deferred).
_tools_changed: list[Callable[[], None]] = []


def on_tools_changed(callback: Callable[[], None]) -> None:
    """Call ``callback`` after every change of a server's state or tools (it must not block)."""
    _tools_changed.append(callback)


def _tools_changed_listener(snapshot: ServerSnapshot) -> None:
    for callback in list(_tools_changed):
        try:
            callback()
        except Exception:  # a hook's bug must not break the hub
            logger.exception("a tools-changed hook failed")


# Called once this process's own hub has started its servers (Daphne's, or the hub worker's):
# the chat weighs its agents' models' windows against their tools then (boocode.chat.turn.window_check).
_hub_started: list[Callable[[], Awaitable[object]]] = []
_start_hooks: set[asyncio.Future[object]] = set()  # running, kept until they end


def on_hub_started(callback: Callable[[], Awaitable[object]]) -> None:
    """Run ``callback()`` in a task of its own each time this process starts its hub, once its
    servers have started (ready or failed); nothing waits for it, and its errors are logged."""
    _hub_started.append(callback)


def _run_start_hooks() -> None:
    for callback in list(_hub_started):
        task = asyncio.ensure_future(callback())
        _start_hooks.add(task)
        task.add_done_callback(_start_hook_done)


def _start_hook_done(task: asyncio.Future[object]) -> None:
    _start_hooks.discard(task)
    if not task.cancelled() and task.exception() is not None:
        logger.error("a hub start-up hook failed", exc_info=task.exception())


_id_tokens: Callable[[int], str | None] | None = None


def id_tokens_from(source: Callable[[int], str | None] | None) -> None:
    """Where a person's ID token from their sign-in to BooCode is read (the application registers
    it at start: boocode.security); "perUser" identity_assertion servers exchange it (SEP-990)."""
    global _id_tokens
    _id_tokens = source


def username_of(user_id: int) -> str:
    """A person's username ("" for nobody), for ``${user.name}`` (runs in the database thread)."""
    from django.contrib.auth import get_user_model

    found = get_user_model().objects.filter(pk=user_id).values_list("username", flat=True).first()
    return str(found or "")


def new_hub(*, persist: bool = True, pins: PinBook | None = None) -> Hub:
    """A hub configured from settings; with ``persist`` its state is written to the database.

    ``pins``: where listings are reviewed against the pinned definitions (by default a persisting
    hub's go to the database, :class:`~mcpclient.runtime.pins.DatabasePins`; ``manage.py
    mcp_discover`` passes a :class:`~mcpclient.runtime.pins.ListingRecorder`, so that what it
    shows is what gets pinned).
    """
    hub = Hub(
        base_dir=settings.MCP_CONFIG.parent,
        allowed_commands=list(settings.MCP_STDIO_COMMANDS),
        input_value=input_value,
        client_version=settings.VERSION,
        consent_timeout=float(settings.OAUTH_CONSENT_TIMEOUT),
        idle_seconds=float(settings.OAUTH_IDLE_SECONDS),
        apps=bool(settings.MCP_APPS),
        pins=pins if pins is not None else DatabasePins() if persist else None,
        person_name=username_of,
        person_id_token=lambda user_id: _id_tokens(user_id) if _id_tokens is not None else None,
        person_groups=people.groups_of,
        per_user_processes=int(settings.STDIO_PER_USER_MAX),
    )
    if persist:
        hub.healing = heal_policy()  # a long-lived hub heals (pings, reconnects)
        hub.add_listener(persist_listener)
        hub.add_listener(partial(worker_broadcast_listener, hub) if _serving else broadcast_listener)
        if not _serving:  # (the hub worker serves web processes; they search, not it)
            hub.add_listener(_tools_changed_listener)
        hub.add_log_listener(LogTailWriter().note)  # servers' log messages, coalesced writes
    return hub


STATUS_GROUP = "mcp_status"


async def broadcast_listener(snapshot: ServerSnapshot) -> None:
    """Tell the ``mcp_status`` group (open chat pages' status line) that a server changed."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        # Only a signal: each page builds the status its user may see (staff or not).
        await layer.group_send(STATUS_GROUP, {"type": "mcp.status"})
    except Exception:  # a broken channel layer must not break the hub
        logger.exception("could not broadcast the MCP status")


async def worker_broadcast_listener(hub: Hub, snapshot: ServerSnapshot) -> None:
    """In the hub worker: the new state to every web process first, then the pages' signal."""
    try:
        if _state_sender is not None:
            await _state_sender(hub)
    except Exception:  # a broken channel layer must not break the hub
        logger.exception("could not send the MCP state to the web processes")
    await broadcast_listener(snapshot)


async def persist_listener(snapshot: ServerSnapshot) -> None:
    """Write a snapshot to the database, in the order snapshots were produced."""
    global _persist_lock, _persist_lock_loop

    loop = asyncio.get_running_loop()
    if _persist_lock is None or _persist_lock_loop is not loop:
        # One lock per loop: an asyncio.Lock that was ever waited on is bound to its loop.
        _persist_lock, _persist_lock_loop = asyncio.Lock(), loop
    async with _persist_lock:
        try:
            # Off the database thread the turns share: a server of 1,000 tools never delays a turn.
            await database_sync_to_async(persist_snapshot, thread_sensitive=False)(snapshot)
        except Exception:  # a listener must never break the hub; the state is in memory anyway
            logger.exception('could not save the state of MCP server "%s"', snapshot.name)


def _read_changes() -> tuple[int, int, list[Any] | None]:
    """Sync mcp.json if it changed on disk; return (version, synced mtime, configs if version moved)."""
    state = current_state()
    if config_mtime_ns() != state.config_mtime_ns:
        try:
            report = sync_servers()
            if report.changed:
                logger.info("mcp.json changed on disk: %s", report.summary())
        except ConfigError as exc:
            logger.error("mcp.json changed on disk but cannot be used: %s", exc)
        state = current_state()
    if state.version == _seen_version:
        return state.version, state.config_mtime_ns, None
    return state.version, state.config_mtime_ns, server_configs()


async def _check_changes() -> tuple[int, list[Any] | None]:
    """Read McpState (syncing mcp.json first if it changed); remember when, for ``max_age``."""
    global _checked_at, _seen_mtime_ns
    started = time.monotonic()
    version, mtime_ns, configs = await database_sync_to_async(_read_changes)()
    _checked_at, _seen_mtime_ns = started, mtime_ns
    return version, configs


def _recently_checked(max_age: float) -> bool:
    """Whether McpState was read less than ``max_age`` seconds ago and mcp.json is unchanged since."""
    return time.monotonic() - _checked_at < max_age and config_mtime_ns() == _seen_mtime_ns


TURN_CHECK_INTERVAL = 1.0  # seconds a chat turn reuses the last read of McpState.version


async def ensure_hub(*, max_age: float = 0.0) -> HubApi:
    """The running hub, started on first use; applies changes made in other processes.

    mcp.json is stat'ed on every call (an edited file is synced and applied at once).
    ``McpState.version`` is read on every call too, unless it was read less than ``max_age``
    seconds ago: the chat turn passes :data:`TURN_CHECK_INTERVAL` so that a turn costs no
    query; callers that just changed something in another process leave it at 0.
    """
    global _hub, _hub_loop, _seen_version
    if remote():
        return await _ensure_remote(max_age=max_age)
    loop = asyncio.get_running_loop()
    if isinstance(_hub, Hub) and _hub_loop is loop:
        if not settings.MCP_AUTOSTART:
            return _hub
        # While a change is being applied (lock held), wait for it like any other caller.
        if max_age > 0 and not _loop_lock().locked() and _recently_checked(max_age):
            return _hub
    async with _loop_lock():
        if not isinstance(_hub, Hub) or _hub_loop is not loop:
            if not settings.MCP_AUTOSTART:
                _hub, _hub_loop = Hub(base_dir=settings.MCP_CONFIG.parent), loop
                return _hub
            await asyncio.to_thread(_remove_stale_temp_files)
            version, configs = await _check_changes()
            hub = new_hub()
            hub.log_levels = await database_sync_to_async(read_log_levels)()
            _hub, _hub_loop, _seen_version = hub, loop, version
            _install_shutdown_trigger(hub)
            await hub.start(configs or [])
            _run_start_hooks()
            return hub
        if max_age > 0 and _recently_checked(max_age):
            return _hub  # checked by the caller that held the lock before us
        version, configs = await _check_changes()
        if configs is not None:
            _seen_version = version
            logger.info("MCP servers changed elsewhere (version %d): applying", version)
            await _hub.apply(configs)
            await asyncio.gather(*(_hub.rediscover(config.name) for config in configs if config.enabled))
        return _hub


async def _ensure_remote(*, max_age: float) -> RemoteHub:
    """The web side of the hub worker: started once; with ``max_age`` 0 the worker applies changes now."""
    global _hub, _hub_loop

    loop = asyncio.get_running_loop()
    async with _loop_lock():
        if not isinstance(_hub, RemoteHub) or _hub_loop is not loop:
            remote_hub = RemoteHub(server_configs, people.groups_of)
            await remote_hub.start()
            _hub, _hub_loop = remote_hub, loop
            _install_shutdown_trigger(remote_hub)
            return remote_hub
        hub = _hub
    if max_age <= 0:
        await hub.refresh()
    return hub


def _remove_stale_temp_files() -> None:
    """What an interrupted admin write left next to mcp.json (it may hold secrets)."""
    try:
        remove_stale_temp_files(settings.MCP_CONFIG)
    except WritebackError as exc:
        logger.warning("%s", exc)


_starter: asyncio.Task[HubApi] | None = None


def start_hub_soon() -> None:
    """Start the hub in the background (first request or websocket); errors are logged."""
    global _starter
    if not settings.MCP_AUTOSTART or (_starter is not None and not _starter.done()):
        return
    if _hub is not None and _hub_loop is asyncio.get_running_loop():
        return

    def done(task: asyncio.Task[HubApi]) -> None:
        if not task.cancelled() and task.exception() is not None:
            logger.error("the MCP hub could not start", exc_info=task.exception())

    _starter = asyncio.ensure_future(ensure_hub())
    _starter.add_done_callback(done)


def _install_shutdown_trigger(hub: HubApi) -> None:
    """Stop the hub before Daphne's reactor shuts down (no orphan stdio children)."""

    async def stop_hub() -> None:
        logger.info("stopping MCP servers")
        await hub.stop()

    on_server_shutdown(stop_hub)


def run_on_hub_loop(
    coroutine_factory: Callable[[HubApi], Coroutine[Any, Any, Any]], *, timeout: float = 60.0
) -> bool:
    """From a sync thread (admin views, commands): run ``coroutine_factory(hub)`` on the hub's loop.

    Returns False when no hub runs in this process (another process will notice the version
    stamp instead). Waits up to ``timeout`` seconds so the change has taken effect when the
    admin page reloads.
    """
    hub, loop = _hub, _hub_loop
    if hub is None or loop is None or loop.is_closed() or not loop.is_running():
        return False
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        raise RuntimeError("run_on_hub_loop() called from the hub's own loop; await the hub instead")
    # Schedule from an empty context: under Django's ASGI handler the calling thread carries
    # the request's ThreadSensitiveContext, and hub tasks started here (server owners, their
    # persist listeners) outlive the request; inheriting it would make their later
    # database_sync_to_async calls fail once the request has finished.
    schedule = asyncio.run_coroutine_threadsafe
    future: Future[Any] = contextvars.Context().run(schedule, coroutine_factory(hub), loop)
    try:
        future.result(timeout)
    except TimeoutError:
        logger.warning("the MCP hub did not apply a change within %s s; it goes on anyway", timeout)
    return True


def hub_tools(user_id: int | None = None, *, views: bool = False) -> list[HubTool]:
    """Accepted tools of ready servers (and of ``user_id``'s own sessions), sorted (in memory, cheap).

    The model's tools, or with ``views`` those its servers' views may call (MCP Apps).
    """
    return _hub.tools(user_id, views=views) if _hub is not None else []


async def hub_call(
    prefixed_name: str, arguments: dict[str, Any], *, user_id: int | None = None, views: bool = False
) -> ToolResult:
    """Call an MCP tool by its prefixed name (as ``user_id`` sees them); trouble is an error result.

    The person's groups are read again when the last read is older than ``people.MAX_AGE``: a call
    long after its turn began (an approval that waited) follows who may use the server now.
    """
    if user_id is not None:
        await people.refresh(user_id)
    hub = _hub if _hub is not None and _hub_loop is asyncio.get_running_loop() else await ensure_hub()
    return await hub.call_tool(prefixed_name, arguments, user_id=user_id, views=views)


def held_for_review(prefixed_name: str, user_id: int | None) -> ToolResult | None:
    """What a call of ``prefixed_name`` answers when it is a tool held for an administrator's
    review on a ready server ``user_id`` may use (None otherwise: it is unknown to them).

    The tool registry asks before it answers "Unknown tool" (held tools are offered to nobody).
    With no person known, a server with ``groups`` is left out: its tools are nobody's business.
    """
    hub = _hub
    if hub is None:
        return None
    for snapshot in hub.snapshots():
        config = hub.config(snapshot.name)
        if snapshot.status is not Status.READY or config is None:
            continue
        if (config.groups and user_id is None) or not allowed(hub, config, user_id):
            continue
        for tool in snapshot.tools:
            if snapshot.prefixed_names.get(tool.name) == prefixed_name and pinning.held_count([tool]):
                return pinning.held_call(prefixed_name)
    return None


def hub_statuses(*, staff: bool = False, user_id: int | None = None) -> list[dict[str, Any]]:
    """Name, status, tool count (and how many are held for review) of every configured server
    ``user_id`` may use (its groups),
    then of their own servers (``"own": true``; ``"idle"`` until their session opens); for
    ``staff``, the last error too.

    The last error may end with a server's stderr, which can hold secrets: only staff see it.
    """
    if _hub is None:
        return []
    statuses = []
    for snapshot in _hub.snapshots():
        config = _hub.config(snapshot.name)
        if config is not None and not allowed(_hub, config, user_id):
            continue
        status: dict[str, Any] = {
            "name": snapshot.name,
            "status": snapshot.status.value,
            "tool_count": sum(tool.offered for tool in snapshot.tools),
            "held_count": pinning.held_count(snapshot.tools),
            **retry_fields(snapshot.attempts, snapshot.next_retry_at, snapshot.circuit_open),
        }
        if staff:
            status["last_error"] = snapshot.last_error
        statuses.append(status)
    if user_id is not None:
        statuses += _own_statuses(_hub, user_id, staff=staff)
    return statuses


def _own_statuses(hub: Hub | RemoteHub, user_id: int, *, staff: bool) -> list[dict[str, Any]]:
    """The status line's entries of ``user_id``'s own servers (``"idle"`` until a session opens)."""
    statuses = []
    for config in hub.personal_servers(user_id):
        connection = hub.user_connection(config.name, user_id)
        opened = connection is not None and connection.status is not Status.DISABLED
        own: dict[str, Any] = {
            "name": config.name,
            "status": connection.status.value if connection is not None and opened else "idle",
            "tool_count": sum(tool.offered for tool in connection.tools) if connection is not None else 0,
            "own": True,
        }
        if staff:
            own["last_error"] = connection.reason if connection is not None else ""
        statuses.append(own)
    return statuses
