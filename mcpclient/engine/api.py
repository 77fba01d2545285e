"""What a hub offers the rest of BooCode: one ``Protocol`` for the in-process hub and the worker's.

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
from mcpclient.core.results import ToolResult
from mcpclient.core.state import HubTool
from mcpclient.engine.prompts import HubPrompt, PromptMessage
from mcpclient.engine.resources import Completions, ReadResult
from mcpclient.engine.serving import Session, Sessions
from mcpclient.engine.skills import Skill, SkillText


class HubApi(Sessions[Session], Protocol):
    """The hub as its users see it: tools, calls, sessions, catalogs and the admin's operations.

    Skills: :meth:`skills` is what :meth:`load_skills` last made current for the person (live on
    the in-process hub, fetched from the worker by its stand-in); :meth:`read_skill` reads one
    verified file of a skill (:mod:`mcpclient.engine.skills`).
    """

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
