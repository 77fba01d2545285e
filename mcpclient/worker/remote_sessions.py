"""What a web process knows of the hub worker's sessions (``BOOCODE_HUB=worker``): its picture of them.

:class:`~mcpclient.worker.client.RemoteHub` keeps one :class:`RemoteConnection` per session the
worker reported (a shared one, or a person's own), with the catalogs of the person's last
``load_catalogs``; a session's ``client`` is only :data:`IN_WORKER`, never a live client.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mcpclient.config.model import ServerConfig
from mcpclient.core.state import Status
from mcpclient.engine.prompts import Catalog as PromptCatalog
from mcpclient.engine.resources import ResourceCatalog
from mcpclient.engine.skills import SkillCatalog


@dataclass
class SessionLogs:
    note: str = ""


class InWorker:
    """A session's client as seen from a web process: it lives in the hub worker.

    Reads, completions and prompts go through :class:`RemoteHub`'s methods of the same names,
    never through this object; it only says that the session is live there.
    """


IN_WORKER = InWorker()


@dataclass(eq=False)  # hashable by identity, as a ServerConnection is (catalogs are keyed by it)
class RemoteConnection:
    """What the web process knows of one server's session in the worker.

    Its resource and prompt catalogs are those of the person's last :meth:`RemoteHub.load_catalogs`
    (empty before one); ``client`` is :data:`IN_WORKER` while the session is ready there.
    """

    name: str
    config: ServerConfig
    status: Status
    reason: str
    tools: tuple[Any, ...] = ()
    client: InWorker | None = None
    logs: SessionLogs = field(default_factory=SessionLogs)
    resources: ResourceCatalog = field(default_factory=ResourceCatalog)
    prompts: PromptCatalog | None = None
    # Never listed here: skills are read in the worker (RemoteHub.load_skills and read_skill).
    skills: SkillCatalog = field(default_factory=SkillCatalog)
    last_used: float = 0.0

    def mark_unavailable_if_closed(self, exc: Exception) -> bool:
        """The worker marks its own session (this is only its picture)."""
        return False
