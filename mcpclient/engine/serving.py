"""Which session serves a person: the one answer, for the in-process hub and the worker's mirror.

A "perUser" server is served by that person's own session only (none without a person); every
other enabled server by its shared session. :class:`Session` and :class:`Sessions` are what the
prompt, resource and skill code needs of a session and of a hub, so that code works the same on
:class:`~mcpclient.engine.hub.Hub` and on :class:`~mcpclient.worker.client.RemoteHub`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from mcp import MCPError

from mcpclient.config.model import ServerConfig, per_user
from mcpclient.core.state import ServerSnapshot, Status


class Session(Protocol):
    """One live session as prompts and resources see it."""

    name: str
    config: ServerConfig
    status: Status
    reason: str
    client: Any  # the SDK's Client while ready (in the worker's mirror: a marker), else None
    last_used: float
    resources: Any  # mcpclient.engine.resources.ResourceCatalog
    prompts: Any  # mcpclient.engine.prompts.PromptCatalog, None before its first watch
    skills: Any  # mcpclient.engine.skills.SkillCatalog

    def mark_unavailable_if_closed(self, exc: MCPError) -> bool: ...


class Sessions[S: Session](Protocol):
    """What a hub offers for finding its sessions (of type ``S``)."""

    def config(self, name: str) -> ServerConfig | None: ...

    def connection(self, name: str) -> S | None: ...

    def user_connection(self, name: str, user_id: int) -> S | None: ...

    def snapshots(self) -> Sequence[ServerSnapshot]: ...


def session_for[S: Session](hub: Sessions[S], server: str, user_id: int | None) -> S | None:
    """The session ``user_id`` uses for ``server``: the shared one, or their own ("perUser")."""
    config = hub.config(server)
    if config is None or not config.enabled:
        return None
    if per_user(config):
        return hub.user_connection(server, user_id) if user_id is not None else None
    return hub.connection(server)


def ready_servers[S: Session](hub: Sessions[S], user_id: int | None) -> list[tuple[str, S]]:
    """The ready sessions ``user_id`` uses now, in configuration order."""
    found = []
    for snapshot in hub.snapshots():
        session = session_for(hub, snapshot.name, user_id)
        if session is not None and session.status is Status.READY:
            found.append((snapshot.name, session))
    return found
