"""Which session serves a person: the one answer, for the in-process hub and the worker's mirror.

:func:`session_for` is it, for every caller (``Hub.call_tool`` among them); :func:`refused` is its
refusal alone, for a hub whose sessions live elsewhere (the worker's mirror: ``RemoteHub.call_tool``).
A "perUser" server is served by that person's own session only (none without a person); every
other enabled server by its shared session; a server with ``groups`` by none for a person outside
them (:mod:`mcpclient.core.access`). A person's own server may have the name of a shared server
hidden from them: for them the name means their own server (:func:`pick`), whose session the hub
keeps apart from the shared server's (:func:`~mcpclient.config.model.session_name`).
:class:`Session` and :class:`Sessions` are what the prompt, resource and skill code (and the
admin's log part) needs of a session and of a hub, so that code works the same on
:class:`~mcpclient.engine.hub.Hub` and on :class:`~mcpclient.worker.client.RemoteHub`.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, Protocol

from mcp import MCPError

from mcpclient.config.model import ServerConfig, per_user
from mcpclient.core.access import may_use
from mcpclient.core.state import ServerSnapshot, Status


class LogNote(Protocol):
    """A session's log part as the admin reads it (:class:`mcpclient.engine.server_logs.ServerLogs`)."""

    note: str  # what became of the log level asked of the server


class Session(Protocol):
    """One live session as prompts, resources and the admin see it."""

    name: str
    config: ServerConfig
    status: Status
    reason: str
    client: Any  # the SDK's Client while ready (in the worker's mirror: a marker), else None
    last_used: float
    resources: Any  # mcpclient.engine.resources.ResourceCatalog
    prompts: Any  # mcpclient.engine.prompts.PromptCatalog, None before its first watch
    skills: Any  # mcpclient.engine.skills.SkillCatalog

    @property
    def tools(self) -> Sequence[Any]: ...  # its discovered tools (mcpclient.core.state.DiscoveredTool)

    @property
    def logs(self) -> LogNote: ...

    def mark_unavailable_if_closed(self, exc: MCPError) -> bool: ...


class Sessions[S: Session](Protocol):
    """What a hub offers for finding its sessions (of type ``S``)."""

    def config(self, name: str, user_id: int | None = None) -> ServerConfig | None: ...

    def personal_servers(self, user_id: int) -> list[ServerConfig]: ...

    def connection(self, name: str) -> S | None: ...

    def user_connection(self, name: str, user_id: int) -> S | None: ...

    def snapshots(self) -> Sequence[ServerSnapshot]: ...

    def groups_of(self, user_id: int) -> Collection[str] | None: ...


def pick(
    hub: Sessions[Any], shared: ServerConfig | None, own: ServerConfig | None, user_id: int | None
) -> ServerConfig | None:
    """Which of a shared server and a person's own server of the same name ``user_id`` means by it:
    the shared one when they may use it, else their own (a shared server hidden from them by its
    ``groups`` is one they cannot know exists, so the name is free for them), else the shared one
    (which :func:`config_for` then refuses them)."""
    if own is not None and (shared is None or not allowed(hub, shared, user_id)):
        return own
    return shared


def takes_name(hub: Sessions[Any], shared: ServerConfig | None, user_id: int) -> bool:
    """Whether the shared server ``shared`` keeps its name from ``user_id``'s own servers: it does
    when they may use it (a hidden one does not: see :func:`pick`)."""
    return shared is not None and allowed(hub, shared, user_id)


def config_for(hub: Sessions[Any], server: str, user_id: int | None) -> ServerConfig | None:
    """The configuration of ``server`` when it is enabled and ``user_id`` may use it, else None
    (to a person outside its groups, a server is one that does not exist)."""
    config = hub.config(server, user_id)
    if config is None or not config.enabled or not allowed(hub, config, user_id):
        return None
    return config


def refused(hub: Sessions[Any], server: str, user_id: int | None) -> bool:
    """Whether the name ``server`` means, for ``user_id``, a server whose ``groups`` they are in none
    of: no session serves them there (:func:`session_for` says None), and its tools are unknown to
    them. Their own server under that name is theirs (:func:`pick`), never refused."""
    config = hub.config(server, user_id)
    return config is not None and not allowed(hub, config, user_id)


def session_for[S: Session](hub: Sessions[S], server: str, user_id: int | None) -> S | None:
    """The session ``user_id`` uses for ``server``: the shared one, or their own ("perUser")."""
    config = config_for(hub, server, user_id)
    if config is None:
        return None
    if per_user(config):
        return hub.user_connection(server, user_id) if user_id is not None else None
    return hub.connection(server)


def ready_servers[S: Session](hub: Sessions[S], user_id: int | None) -> list[tuple[str, S]]:
    """The ready sessions ``user_id`` uses now, in configuration order (their own servers last)."""
    found = []
    for name in server_names(hub, user_id):
        session = session_for(hub, name, user_id)
        if session is not None and session.status is Status.READY:
            found.append((name, session))
    return found


def server_names[S: Session](hub: Sessions[S], user_id: int | None) -> list[str]:
    """Every server's name in configuration order, then ``user_id``'s own servers' names."""
    names = [snapshot.name for snapshot in hub.snapshots()]
    if user_id is not None:  # (an own server under a hidden server's name: served at that name)
        names += [config.name for config in hub.personal_servers(user_id) if config.name not in names]
    return names


def hidden_from(hub: Sessions[Any], configs: Collection[ServerConfig], user_id: int) -> frozenset[str]:
    """The servers of ``configs`` with ``groups`` that ``user_id`` is in none of."""
    return frozenset(config.name for config in configs if config.groups and not allowed(hub, config, user_id))


def allowed(hub: Sessions[Any], config: ServerConfig, user_id: int | None) -> bool:
    """Whether ``user_id`` may use the server of ``config`` (its ``groups``; fails closed)."""
    if not config.groups or user_id is None:
        return True
    return may_use(config.groups, user_id, hub.groups_of(user_id))
