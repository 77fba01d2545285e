"""What every layer says about a server and its tools: state, discovered tools, snapshots.

Values only (frozen dataclasses, an enum): the hub publishes them, the worker's wire carries them as
dicts, the database mirrors them, the admin and the chat read them. ``discover_tool`` is the
discovery policy applied to each listed tool: the entry's ``includeTools`` / ``excludeTools``
first, then the read-only guard or approval (:mod:`mcpclient.core.approval`). A tool left out is
kept with its reason, so the admin can show it, but it is never offered.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import mcp.types as types

from mcpclient.core import mcp_apps
from mcpclient.core.approval import WRITE_TOOLS_APPROVE, WRITE_TOOLS_REJECT, approval_reason, vouched
from mcpclient.core.patterns import glob_match
from mcpclient.core.tool_metadata import safe_icons, tool_title


class Status(StrEnum):
    """The state of one server, as shown in the admin and the status line."""

    DISABLED = "disabled"
    CONNECTING = "connecting"
    READY = "ready"
    FAILED = "failed"
    UNAVAILABLE = "unavailable"
    # OAuth (see mcpclient.engine.authorization): nobody has signed in yet, or the sign-in expired.
    AUTH_REQUIRED = "auth_required"
    # A "perUser" server: each person connects their own account (its sessions are per person).
    PER_USER = "per_user"


@dataclass(frozen=True)
class DiscoveredTool:
    """A tool as listed by its server: offered, rejected (read-only guard) or filtered (config).

    ``reject_reason`` says why a rejected or filtered tool is not offered. ``title`` and
    ``icons`` are cleaned by :mod:`mcpclient.core.tool_metadata` (untrusted, display only).
    ``approval_reason`` says why each call of an offered tool waits for the person's approval
    (``writeTools: "approve"``, ``trusted: false``, a tool that does not declare
    ``readOnlyHint: true`` and that its entry's ``readOnly`` does not vouch for; see
    :mod:`mcpclient.core.approval`).
    """

    name: str
    description: str
    input_schema: dict[str, Any]
    annotations: dict[str, Any] | None
    rejected: bool = False
    reject_reason: str = ""
    filtered: bool = False
    title: str = ""
    icons: tuple[dict[str, Any], ...] = ()
    output_schema: dict[str, Any] | None = None
    approval_reason: str = ""
    # MCP Apps (mcpclient.core.mcp_apps): the tool's view, who may call it, what of _meta.ui was ignored.
    ui_resource_uri: str = ""
    visibility: tuple[str, ...] = mcp_apps.VISIBILITY
    ui_note: str = ""
    # Pinning (mcpclient.core.pinning): the digest of its definition; held back until an
    # administrator accepts a changed or new definition; the sentence the admin shows; what the
    # poisoning check found in its description.
    digest: str = ""
    held: bool = False
    pin_note: str = ""
    findings: tuple[str, ...] = ()

    @property
    def needs_approval(self) -> bool:
        """True when the tool may be called and each call waits for the person's approval."""
        return self.usable and bool(self.approval_reason)

    @property
    def read_only(self) -> bool:
        """False only when ``readOnlyHint`` is explicitly false."""
        return not (self.annotations and self.annotations.get("readOnlyHint") is False)

    @property
    def usable(self) -> bool:
        """Neither filtered, rejected nor held: the model or a view may call it, as its visibility says."""
        return not (self.rejected or self.filtered or self.held)

    @property
    def offered(self) -> bool:
        """True when the model may be offered this tool (usable, and visible to the model)."""
        return self.usable and mcp_apps.MODEL in self.visibility

    @property
    def app_callable(self) -> bool:
        """True when its server's views may call this tool (usable, and visible to apps)."""
        return self.usable and mcp_apps.APP in self.visibility


@dataclass(frozen=True)
class HubTool:
    """An accepted tool of a ready server, under the name the model sees."""

    prefixed_name: str
    server: str
    name: str
    description: str
    input_schema: dict[str, Any]
    annotations: dict[str, Any] | None
    read_only: bool = True
    warning: str = ""
    title: str = ""
    icons: tuple[dict[str, Any], ...] = ()
    output_schema: dict[str, Any] | None = None
    approval_reason: str = ""  # why each call needs the person's approval ("" when it does not)
    ui_resource_uri: str = ""  # the view its results are shown in (MCP Apps), "" for none
    model: bool = True  # offered to the model (its _meta.ui.visibility holds "model")
    app: bool = False  # callable from its server's views (visibility holds "app"; views are on)
    digest: str = ""  # of the accepted definition it is offered under (mcpclient.core.pinning)


@dataclass(frozen=True)
class ServerSnapshot:
    """A copy of one server's state handed to listeners."""

    name: str
    status: Status
    last_error: str
    connected_at: dt.datetime | None
    protocol_version: str
    server_info: dict[str, Any]
    tools: tuple[DiscoveredTool, ...]
    prefixed_names: dict[str, str]  # tool name -> prefixed name
    warnings: dict[str, str]  # tool name -> naming warning
    stderr_tail: tuple[str, ...]
    transport: str = ""  # the transport the live session uses ("" while not connected)
    # Healing (mcpclient.engine.healing): reconnect attempts in a row, when the next one starts (None:
    # none scheduled) and whether the circuit is open (the limit was reached).
    attempts: int = 0
    next_retry_at: dt.datetime | None = None
    circuit_open: bool = False
    log_note: str = ""  # what became of the log level on the live session (ServerLogs.note)
    tools_note: str = ""  # the tools left out past the limit per server (protocol.MAX_TOOLS)

    @classmethod
    def disabled(cls, name: str, status: Status = Status.DISABLED) -> ServerSnapshot:
        """The state of a server without a session of its own (disabled, or one per person)."""
        return cls(
            name=name,
            status=status,
            last_error="",
            connected_at=None,
            protocol_version="",
            server_info={},
            tools=(),
            prefixed_names={},
            warnings={},
            stderr_tail=(),
        )


Listener = Callable[[ServerSnapshot], Awaitable[None] | None]


def filter_reason(name: str, include: Sequence[str] | None, exclude: Sequence[str]) -> str:
    """Why an entry's ``includeTools`` / ``excludeTools`` leave the tool ``name`` out ("" if kept).

    Gemini CLI's semantics: with ``includeTools`` a tool must match one of its patterns, and a
    tool that matches an ``excludeTools`` pattern is left out even then. Patterns are the agent
    globs (``*`` is the only wildcard) applied to the tool's name on its server.
    """
    excluded_by = [pattern for pattern in exclude if glob_match(pattern, name)]
    if excluded_by:
        return f'left out by "excludeTools": {json.dumps(excluded_by, ensure_ascii=False)}'
    if include is not None and not any(glob_match(pattern, name) for pattern in include):
        shown = json.dumps(list(include), ensure_ascii=False)
        return f'left out by "includeTools": it matches none of {shown}'
    return ""


def discover_tool(
    tool: types.Tool,
    *,
    include: Sequence[str] | None = None,
    exclude: Sequence[str] = (),
    write_tools: str = WRITE_TOOLS_REJECT,
    trusted: bool = True,
    read_only: Sequence[str] = (),
    own: bool = False,
) -> DiscoveredTool:
    """Apply the entry's tool filters, then the read-only guard or approval, to one listed tool.

    With ``write_tools="approve"`` a tool whose ``readOnlyHint`` is false is offered and marked
    as needing approval instead of rejected; with ``trusted=False`` every offered tool is marked;
    a tool that does not declare ``readOnlyHint: true`` is marked unless ``read_only`` (the
    entry's ``readOnly`` globs) vouches for it (``own``: a person's own server, said so).
    """
    annotations = tool.annotations.model_dump(by_alias=True, exclude_none=True) if tool.annotations else None
    ui = mcp_apps.tool_ui(tool.meta)
    discovered = DiscoveredTool(
        name=tool.name,
        description=tool.description or "",
        input_schema=dict(tool.input_schema or {"type": "object"}),
        annotations=annotations,
        title=tool_title(tool),
        icons=safe_icons(tool.icons),
        output_schema=dict(tool.output_schema) if tool.output_schema is not None else None,
        ui_resource_uri=ui.resource_uri,
        visibility=ui.visibility,
        ui_note=ui.note,
    )
    reason = filter_reason(tool.name, include, exclude)
    if reason:
        # The administrator left it out: the read-only verdict does not matter any more.
        return dataclasses.replace(discovered, filtered=True, reject_reason=reason)
    if not discovered.read_only and write_tools != WRITE_TOOLS_APPROVE:
        return dataclasses.replace(
            discovered,
            rejected=True,
            reject_reason="readOnlyHint is false: only read-only tools are offered to the model",
        )
    reason = approval_reason(
        annotations,
        write_tools=write_tools,
        trusted=trusted,
        vouched_for=vouched(read_only, tool.name),
        own=own,
    )
    return dataclasses.replace(discovered, approval_reason=reason) if reason else discovered
