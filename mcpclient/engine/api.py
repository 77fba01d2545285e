"""What a hub offers the rest of BooCode: one ``Protocol`` for the in-process hub and the worker's.

This module is the engine's one door for the chat (an import contract holds the chat to it and
to :mod:`mcpclient.core`): :class:`HubApi`, the reads every hub answers from its sessions
(:class:`SessionReads`) and the few context managers a caller wraps a call in (:func:`asking`,
:func:`reporting`, :func:`timed_by`). The values they hand out live in :mod:`mcpclient.core`.

:class:`~mcpclient.engine.hub.Hub` (sessions in this process) and
:class:`~mcpclient.worker.client.RemoteHub` (sessions in the hub worker) both satisfy
:class:`HubApi`; the type checker holds each to it (``make test`` runs mypy over the engine and
the worker), so the chat, the tool registry and the admin can take either.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

import mcp.types as types

from mcpclient.config.model import ServerConfig
from mcpclient.core.prompts import HubPrompt, PromptMessage
from mcpclient.core.resources import Completions, ReadResult
from mcpclient.core.results import ToolResult
from mcpclient.core.skills import Skill, SkillText
from mcpclient.core.state import HubTool
from mcpclient.engine import prompts, resources, serving
from mcpclient.engine.egress import refused_origins
from mcpclient.engine.elicitation import TimeBudget, asking, timed_by
from mcpclient.engine.progress import reporting
from mcpclient.engine.resources import ResourceCatalog
from mcpclient.engine.serving import Session, Sessions

__all__ = [
    "HubApi",
    "ResourceCatalog",
    "SessionReads",
    "TimeBudget",
    "asking",
    "refused_origins",
    "reporting",
    "timed_by",
]


class SessionReads[S: Session](Sessions[S]):
    """What every hub answers from its sessions alone (the in-process hub's live ones, the worker's
    stand-ins): which servers a person may see and use, their resource and prompt catalogs.

    Which session serves a person is :func:`mcpclient.engine.serving.session_for` in every one.
    """

    def allowed(self, config: ServerConfig, user_id: int | None) -> bool:
        """Whether ``user_id`` may use the server of ``config`` (its ``groups``; fails closed)."""
        return serving.allowed(self, config, user_id)

    def visible_servers(self, user_id: int | None) -> list[str]:
        """The servers whose resources ``user_id`` may see now: ready shared ones and their own."""
        return resources.visible_servers(self, user_id)

    def listed_resources(self, server: str, user_id: int | None) -> ResourceCatalog:
        """``server``'s resources as last listed for ``user_id`` (a ``ResourceError`` if not ready)."""
        catalog: ResourceCatalog = resources.live_connection(self, server, user_id).resources
        return catalog

    async def resource_catalog(
        self, server: str, user_id: int | None, *, wait: float = 5.0
    ) -> ResourceCatalog:
        """``server``'s resources for ``user_id``, after its first listing (up to ``wait`` s)."""
        return await resources.catalog_of(self, server, user_id, wait=wait)

    def prompts(self, user_id: int | None) -> list[HubPrompt]:
        """The prompts of every ready server ``user_id`` may use."""
        return prompts.prompts_for(self, user_id)

    def prompt(self, server: str, name: str, user_id: int | None) -> HubPrompt | None:
        """The prompt ``name`` of ``server`` as ``user_id`` sees it, or ``None``."""
        return prompts.find(self, server, name, user_id)


class HubApi(Sessions[Session], Protocol):
    """The hub as its users see it: tools, calls, sessions, catalogs and the admin's operations.

    Skills: :meth:`skills` is what :meth:`load_skills` last made current for the person (live on
    the in-process hub, fetched from the worker by its stand-in); :meth:`read_skill` reads one
    verified file of a skill (:mod:`mcpclient.engine.skills`). The reads of :class:`SessionReads`
    are part of it (both hubs inherit them).
    """

    def allowed(self, config: ServerConfig, user_id: int | None) -> bool: ...

    def visible_servers(self, user_id: int | None) -> list[str]: ...

    def listed_resources(self, server: str, user_id: int | None) -> ResourceCatalog: ...

    async def resource_catalog(
        self, server: str, user_id: int | None, *, wait: float = 5.0
    ) -> ResourceCatalog: ...

    def prompts(self, user_id: int | None) -> list[HubPrompt]: ...

    def prompt(self, server: str, name: str, user_id: int | None) -> HubPrompt | None: ...

    def tools(self, user_id: int | None = None, *, views: bool = False) -> list[HubTool]: ...

    def every_tool(self, user_id: int | None = None) -> list[HubTool]: ...

    def per_user_servers(self) -> list[ServerConfig]: ...

    def config(self, name: str, user_id: int | None = None) -> ServerConfig | None: ...

    def personal_servers(self, user_id: int) -> list[ServerConfig]: ...

    async def set_personal(self, user_id: int, configs: Iterable[ServerConfig]) -> None: ...

    def session_for(self, server: str, user_id: int | None) -> Session | None: ...

    async def call_tool(
        self,
        prefixed_name: str,
        arguments: dict[str, Any] | None = None,
        *,
        user_id: int | None = None,
        views: bool = False,
    ) -> ToolResult: ...

    async def load_catalogs(self, user_id: int | None, *, wait: float = 0.0) -> None: ...

    async def read_resource(
        self, server: str, uri: str, user_id: int | None, *, view: bool = False
    ) -> ReadResult: ...

    async def complete(
        self,
        server: str,
        ref: types.ResourceTemplateReference | types.PromptReference,
        argument: dict[str, str],
        context: dict[str, str] | None,
        user_id: int | None,
    ) -> Completions: ...

    async def get_prompt(
        self, server: str, name: str, arguments: dict[str, str], user_id: int | None
    ) -> tuple[HubPrompt, list[PromptMessage]]: ...

    def skills(self, user_id: int | None) -> list[Skill]: ...

    async def load_skills(self, user_id: int | None, *, wait: float = 0.0) -> None: ...

    async def read_skill(self, server: str, skill: str, path: str, user_id: int | None) -> SkillText: ...

    async def open_user_sessions(self, user_id: int, names: Iterable[str]) -> list[str]: ...

    async def close_user_session(self, name: str, user_id: int | None) -> None: ...

    async def reconnect(self, name: str) -> None: ...

    async def rediscover(self, name: str) -> None: ...

    async def set_log_level(self, name: str, level: str) -> str: ...

    async def drain_listeners(self) -> None: ...

    async def stop(self) -> None: ...
