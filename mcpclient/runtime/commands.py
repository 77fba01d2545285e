"""Service functions behind the ``mcp_discover`` and ``mcp_call`` commands.

Both run their own short-lived hub (``asyncio.run``), then write what they learned to the
database and bump the version so a running web process picks the change up.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mcpclient.config.model import ConfigError, ServerConfig
from mcpclient.core import pinning
from mcpclient.core.approval import asking_causes, asking_summary
from mcpclient.core.naming import server_prefix
from mcpclient.core.redaction import masked_entry
from mcpclient.core.results import ToolResult
from mcpclient.core.state import ServerSnapshot, Status
from mcpclient.engine.hub import Hub
from mcpclient.models import McpServer
from mcpclient.runtime import pins
from mcpclient.runtime.composition import new_hub, set_hub
from mcpclient.runtime.sync import bump_version, persist_snapshot, server_configs, sync_servers


@dataclass
class DiscoveryOutcome:
    """One server's result of a discovery run."""

    snapshot: ServerSnapshot
    entry: Any = None  # the mcp.json entry as written

    @property
    def failed(self) -> bool:
        """True unless the server became ready."""
        return self.snapshot.status is not Status.READY

    @property
    def approval_reasons(self) -> list[str]:
        """One approval reason per offered tool ("" for a tool that runs without asking)."""
        return [t.approval_reason for t in self.snapshot.tools if t.offered]

    @property
    def asking(self) -> str:
        """How many offered tools ask before each call, and why ("" when none does)."""
        return asking_summary(self.approval_reasons)

    def as_dict(self) -> dict[str, Any]:
        """The JSON form printed by ``mcp_discover --json``."""
        s = self.snapshot
        causes = asking_causes(self.approval_reasons)
        return {
            "name": s.name,
            "status": s.status.value,
            "config": masked_entry(self.entry),
            "tool_count": sum(t.offered for t in s.tools),
            "held_count": pinning.held_count(s.tools),
            "rejected_count": sum(t.rejected for t in s.tools),
            "approval_count": sum(causes.values()),
            "approval_causes": causes,
            "error": s.last_error,
            "protocol_version": s.protocol_version,
            "server_info": s.server_info,
            "tools": [
                {
                    "prefixed_name": s.prefixed_names.get(t.name, ""),
                    "name": t.name,
                    "title": t.title,
                    "description": t.description,
                    "input_schema": t.input_schema,
                    "annotations": t.annotations,
                    "output_schema": t.output_schema,
                    "rejected": t.rejected,
                    "filtered": t.filtered,
                    "reason": t.reject_reason,
                    "approval": t.approval_reason,
                    "warning": s.warnings.get(t.name, ""),
                    "held": t.held,
                    "pin_note": t.pin_note,
                    "findings": list(t.findings),
                    "digest": t.digest,
                }
                for t in s.tools
            ],
        }


@dataclass(frozen=True)
class EntryError:
    """A server that could not even be started (``server`` is None when the whole run failed)."""

    server: str | None
    error: str

    def as_dict(self) -> dict[str, Any]:
        """The JSON form of one item of ``errors``."""
        return {"server": self.server, "error": self.error}


@dataclass
class DiscoveryReport:
    """What one ``mcp_discover`` run learned: each started server, and what could not start."""

    outcomes: list[DiscoveryOutcome] = field(default_factory=list)
    errors: list[EntryError] = field(default_factory=list)
    shape: str | None = None  # the host shape mcp.json is written in (None: unreadable or missing)
    accepted: list[tuple[str, str, str]] = field(default_factory=list)  # (server, tool, digest) --accept took

    @property
    def failures(self) -> list[str]:
        """Names of the servers asked about that did not become ready, entry errors included."""
        names = [error.server for error in self.errors if error.server is not None]
        return names + [outcome.snapshot.name for outcome in self.outcomes if outcome.failed]

    @property
    def ok(self) -> bool:
        """True when every server asked about became ready (and there was nothing wrong)."""
        return not self.errors and not any(outcome.failed for outcome in self.outcomes)

    def as_dict(self) -> dict[str, Any]:
        """The JSON document ``mcp_discover --json`` prints, whatever happened."""
        return {
            "shape": self.shape,
            "accepted": [
                {"server": server, "tool": tool, "digest": digest} for server, tool, digest in self.accepted
            ],
            "servers": [outcome.as_dict() for outcome in self.outcomes],
            "errors": [error.as_dict() for error in self.errors],
        }


def _select(names: list[str]) -> tuple[list[ServerConfig], list[EntryError], str | None]:
    """Sync the file, then (configs to connect, entries asked about that cannot run).

    With names: each must be a valid, enabled entry. Without: every enabled entry, and the
    enabled ones the file declares invalid are errors. ``ConfigError`` when the file as a whole
    is unreadable. The third item names the file's host shape (None without a file).
    """
    synced = sync_servers()
    shape = synced.shape.named if synced.exists else None
    configs = {config.name: config for config in server_configs()}
    rows = {row.name: row for row in McpServer.objects.all()}
    if not names:
        errors = [
            EntryError(row.name, row.config_error)
            for row in rows.values()
            if row.config_error and row.enabled
        ]
        return [config for config in configs.values() if config.enabled], errors, shape
    chosen: list[ServerConfig] = []
    errors = []
    for name in dict.fromkeys(names):  # a name given twice is connected once
        row, config = rows.get(name), configs.get(name)
        if row is None:
            errors.append(EntryError(name, f'no MCP server named "{name}" in mcp.json'))
        elif row.config_error or config is None:
            errors.append(EntryError(name, row.config_error or f'MCP server "{name}": invalid entry'))
        elif not config.enabled:
            message = f'MCP server "{name}" is disabled; enable it in mcp.json or the admin first'
            errors.append(EntryError(name, message))
        else:
            chosen.append(config)
    return chosen, errors, shape


def _discover(chosen: list[ServerConfig]) -> list[DiscoveryOutcome]:
    """Connect ``chosen``, list their tools, store what was learned and bump the version."""

    # Reviewed against the pins and recorded: what this run shows is what gets pinned.
    recorder = pins.ListingRecorder([config.name for config in chosen])

    async def run() -> list[ServerSnapshot]:
        hub = new_hub(persist=False, pins=recorder)
        try:
            await hub.start(chosen)
            return hub.snapshots()
        finally:
            await hub.stop()

    snapshots = asyncio.run(run())
    recorded = recorder.record()
    snapshots = [_with_verdicts(snapshot, recorded.get(snapshot.name, {})) for snapshot in snapshots]
    for snapshot in snapshots:
        persist_snapshot(snapshot)
    bump_version()
    entries = {config.name: config.raw for config in chosen}
    return [DiscoveryOutcome(snapshot, entries.get(snapshot.name)) for snapshot in snapshots]


def _with_verdicts(snapshot: ServerSnapshot, verdicts: dict[str, pinning.Verdict]) -> ServerSnapshot:
    """``snapshot`` with the recorded pin verdicts on its tools (those another process may have
    changed since the run read the pins)."""
    if not verdicts:
        return snapshot
    tools = tuple(
        dataclasses.replace(tool, held=verdict.held, pin_note=verdict.note, findings=verdict.findings)
        if (verdict := verdicts.get(tool.name)) is not None
        else tool
        for tool in snapshot.tools
    )
    return dataclasses.replace(snapshot, tools=tools)


def list_without_storing(configs: list[ServerConfig]) -> list[DiscoveryOutcome]:
    """Connect ``configs`` (entries not necessarily in mcp.json yet), list their tools, and stop.

    Nothing is stored and no version is bumped: ``mcp_import --list-tools`` counts the tools
    that will ask before each call, also for a dry run.
    """

    async def run() -> list[ServerSnapshot]:
        hub = new_hub(persist=False)
        try:
            await hub.start(configs)
            return hub.snapshots()
        finally:
            await hub.stop()

    entries = {config.name: config.raw for config in configs}
    return [DiscoveryOutcome(snapshot, entries.get(snapshot.name)) for snapshot in asyncio.run(run())]


def discover_servers(names: list[str]) -> list[DiscoveryOutcome]:
    """Connect the named (or all enabled) servers, list their tools and store them.

    Raises ``ValueError`` before starting anything when a named server is unknown, invalid or
    disabled (the admin shows it); invalid entries are skipped when no names are given.
    """
    chosen, errors, _ = _select(names)
    if names and errors:
        raise ValueError(errors[0].error)
    return _discover(chosen)


def discovery_report(names: list[str], *, accept: bool = False) -> DiscoveryReport:
    """Like :func:`discover_servers`, but every problem is data (``mcp_discover`` uses it).

    The servers that can start are discovered; unknown, invalid or disabled entries, or an
    unreadable file, become ``errors``, so the command can report everything and still print
    valid JSON. With ``accept`` (``--accept``), the definitions the last review of the chosen
    servers recorded and held (changed, new or flagged: what ``mcp_discover`` showed as held) are
    accepted first; what the servers list now is then reviewed against them.
    """
    try:
        chosen, errors, shape = _select(names)
    except ConfigError as exc:
        return DiscoveryReport(errors=[EntryError(None, str(exc))])
    accepted = []
    if accept:
        taken = pins.accept_recorded([config.name for config in chosen])
        accepted = [(pin.server, pin.tool, pin.digest) for pin in taken]
    return DiscoveryReport(outcomes=_discover(chosen), errors=errors, shape=shape, accepted=accepted)


def _not_offered(hub: Hub, prefixed_name: str) -> str:
    """Why no ready server offers ``prefixed_name``, naming the servers that did not start."""
    for snapshot in hub.snapshots():
        for tool in snapshot.tools:
            if snapshot.prefixed_names.get(tool.name) == prefixed_name and tool.reject_reason:
                return f'the tool "{prefixed_name}" is not offered: {" ".join(tool.reject_reason.split())}'
    message = f'no ready MCP server offers a tool named "{prefixed_name}"'
    down = [
        f'"{s.name}" {s.status.value}: {" ".join(s.last_error.split())}'
        if s.last_error
        else f'"{s.name}" {s.status.value}'
        for s in hub.snapshots()
        if s.status not in (Status.READY, Status.DISABLED)
    ]
    if down:
        message += f" (servers not ready: {'; '.join(down)})"
    return message + "; manage.py mcp_discover lists the tools"


def call_tool_once(prefixed_name: str, arguments: dict[str, Any]) -> ToolResult:
    """Start the server that offers the tool, call it by its prefixed name, stop it.

    Only the enabled servers whose tools' names begin as ``prefixed_name`` does are started
    (all of them when none does). Raises ``ValueError`` when no ready server offers the tool
    (unknown name, rejected tool, its server down); a failing call comes back as an error result.
    """
    enabled, _, _ = _select([])
    owners = [config for config in enabled if prefixed_name.startswith(server_prefix(config.name))]
    enabled = owners or enabled

    async def run() -> ToolResult:
        hub = new_hub(persist=False)
        try:
            await hub.start(enabled)
            if prefixed_name not in {tool.prefixed_name for tool in hub.tools()}:
                raise ValueError(_not_offered(hub, prefixed_name))
            return await hub.call_tool(prefixed_name, arguments)
        finally:
            await hub.stop()

    return asyncio.run(run())


def with_live_tools[T](read: Callable[[], T]) -> T:
    """Start the enabled servers, run ``read`` while they are the process's hub, then stop them.

    For commands that look at the tools as the chat sees them (``manage.py tool_search --agent``).
    """
    enabled, _, _ = _select([])

    async def run() -> T:
        hub = new_hub(persist=False)
        try:
            await hub.start(enabled)
            set_hub(hub)
            return read()
        finally:
            set_hub(None)
            await hub.stop()

    return asyncio.run(run())
